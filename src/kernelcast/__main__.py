from kernelcast.cli import run

run()

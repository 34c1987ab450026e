"""Example workloads shipped with kernelcast (pure PyTorch): `kernelcast predict example:NAME`."""

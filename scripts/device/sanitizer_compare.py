"""kernelcast's stream hazards against PyTorch's CUDA Stream Sanitizer (torch.cuda._sanitizer), on the programs of
examples/stream_programs.py (issue 37).

On a machine with a GPU, each program runs once in a fresh process with the sanitizer on (TORCH_CUDA_SANITIZER=1:
it raises CUDASanitizerErrors at the first op that races with an earlier one on another stream):

    PYTHONPATH=src python3 scripts/device/sanitizer_compare.py run --out $OUT/sanitizer.json

Here, each program is captured and its hazards found (predict/hazards.py), and the two are set side by side:

    python3 scripts/device/sanitizer_compare.py compare validation/streams/sanitizer.json

The sanitizer sees unordered reads and writes of one run; freed-while-in-use (a block the caching allocator may
hand out while another stream still uses it) is kernelcast's alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
UNORDERED = ("unordered-read", "unordered-write")
RUN_TIMEOUT_S = 120


def _inputs(torch):
    torch.manual_seed(0)
    return (torch.randn(512, 512, device="cuda"), torch.randn(512, 512, device="cuda"),
            torch.randn(512, 512).pin_memory())


def one(name: str) -> int:
    """Run one program on the GPU under the sanitizer (enabled by the environment); print what it reported."""
    import torch
    from torch.cuda import _sanitizer

    from stream_programs import PROGRAMS

    if not getattr(getattr(_sanitizer, "cuda_sanitizer", None), "enabled", False):
        _sanitizer.enable_cuda_sanitizer()  # the environment variable enables it at import on most versions
    x, w, host = _inputs(torch)
    torch.cuda.synchronize()
    entry = {"program": name, "reported": False, "errors": []}
    try:
        PROGRAMS[name](x, w, host)
        torch.cuda.synchronize()
    except Exception as exc:  # CUDASanitizerErrors (torch.cuda._sanitizer), raised at the racing op
        entry["reported"] = type(exc).__name__ == "CUDASanitizerErrors"
        entry["errors"] = [line.strip() for line in str(exc).splitlines() if line.strip()][:12]
        entry["exception"] = type(exc).__name__
    print(json.dumps(entry))
    return 0


def run(out: str) -> int:
    import torch

    from stream_programs import PROGRAMS

    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "command": "PYTHONPATH=src python3 scripts/device/sanitizer_compare.py run " + " ".join(sys.argv[2:]),
           "programs": {}}
    env = {**os.environ, "TORCH_CUDA_SANITIZER": "1"}
    for name in PROGRAMS:
        proc = subprocess.run([sys.executable, __file__, "one", name], env=env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        doc["programs"][name] = json.loads(lines[-1]) if lines else {"program": name, "error": proc.stderr[-1500:]}
        print(name, doc["programs"][name].get("reported"), flush=True)
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


def compare(path: str) -> int:
    import kernelcast  # noqa: F401  (before torch)
    import torch

    from kernelcast.capture import capture
    from kernelcast.predict.hazards import find_hazards
    from stream_programs import PROGRAMS, RACY

    doc = json.loads(Path(path).read_text())
    print(f"{'program':30s} {'kernelcast':40s} {'sanitizer':10s} agree on unordered accesses")
    agree = 0
    for name, program in PROGRAMS.items():
        with capture("h200") as cap:
            with cap.paused():
                x, w, host = _inputs(torch)
            program(x, w, host)
        ours = [h.kind for h in find_hazards(cap.capture)]
        sanitizer = doc["programs"].get(name, {}).get("reported")
        same = any(k in UNORDERED for k in ours) == bool(sanitizer)
        agree += same
        print(f"{name:30s} {', '.join(ours) or 'none':40s} {str(sanitizer):10s} {'yes' if same else 'NO'}"
              f"{'' if name in {p.__name__ for p in RACY} else '  (correct program)'}")
    print(f"agree on {agree} of {len(PROGRAMS)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("run", "one", "compare"))
    parser.add_argument("arg", nargs="?", help="one: the program; compare: the device's file")
    parser.add_argument("--out", default="sanitizer.json")
    args = parser.parse_args()
    if args.what == "one":
        return one(args.arg)
    if args.what == "run":
        return run(args.out)
    return compare(args.arg)


if __name__ == "__main__":
    sys.exit(main())

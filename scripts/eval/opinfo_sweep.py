"""Coverage sweep: every OpInfo in PyTorch's op_db, with its CUDA dtypes' sample inputs, through capture and costs.

    PYTHONPATH=src python3 scripts/eval/opinfo_sweep.py --out validation/opinfo_sweep.json --doc docs/opinfo_sweep.md
    PYTHONPATH=src python3 scripts/eval/opinfo_sweep.py --only linalg.solve nn.functional.conv2d --samples 3

For each OpInfo (torch.testing._internal.common_methods_invocations.op_db) and each dtype of
`op.supported_dtypes("cuda")`, the first `--samples` sample inputs are made on the CPU, copied to kernelcast's
fake CUDA device (not recorded), and run through the capture: the forward, and where the dtype supports
backward, a backward from every differentiable output (ones as the incoming gradient). Each recorded aten op is
costed (kernelcast.costs.cost_of); an op with no formula is uncosted. torch.utils.flop_counter.FlopCounterMode
runs above the recorder on the same ops, so wherever it has a formula the two FLOP counts are compared op by op
on identical shapes.

A sample the capture cannot run (an op fake tensors cannot run, a data-dependent output, ...) is a result: it is
reported per OpInfo with its reason in one line, and the sweep goes on. Reported per OpInfo: samples captured /
failed (first reason), the aten ops recorded, the uncosted ones, FLOP differences with flop_counter. The summary
counts distinct aten ops (overloads) seen in captured samples and the share costed (issue 9's target: >= 95%).

Known FLOP differences, listed as "known", not as mismatches: torch.utils.flop_counter counts a grouped
convolution's weight gradient `groups` times too many (it convolves the whole input with the whole output
gradient); kernelcast counts it as the forward (costs/matmul.py, conv_backward_flops). For causal attention
flop_counter counts every (query, key) pair; kernelcast the pairs the fused kernels compute (costs/attention.py).
flop_counter reads the raw kernels under SDPA (_flash_attention_*, _efficient_attention_*), whose tensors are
(batch, seq, heads, dim), as (batch, heads, seq, dim): kernelcast uses their real layout.
A sample on which flop_counter itself raises is captured again without it (counted as flop_counter_errors).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import logging
import os
import signal
import string
import sys
import time
import traceback
import warnings
from pathlib import Path

import kernelcast  # noqa: F401  (before torch: fake CUDA hooks for autograd on a CPU-only torch)

import torch
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from kernelcast.capture.api import target_device
from kernelcast.capture.session import CaptureSession
from kernelcast.costs import DEFAULT_CONTEXT, cost_of
from kernelcast.devices import get_gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "device"))
from probe_opinfo_items import op_db  # noqa: E402  (op_db importable without expecttest: the device probe's)
DEFAULT_SAMPLES = 4  # sample inputs per (op, dtype): bounded so the sweep runs in minutes on 2 cores
FLOP_RTOL = 1e-9
FLOP_PACKETS = {str(p): p for p in flop_registry}  # "aten.mm" -> packet: ops flop_counter has a formula for
REASON_CHARS = 160
FLOP_COUNTER_FILE = "torch/utils/flop_counter.py"
SAMPLE_SECONDS = 20.0  # a sample (or an OpInfo's sample maker) that runs longer is reported as a timeout


def one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return " ".join(text.split())[:REASON_CHARS]


def op_id(opinfo) -> str:
    return f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name


class SampleTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise SampleTimeout in the main thread after `seconds` (a sample that loops on placeholder values)."""
    def expire(signum, frame):
        raise SampleTimeout(f"no result after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def record_slice(session: CaptureSession, run) -> tuple[list, Exception | None]:
    """Run `run()` with recording on; the records it added (dropped from the session) and its error, if any."""
    recorder = session.recorder
    start = len(recorder.ops)
    error = None
    session.recording = True
    try:
        with time_limit(SAMPLE_SECONDS):
            run()
    except Exception as exc:  # a sample the capture cannot run is a result
        error = exc
    finally:
        session.recording = False
        records = recorder.ops[start:]
        del recorder.ops[start:]
        del recorder.torch_calls[start:]
    return records, error


def cost_records(records) -> tuple[set[str], list[str], collections.Counter]:
    """(uncosted overloads, formula errors, kernelcast FLOPs per packet flop_counter has a formula for)."""
    uncosted: set[str] = set()
    errors: list[str] = []
    flops: collections.Counter = collections.Counter()
    for r in records:
        try:
            cost = cost_of(r, DEFAULT_CONTEXT)
        except Exception as exc:  # a formula that cannot read this op's arguments: a bug to report
            errors.append(f"{r.op}: {one_line(exc)}")
            continue
        if cost is None:
            uncosted.add(r.op)
        elif r.packet in FLOP_PACKETS:
            flops[r.packet] += cost.flops
    return uncosted, errors, flops


def flop_differences(kc: collections.Counter, counter: FlopCounterMode) -> dict[str, list[float]]:
    """Packets where kernelcast's FLOPs differ from flop_counter's on the same ops: {packet: [ours, theirs]}."""
    theirs = {str(p): n for p, n in counter.get_flop_counts().get("Global", {}).items()}
    diffs = {}
    for packet in set(theirs) | {p for p, n in kc.items() if n}:
        ours, ref = float(kc.get(packet, 0.0)), float(theirs.get(packet, 0))
        if abs(ours - ref) > FLOP_RTOL * max(abs(ref), 1.0):
            diffs[packet] = [ours, ref]
    return diffs


class Sweep:
    """One capture session per OpInfo (entering one costs ~10 ms); each sample is a slice of its recorder."""

    def __init__(self, gpu: str, samples: int, backward: bool) -> None:
        spec = get_gpu(gpu)
        self.target, self.arch = target_device(spec), spec.cuda_arch
        self.samples, self.backward = samples, backward

    def run_op(self, opinfo) -> dict:
        result = {"dtypes": [], "samples": 0, "captured": 0, "failed": 0, "reasons": [],
                  "aten_ops": collections.Counter(), "uncosted": set(), "cost_errors": [],
                  "flops_compared": 0, "flop_mismatches": [], "flop_known": collections.Counter(),
                  "flop_counter_errors": []}
        cases = self._cases(opinfo, result)  # made before the session: sample makers loop on real values
        try:
            with CaptureSession(self.target, self.arch) as session:
                for dtype, grad, samples in cases:
                    for sample in samples:
                        result["samples"] += 1
                        self._run_sample(session, opinfo, sample, grad, dtype, result)
        except Exception as exc:  # the session itself failed: still a result for this op
            result["reasons"].append(f"session: {one_line(exc)}")
        return result

    def _cases(self, opinfo, result: dict) -> list[tuple[str, bool, list]]:
        """(dtype name, with backward, the first `samples` CPU sample inputs) per CUDA dtype of the OpInfo."""
        cases = []
        for dtype in sorted(opinfo.supported_dtypes("cuda"), key=str):
            name = str(dtype).removeprefix("torch.")
            result["dtypes"].append(name)
            grad = (self.backward and opinfo.supports_autograd
                    and dtype in opinfo.supported_backward_dtypes("cuda"))
            try:
                with time_limit(SAMPLE_SECONDS):
                    samples = list(itertools.islice(opinfo.sample_inputs("cpu", dtype, requires_grad=grad),
                                                    self.samples))
            except Exception as exc:  # the OpInfo cannot make CPU inputs for this dtype: not a capture result
                result["reasons"].append(f"no CPU sample inputs for {name}: {one_line(exc)}")
                continue
            cases.append((name, grad, samples))
        return cases

    def _run_sample(self, session: CaptureSession, opinfo, sample, grad: bool, dtype: str, result: dict) -> None:
        counter = FlopCounterMode(display=False)
        try:
            with torch.no_grad():
                fake = _to_fake_cuda(sample)  # not recorded: set-up, as a step's inputs are
        except Exception as exc:
            result["failed"] += 1
            result["reasons"].append(f"{dtype}: copy to fake CUDA: {one_line(exc)}")
            return

        def run(count: bool) -> None:
            with counter if count else contextlib.nullcontext():
                out = opinfo(fake.input, *fake.args, **fake.kwargs)
                outs = _differentiable(out) if grad else []
                if outs:
                    torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])

        records, error = record_slice(session, lambda: run(True))
        counted = error is None
        if error is not None and _raised_in_flop_counter(error):  # flop_counter's own failure: capture without it
            result["flop_counter_errors"].append(f"{dtype}: {one_line(error)}")
            records, error = record_slice(session, lambda: run(False))
        if error is not None:
            result["failed"] += 1
            result["reasons"].append(f"{dtype}: {one_line(error)}")
            return
        result["captured"] += 1
        result["aten_ops"].update(r.op for r in records if not r.op.startswith("host."))
        uncosted, errors, kc_flops = cost_records(records)
        result["uncosted"] |= uncosted
        result["cost_errors"] += errors
        if counted and any(p in FLOP_PACKETS for p in (r.packet for r in records)):
            result["flops_compared"] += 1
            diffs = flop_differences(kc_flops, counter)
            known = {packet: reason for packet in diffs if (reason := known_flop_difference(packet, records))}
            for reason in set(known.values()):
                result["flop_known"][reason] += 1
            unexplained = {packet: v for packet, v in diffs.items() if packet not in known}
            if unexplained:
                result["flop_mismatches"].append({"dtype": dtype, "packets": unexplained})


def _raised_in_flop_counter(exc: BaseException) -> bool:
    """Raised by a flop_counter formula itself (its mode sits above the capture, so every error passes it)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename.endswith(FLOP_COUNTER_FILE)


def _to_fake_cuda(sample):
    """The sample with every CPU tensor copied to the fake CUDA device, requiring grad where the CPU one did."""
    def move(t):
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            return t
        moved = t.detach().to("cuda")
        return moved.requires_grad_() if t.requires_grad else moved

    return sample.transform(move)


def _differentiable(out) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(out)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None]


GROUPED_CONV_WEIGHT_GRADIENT = "grouped conv weight gradient"
CAUSAL_ATTENTION = "causal attention"
RAW_ATTENTION_LAYOUT = "flash/efficient kernel layout"
ATTENTION_PACKETS = {p for p in FLOP_PACKETS if "attention" in p}
# The kernels under SDPA take (batch, seq, heads, dim) tensors; flop_counter reads them as (batch, heads, seq, dim).
RAW_ATTENTION_PACKETS = {"aten._flash_attention_forward", "aten._flash_attention_backward",
                         "aten._efficient_attention_forward", "aten._efficient_attention_backward"}


def known_flop_difference(packet: str, records) -> str | None:
    """Why kernelcast's FLOPs for `packet` differ from flop_counter's on purpose, if they do (module docstring):
    a grouped conv's weight gradient (flop_counter counts it `groups` times), causal attention (kernelcast
    counts the attended pairs, flop_counter all of them), or the raw flash / efficient attention kernels
    (flop_counter swaps their heads and sequence dims)."""
    ops = [r for r in records if r.packet == packet]
    if packet == "aten.convolution_backward" and any(
            int(r.args.get("groups") or 1) > 1 and (r.args.get("output_mask") or (True, True))[1] for r in ops):
        return GROUPED_CONV_WEIGHT_GRADIENT
    if packet in RAW_ATTENTION_PACKETS:
        return RAW_ATTENTION_LAYOUT
    if packet in ATTENTION_PACKETS and any(r.args.get("is_causal") or r.args.get("causal") for r in ops):
        return CAUSAL_ATTENTION
    return None


def summarize(per_op: dict[str, dict]) -> dict:
    seen: collections.Counter = collections.Counter()
    uncosted: dict[str, list[str]] = collections.defaultdict(list)
    for name, r in per_op.items():
        seen.update(r["aten_ops"])
        for op in r["uncosted"]:
            uncosted[op].append(name)
    costed = len(seen) - len(uncosted)
    ops = per_op.values()
    return {
        "opinfos": len(per_op),
        "opinfos_all_samples_captured": sum(1 for r in ops if r["samples"] and not r["failed"]),
        "opinfos_some_failed": sum(1 for r in ops if r["failed"] and r["captured"]),
        "opinfos_none_captured": sum(1 for r in ops if not r["captured"] and r["dtypes"]),
        "samples": sum(r["samples"] for r in ops), "samples_captured": sum(r["captured"] for r in ops),
        "samples_failed": sum(r["failed"] for r in ops),
        "aten_ops_seen": len(seen), "aten_ops_costed": costed,
        "costed_share": round(costed / len(seen), 4) if seen else None,
        "uncosted": {op: sorted(names)[:5] for op, names in sorted(uncosted.items())},
        "cost_errors": sum(len(r["cost_errors"]) for r in ops),
        "flop_samples_compared": sum(r["flops_compared"] for r in ops),
        "flop_mismatch_samples": sum(len(r["flop_mismatches"]) for r in ops),
        "flop_known_difference_samples": dict(sum((r["flop_known"] for r in ops), collections.Counter())),
        "flop_counter_errors": sum(len(r["flop_counter_errors"]) for r in ops),
        "opinfos_without_cuda_dtypes": sorted(name for name, r in per_op.items() if not r["dtypes"]),
        "crashes": {name: (list(dict.fromkeys(r["reasons"])) or [""])[0] for name, r in per_op.items()
                    if r["failed"]},
    }


def _compact(r: dict) -> dict:
    """One OpInfo's JSON entry: counts, the first few reasons (distinct), sorted op lists."""
    reasons = list(dict.fromkeys(r["reasons"]))
    out = {"dtypes": len(r["dtypes"]), "samples": r["samples"], "captured": r["captured"], "failed": r["failed"],
           "aten_ops": sorted(r["aten_ops"])}
    if reasons:
        out["reasons"] = reasons[:3]
    if r["uncosted"]:
        out["uncosted"] = sorted(r["uncosted"])
    if r["cost_errors"]:
        out["cost_errors"] = list(dict.fromkeys(r["cost_errors"]))[:3]
    if r["flops_compared"]:
        out["flops_compared"] = r["flops_compared"]
    if r["flop_mismatches"]:
        out["flop_mismatches"] = r["flop_mismatches"][:3]
    if r["flop_known"]:
        out["flop_known"] = dict(r["flop_known"])
    if r["flop_counter_errors"]:
        out["flop_counter_errors"] = list(dict.fromkeys(r["flop_counter_errors"]))[:2]
    return out


DOC_TEMPLATE = string.Template("""# OpInfo coverage sweep

Every OpInfo in PyTorch's `op_db` (torch.testing._internal.common_methods_invocations) with each of its CUDA
dtypes, the first $per_dtype sample inputs per dtype, forward and (where the dtype supports it) backward, captured
on fake CUDA by kernelcast and costed. Made by

    PYTHONPATH=src $command

(torch $torch, target $gpu; $seconds s on the development machine's 2 shared cores). The data:
`validation/opinfo_sweep.json`.

## Headline

| | |
|---|---|
| OpInfos | $opinfos ($no_cuda without CUDA dtypes: $no_cuda_names) |
| all samples captured | $all_captured |
| some samples failed / none captured | $some_failed / $none_captured |
| samples captured / run | $samples_captured / $samples |
| distinct aten ops seen | $seen |
| costed | $costed (**$share%**) |
| formula errors | $cost_errors |
| samples whose FLOPs were compared with flop_counter | $compared |
| FLOP mismatches | **$mismatches** |
| known, deliberate FLOP differences | $known |
| samples flop_counter itself failed on | $flop_counter_errors |

## Known FLOP differences (flop_counter's formula is wrong, or counts other work)

- **Grouped convolution, weight gradient.** flop_counter's `conv_backward_flop` convolves the whole
  (C_in, N, H, W) input with the whole (C_out, N, H_out, W_out) gradient as if the conv were ungrouped:
  2 * C_in * C_out * N * k * positions, `groups` times the real work. Group g's weight block (C_out/G, C_in/G, k)
  sums grad_out[g] x input[g] over the batch and positions: 2 * N * (C_out/G) * (C_in/G) * k * positions per
  group, 2 * N * C_out * (C_in/G) * k * positions in all, the forward's count. Example: x (100, 2048, 14, 14)
  fp16, w (2048, 64, 3, 3), stride 2, pad 1, groups 32: forward 2 * 100 * 2048 * 64 * 9 * 49 = 11.56 GFLOP;
  flop_counter's weight gradient 369.9 GFLOP, kernelcast's 11.56 (costs/matmul.py, conv_backward_flops;
  tests/costs/test_costs.py).
- **Raw flash / memory-efficient attention kernels** (`_flash_attention_*`, `_efficient_attention_*`): their
  tensors are (batch, seq, heads, dim); flop_counter passes them to its (batch, heads, seq, dim) formula,
  swapping heads and sequence length (and raising when seq is not a multiple of heads).
- **Causal attention.** flop_counter counts every (query, key) pair; kernelcast the pairs the fused kernels
  compute (1 + 2 + ... + S for S x S).

## Ops seen but not costed

$uncosted

## OpInfos with samples the capture could not run (first reason)

Data-dependent outputs (unique, bincount, lstsq, allclose, repeat_interleave: fake tensors have no values),
ops with no fake/meta kernel on a CPU-only torch (`empty_strided` on the CUDA backend: geqrf, ctc_loss,
grid_sample's cuDNN path, the margin losses, fractional_max_pool3d, sparse layouts), jiterator (needs a real
GPU), a torch meta bug (`_efficient_attention_backward`), and the sweep's own wholesale move of sample tensors to
CUDA (tensor_split wants its indices on the CPU).

$crashes
""")


def render_doc(doc: dict) -> str:
    """docs/opinfo_sweep.md from the sweep's JSON."""
    summary = doc["summary"]
    known = summary["flop_known_difference_samples"]
    uncosted = "\n".join(f"- `{op}` (in {', '.join(names)})" for op, names in summary["uncosted"].items())
    ops = doc["ops"]
    crashes = "\n".join(f"- `{name}` ({ops[name]['failed']} of {ops[name]['samples']} samples): {reason}"
                         for name, reason in sorted(summary["crashes"].items()))
    return DOC_TEMPLATE.substitute(
        per_dtype=doc["samples_per_dtype"], command=doc["command"], torch=doc["torch"], gpu=doc["gpu"],
        seconds=summary["seconds"], opinfos=summary["opinfos"], no_cuda=len(summary["opinfos_without_cuda_dtypes"]),
        no_cuda_names=", ".join(summary["opinfos_without_cuda_dtypes"]) or "-",
        all_captured=summary["opinfos_all_samples_captured"], some_failed=summary["opinfos_some_failed"],
        none_captured=summary["opinfos_none_captured"], samples_captured=summary["samples_captured"],
        samples=summary["samples"], seen=summary["aten_ops_seen"], costed=summary["aten_ops_costed"],
        share=round(100 * (summary["costed_share"] or 0), 1), cost_errors=summary["cost_errors"],
        compared=summary["flop_samples_compared"], mismatches=summary["flop_mismatch_samples"],
        known=", ".join(f"{reason}: {n} samples" for reason, n in known.items()) or "none",
        flop_counter_errors=summary["flop_counter_errors"], uncosted=uncosted or "none",
        crashes=crashes or "none")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="JSON to write (e.g. validation/opinfo_sweep.json)")
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, help="sample inputs per (op, dtype)")
    parser.add_argument("--limit", type=int, help="only the first N OpInfos")
    parser.add_argument("--only", nargs="*", help="OpInfo names (name or name.variant)")
    parser.add_argument("--no-backward", action="store_true")
    parser.add_argument("--doc", help="Markdown summary to write (e.g. docs/opinfo_sweep.md)")
    parser.add_argument("--render", metavar="JSON", help="only write --doc from a sweep's JSON, running nothing")
    args = parser.parse_args()
    if args.render:
        if not args.doc or not Path(args.render).is_file():
            print("error: --render needs an existing sweep JSON and --doc", file=sys.stderr)
            return 2
        Path(args.doc).write_text(render_doc(json.loads(Path(args.render).read_text())))
        return 0
    if args.samples < 1 or (args.limit is not None and args.limit < 1):
        print("error: --samples and --limit must be >= 1", file=sys.stderr)
        return 2
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)  # failures are results here
    warnings.filterwarnings("ignore")
    ops = op_db()
    if args.only:
        unknown = set(args.only) - {op_id(o) for o in ops} - {o.name for o in ops}
        if unknown:
            print(f"error: no OpInfo named {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        ops = [o for o in ops if op_id(o) in args.only or o.name in args.only]
    ops = ops[:args.limit] if args.limit else ops
    sweep = Sweep(args.gpu, args.samples, not args.no_backward)
    per_op: dict[str, dict] = {}
    t0 = time.perf_counter()
    for i, opinfo in enumerate(ops, 1):
        t = time.perf_counter()
        r = per_op[op_id(opinfo)] = sweep.run_op(opinfo)
        flag = "".join(text for text, shown in (
            (f"  failed {r['failed']}", r["failed"]), (f"  uncosted {sorted(r['uncosted'])}", r["uncosted"]),
            (f"  flop mismatches {len(r['flop_mismatches'])}", r["flop_mismatches"]),
            (f"  cost errors {len(r['cost_errors'])}", r["cost_errors"])) if shown)
        print(f"[{i}/{len(ops)}] {op_id(opinfo):40s} {r['captured']:3d}/{r['samples']:3d} "
              f"({time.perf_counter() - t:5.2f} s){flag}", flush=True)
    summary = summarize(per_op)
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("uncosted", "crashes")}, indent=1))
    print("uncosted:", ", ".join(summary["uncosted"]) or "none")
    if args.out:
        doc = {"command": "python3 scripts/eval/opinfo_sweep.py " + " ".join(sys.argv[1:]), "torch": torch.__version__,
               "gpu": args.gpu, "samples_per_dtype": args.samples, "summary": summary,
               "ops": {name: _compact(r) for name, r in per_op.items()}}
        Path(args.out).write_text(json.dumps(doc, separators=(",", ":")))
        if args.doc:
            Path(args.doc).write_text(render_doc(doc))
    return 0


if __name__ == "__main__":
    code = main()
    # Leave without running interpreter teardown: after the sweep has written everything, torch's C++ side
    # sometimes aborts at exit ("terminate called without an active exception", about 1 run in 6 on this
    # 2-core machine, with and without this session's changes), which failed CI on a finished sweep.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)

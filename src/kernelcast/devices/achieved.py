"""What each GPU's kernels achieve beside what its datasheet promises: time factors fitted to published
measurements (issue 30).

A profile measured on one GPU (the H200) carries to another by datasheet ratios, part by part
(predict/calibrated.py): a kernel's bytes at the streaming rate by the two GPUs' DRAM bandwidths, its FLOPs at
the peak of its roof by their peaks, its time beyond both by their SMs x clock. Datasheets overstate some
GPUs more than others: Ada's and GA10x's FP32 peak counts two FP32 instructions issued per clock, which
cuBLAS's SGEMM does not sustain; GDDR parts reach another share of their bandwidth than HBM ones; cuDNN picks
other kernels per architecture. An AchievedRates holds, per GPU and per class of kernel (RATE_CLASSES), the
factor its time takes on top of the datasheet ratio: 1.0 is the datasheet, 2.0 twice as slow as the ratio
says.

Where the factors come from (achieved.json, written by scripts/fit/fit_gpu_rates.py, which says how):
- "fitted": the GPU's own published timings of KernelBench levels 1-2 (../shared/kernelbench: torch 2.5, fp32)
  and, where we timed the GPU ourselves with a current torch, a second set fitted to those runs ("by_torch":
  the H100's, torch 2.11); a prediction takes the set whose torch is nearest the capture's (torch's releases
  change the cuDNN engines a convolution runs: on the H100 the torch-2.5 timings' factors put convolutions at
  1.30x what torch 2.11 ran, scripts/eval/torch_era_check.py). All classes fitted jointly over the GPU-busy
  programs, each program's published time with the H200 kernel model's own error on it divided out (so what
  remains is this GPU's), the calls a published machine ran in a slow state of its own left out
  (calibrate/gpu_rates.py slow_state: the RTX 3090 Ti's);
- "prior": for a GPU with no published timings, the geometric mean of the fitted GPUs of its compute
  capability (one architecture, one instruction set and library kernels), e.g. the RTX 4090 from the L4 and
  the L40S;
- "datasheet": neither; factors 1.0.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

DATA_FILE = "achieved.json"
MEMORY = "memory"
# The classes a factor is fitted for: memory-bound kernels, and compute-bound ones by their math and roof
# (devices.GPU.matmul_peak's roof names). KernelBench's programs are fp32 with torch 2.5's defaults, so
# matmuls run FP32 without tensor cores and convolutions TF32 (cuDNN's default) or FP32 where a GPU has no
# TF32; classes the data cannot reach (fp16/bf16 tensor cores, attention) stay at the datasheet.
# A convolution runs one of cuDNN's three kernel families (forward, data gradient, weight gradient), each with
# its own kernels and its own efficiency per architecture: a transposed convolution's forward and a
# convolution's input gradient are data-gradient kernels (cudnn_convolution_transpose_forward calls the
# backward-data path, aten/src/ATen/native/cudnn/ConvShared.cpp). On KernelBench the A100 ran forward 3-D
# convolutions near 1.0x the carried H200 time and transposed ones near 2.0x (scripts/fit/fit_gpu_rates.py).
# A kernel that runs one block per slice (batch norm's block per channel, weight norm's, the slice sorts: costs
# keyed common.blocks_key) walks its slice at one SM's pace, which its memory latency and parallelism set as much
# as its clock: on KernelBench level 1 #33 (64 channels of 1 M fp32 values, one wave on either GPU) the A100 ran
# 2.3x the H200's time where the clocks say 1.4x. Its own class, BLOCKS, takes the memory factor where it has none.
BLOCKS = "blocks"
# A forward or data-gradient kernel writing few channels (costs.matmul NARROW_CHANNELS) has a "_narrow" class of its
# own under its family: its implicit GEMM's narrow N fills another share of each architecture's smallest tile.
RATE_CLASSES = (MEMORY, BLOCKS, "matmul:fp32", "conv:tf32_tensor", "conv:fp32", "conv_dgrad:tf32_tensor",
                "conv_dgrad:fp32", "conv_narrow:tf32_tensor", "conv_narrow:fp32", "conv_dgrad_narrow:tf32_tensor",
                "conv_dgrad_narrow:fp32")
# A family without a factor of its own takes its parent's (the weight gradient, which KernelBench's forward-only
# programs never run, the data gradient where too few programs speak for it, a narrow class likewise).
PARENT_FAMILY = {"conv_dgrad": "conv", "conv_wgrad": "conv", "conv_narrow": "conv", "conv_dgrad_narrow": "conv_dgrad"}


def rate_class(math_kind: str, roof: str) -> str:
    """The class of a kernel: its kernel family (Cost.math, "matmul", "conv", "attention", or a convolution's
    cuDNN family from costs.matmul.kernel_family, "conv_dgrad", "conv_wgrad"; other kinds are memory-bound) and
    the roof it runs under ("fp32", "tf32_tensor", ...)."""
    if math_kind in ("matmul", "conv", "attention") or math_kind in PARENT_FAMILY:
        return f"{math_kind}:{roof}"
    return BLOCKS if math_kind == BLOCKS else MEMORY


def parent_class(rate: str) -> str | None:
    """The class whose factor `rate` falls back to: its parent family's with the same roof (PARENT_FAMILY,
    "conv_wgrad:fp32" -> "conv:fp32"), the memory class for BLOCKS, else None."""
    if rate == BLOCKS:
        return MEMORY
    family, _, roof = rate.partition(":")
    return f"{PARENT_FAMILY[family]}:{roof}" if family in PARENT_FAMILY else None


def fitted_class(rate: str, fitted) -> str:
    """The class whose factor `rate` takes: itself when `fitted` (a collection of classes) holds it, else its
    nearest ancestor under parent_class that `fitted` holds, else `rate` itself."""
    current: str | None = rate
    while current is not None and current not in fitted:
        current = parent_class(current)
    return rate if current is None else current


@dataclass(frozen=True)
class AchievedRates:
    gpu: str
    factors: dict[str, float] = field(default_factory=dict)  # class -> time factor over the datasheet ratio
    source: str = "datasheet"  # fitted / prior / datasheet
    detail: str = ""  # what the factors were fitted on, or which GPUs a prior came from
    held_out_error: float | None = None  # median |predicted / measured - 1| of held-out programs, where known
    timings: str = ""  # the timings they were fitted to, in a few words ("published timings", "our torch 2.11 runs")

    @property
    def timings_said(self) -> str:
        """The timings in a sentence: which programs and which torch (a prediction's source line)."""
        if self.timings == PUBLISHED_TIMINGS:
            return f"KernelBench's published timings (torch {PUBLISHED_TORCH})"
        return f"{self.timings} of KernelBench" if self.timings else "KernelBench timings"

    def factor(self, rate: str) -> float:
        """The class's factor, else its nearest ancestor's (parent_class: PARENT_FAMILY; BLOCKS: the memory
        factor), else 1.0 (the datasheet)."""
        return self.factors.get(fitted_class(rate, self.factors), 1.0)


DATASHEET = AchievedRates("", {}, "datasheet", "datasheet ratios alone")


@lru_cache(maxsize=1)
def _data() -> dict:
    path = resources.files(__package__).joinpath(DATA_FILE)
    return json.loads(path.read_text()) if path.is_file() else {}


# The torch the published timings were taken with (KernelBench's README); a fitted GPU's "by_torch" sets hold others.
PUBLISHED_TORCH = "2.5"
PUBLISHED_TIMINGS = "published timings"


def own_runs_timings(torch_version: str) -> str:
    return f"our torch {torch_version} runs"


def _minor(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version ("2.11.0+cu130" -> (2, 11)); None if it does not read as one."""
    parts = version.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def nearest_torch(torch_version: str, versions: list[str]) -> str | None:
    """Of `versions` (torch "major.minor" strings), the one nearest `torch_version` in minor releases (a tie goes
    to the later one); the latest where torch_version does not read as a version (a nightly's, a source build's:
    most likely a current torch); None without versions."""
    known = [(v, _minor(v)) for v in versions]
    known = [(v, m) for v, m in known if m is not None]
    if not known:
        return None
    want = _minor(torch_version)
    if want is None:
        return max(known, key=lambda vm: vm[1])[0]
    def distance(m: tuple[int, int]) -> int:
        return abs((m[0] - want[0]) * 100 + m[1] - want[1])
    return min(known, key=lambda vm: (distance(vm[1]), [-x for x in vm[1]]))[0]


def installed_torch() -> str:
    """The installed torch's version, read from its package metadata (no import), "" without one."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return ""


def _torch_set(sets: dict, torch_version: str | None) -> str | None:
    """The key of the "by_torch" set a capture of torch_version (None: the installed torch's) takes, or None where
    the published timings' torch is nearer."""
    if not sets:
        return None
    chosen = nearest_torch(installed_torch() if torch_version is None else torch_version, [PUBLISHED_TORCH, *sets])
    return None if chosen == PUBLISHED_TORCH else chosen


def achieved_rates(gpu_id: str, capability: str, data: dict | None = None,
                   torch_version: str | None = None) -> AchievedRates:
    """The factors for a GPU: its own fitted ones, else its compute capability's prior, else the datasheet's.
    A fitted GPU with sets for other torch versions ("by_torch") gives the set whose torch is nearest
    torch_version (the capture's; None: the installed torch's). `data`: achieved.json's contents (read from the
    package when None)."""
    data = _data() if data is None else data
    fitted = data.get("fitted", {}).get(gpu_id)
    chosen = _torch_set((fitted or {}).get("by_torch", {}), torch_version)
    if chosen is not None:
        current = fitted["by_torch"][chosen]
        detail = f"{data.get('fitted_on', '')}; timings: {current['timings']}"
        return AchievedRates(gpu_id, dict(current["factors"]), "fitted", detail,
                             current.get("held_out", {}).get("median_error"), own_runs_timings(chosen))
    if fitted:
        held = fitted.get("held_out", {})
        state = fitted.get("slow_state")
        detail = data.get("fitted_on", "") + (f"; timings: {fitted['timings']}" if fitted.get("timings") else "")
        if state:  # the card's error: on the calls its published machine ran outside that machine's slow state
            held = held.get("normal_state", held)
            detail += (f"; its published machine ran calls of {state['from_ms']:g} ms or more about "
                       f"{state['factor']:g}x slower (a state of that machine), left out")
        return AchievedRates(gpu_id, dict(fitted["factors"]), "fitted", detail, held.get("median_error"),
                             PUBLISHED_TIMINGS)
    priors = data.get("priors", {})
    nearest = nearest_capability(capability, list(priors))
    if nearest is not None:
        prior = priors[nearest]
        detail = f"compute capability {nearest}: the geometric mean of {', '.join(prior['from'])}"
        if nearest != capability:
            detail = f"no fitted GPU of compute capability {capability}; the nearest one's, {detail}"
        factors, timings = prior["factors"], PUBLISHED_TIMINGS
        chosen = _torch_set(prior.get("by_torch", {}), torch_version)  # its members' sets, as for a fitted GPU
        if chosen is not None:
            factors, timings = prior["by_torch"][chosen]["factors"], own_runs_timings(chosen)
            detail += f", fitted to our runs with torch {chosen}"
        return AchievedRates(gpu_id, for_architecture(factors, capability), "prior", detail,
                             prior.get("held_out", {}).get("median_error"), timings)
    return AchievedRates(gpu_id, {}, "datasheet", "no published timings of this GPU or its architecture")


def published_slow_state(gpu_id: str, data: dict | None = None) -> dict | None:
    """The slow state the GPU's published machine ran its longer calls in ({"factor", "from_ms", ...}, as
    calibrate/gpu_rates.py slow_state found it; left out of its factors and not predicted), or None."""
    data = _data() if data is None else data
    return (data.get("fitted", {}).get(gpu_id) or {}).get("slow_state")


# An fp32 convolution runs on TF32 tensor cores where the GPU has them (compute capability 8.0 on, cuDNN's
# default) and on the FP32 units where it has none (Turing, Volta): the same program under another roof. A prior
# carried across that line (a T4 given the Ampere GPUs') holds only the roof its members ran the program under;
# each convolution class stands in for the other roof's (as an unseen GPU, the T4's median error went 36% -> 29%:
# scripts/fit/fit_gpu_rates.py fit). Matmuls are left as they are (PyTorch leaves TF32 off for them: an fp32 GEMM
# is an sgemm on every architecture), and so is a bf16 convolution, another program.
SAME_PROGRAM_ROOF = {"fp32": "tf32_tensor", "tf32_tensor": "fp32"}
TF32_FROM_MAJOR = 8


def for_architecture(factors: dict[str, float], capability: str) -> dict[str, float]:
    """A prior's factors for a GPU of `capability`: on a GPU without TF32, each convolution "<family>:tf32_tensor"
    class also as "<family>:fp32" where the prior lacks it; on one with TF32, the reverse."""
    major = int(capability.partition(".")[0]) if capability and capability[0].isdigit() else TF32_FROM_MAJOR
    missing = "tf32_tensor" if major >= TF32_FROM_MAJOR else "fp32"
    out = dict(factors)
    for rate, value in factors.items():
        family, _, roof = rate.partition(":")
        if family.startswith("conv") and roof == SAME_PROGRAM_ROOF.get(missing):
            out.setdefault(f"{family}:{missing}", value)
    return out


def nearest_capability(capability: str, fitted: list[str]) -> str | None:
    """The fitted compute capability closest to this one: itself, else the same major version's nearest minor,
    else the nearest major (Volta's 7.0 takes Turing's 7.5: both lack TF32 and run 64 FP32 lanes per SM). None
    for a GPU with no capability (another vendor's) or when nothing is fitted."""
    def parts(c: str) -> tuple[int, int]:
        major, _, minor = c.partition(".")
        return int(major), int(minor or 0)

    if not capability or not fitted or "." not in capability:
        return None
    major, minor = parts(capability)
    return min(fitted, key=lambda c: (abs(parts(c)[0] - major), abs(parts(c)[1] - minor)))


def capability_prior(fitted: dict[str, dict[str, float]]) -> dict[str, float]:
    """Per class, the geometric mean of the factors the given GPUs' own programs fitted for it; where none of them
    has its own, of the ones they take (their nearest ancestor's, AchievedRates.factor); a GPU with neither is left
    out. A member's stand-in does not dilute another's evidence: the RTX 3090 Ti's data-gradient convolutions,
    all run in its published machine's slow state, take its forward factor (0.96) where the RTX A6000 fitted 1.84,
    and the GA10x prior had been their mean, 1.33; the T4, which takes that prior as an unseen GPU, went 31.9% ->
    25.4% held out, every other GPU unchanged (scripts/fit/fit_gpu_rates.py fit)."""
    classes = sorted({c for factors in fitted.values() for c in factors})
    out = {}
    for c in classes:
        values = [f[c] for f in fitted.values() if c in f] or [
            AchievedRates("", f).factor(c) for f in fitted.values() if fitted_class(c, f) in f]
        out[c] = math.exp(sum(math.log(v) for v in values) / len(values))
    return out

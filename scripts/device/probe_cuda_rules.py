"""Which ops CUDA really dispatches (SDPA backend choice, batch norm, dropout, AdamW) and how many kernels
multi_tensor_apply launches: ground truth for the capture rules in kernelcast/capture/attention.py and
kernelcast/costs/foreach.py. Run on the GPU machine: python3 scripts/device/probe_cuda_rules.py (writes $OUT/probe.json)."""
import json, os, traceback
import torch, torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.nn.attention import SDPBackend, sdpa_kernel

dev = "cuda"
R = {}
def sec(name):
    def deco(fn):
        try:
            R[name] = fn()
        except Exception as e:
            R[name] = f"ERR {type(e).__name__}: {e}"
            traceback.print_exc()
        print(f"== {name}: {json.dumps(R[name], default=str)[:4000]}", flush=True)
    return deco

class Rec(TorchDispatchMode):
    def __init__(self):
        super().__init__(); self.ops = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is not torch.ops.prim.device.default:
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))

@sec("env")
def _():
    return dict(torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                cap=torch.cuda.get_device_capability(), prio_before=torch._C._get_sdp_priority_order(),
                flags=dict(flash=torch.backends.cuda.flash_sdp_enabled(), eff=torch.backends.cuda.mem_efficient_sdp_enabled(),
                           cudnn=torch.backends.cuda.cudnn_sdp_enabled(), math=torch.backends.cuda.math_sdp_enabled()))

NAMES = {int(b): b.name for b in SDPBackend.__members__.values()}
def qkv(B=2, Hq=8, Hk=8, Sq=256, Sk=256, D=64, dt=torch.bfloat16, rg=False):
    q = torch.randn(B, Hq, Sq, D, device=dev, dtype=dt, requires_grad=rg)
    k = torch.randn(B, Hk, Sk, D, device=dev, dtype=dt, requires_grad=rg)
    v = torch.randn(B, Hk, Sk, D, device=dev, dtype=dt, requires_grad=rg)
    return q, k, v

@sec("sdpa_choice")
def _():
    out = {}
    cases = {
        "bf16_d64": {}, "bf16_d64_causal": dict(causal=True), "bf16_d128_grad": dict(D=128, rg=True),
        "bf16_d256_grad": dict(D=256, rg=True), "bf16_d256_nograd": dict(D=256), "bf16_d72": dict(D=72),
        "bf16_d80": dict(D=80), "bf16_d320": dict(D=320), "fp16_d64": dict(dt=torch.float16),
        "fp32_d64": dict(dt=torch.float32), "fp32_d66": dict(dt=torch.float32, D=66), "fp64": dict(dt=torch.float64),
        "bf16_boolmask4d": dict(mask="bool4"), "bf16_floatmask2d": dict(mask="f2"), "bf16_mask3d": dict(mask="bool3"),
        "bf16_causal_Sq!=Sk": dict(Sq=128, causal=True), "bf16_gqa": dict(Hk=2, gqa=True),
        "bf16_gqa_mask": dict(Hk=2, gqa=True, mask="bool4"), "fp32_gqa": dict(Hk=2, gqa=True, dt=torch.float32),
        "bf16_dropout0.1": dict(p=0.1), "bf16_dropout0.125": dict(p=0.125), "bf16_Sk1": dict(Sk=1),
    }
    for name, c in cases.items():
        try:
            q, k, v = qkv(Hk=c.get("Hk", 8), Sq=c.get("Sq", 256), D=c.get("D", 64), dt=c.get("dt", torch.bfloat16), rg=c.get("rg", False),
                          Sk=c.get("Sk", 256))
            m = None
            if c.get("mask") == "bool4": m = torch.ones(q.shape[0], 1, q.shape[2], k.shape[2], device=dev, dtype=torch.bool).tril()
            if c.get("mask") == "bool3": m = torch.ones(q.shape[0], q.shape[2], k.shape[2], device=dev, dtype=torch.bool)
            if c.get("mask") == "f2": m = torch.zeros(q.shape[2], k.shape[2], device=dev, dtype=q.dtype)
            ch = torch._fused_sdp_choice(q, k, v, m, c.get("p", 0.0), c.get("causal", False), enable_gqa=c.get("gqa", False))
            out[name] = NAMES.get(ch, ch)
        except Exception as e:
            out[name] = f"ERR {e}"[:200]
    out["prio_after"] = torch._C._get_sdp_priority_order()
    return out

def record(fn):
    r = Rec()
    with r:
        fn()
    return r.ops

@sec("sdpa_ops")
def _():
    out = {}
    def fwd_bwd(**kw):
        q, k, v = qkv(D=kw.get("D", 64), dt=kw.get("dt", torch.bfloat16), rg=True, Hk=kw.get("Hk", 8))
        m = torch.ones(256, 256, device=dev, dtype=torch.bool).tril() if kw.get("mask") else None
        def f():
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=kw.get("causal", False) and m is None,
                                               enable_gqa=kw.get("gqa", False))
            o.sum().backward()
        return f
    for name, kw in {"bf16_causal": dict(causal=True), "bf16_boolmask": dict(mask=True), "fp32": dict(dt=torch.float32),
                     "bf16_gqa": dict(Hk=2, gqa=True)}.items():
        out[name] = record(fwd_bwd(**kw))
    for name, be in {"flash_d72": SDPBackend.FLASH_ATTENTION, "eff_mask": SDPBackend.EFFICIENT_ATTENTION,
                     "cudnn_mask": SDPBackend.CUDNN_ATTENTION}.items():
        try:
            with sdpa_kernel([be]):
                out[name] = record(fwd_bwd(D=72 if "d72" in name else 64, mask="mask" in name, causal="d72" in name))
        except Exception as e:
            out[name] = f"ERR {e}"[:200]
    return out

@sec("bn_dropout_ops")
def _():
    out = {}
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        bn = torch.nn.BatchNorm2d(16).to(dev)
        x = torch.randn(8, 16, 8, 8, device=dev, dtype=dt, requires_grad=True)
        if dt != torch.float32: bn = bn.to(dt)
        out[f"bn_train_{dt}"] = record(lambda: bn(x).sum().backward())
        bn.eval(); out[f"bn_eval_{dt}"] = record(lambda: bn(x).sum().backward())
        out[f"select_{dt}"] = str(torch._C._select_batch_norm_backend(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, True, 1e-5))
    x = torch.randn(64, 64, device=dev, requires_grad=True)
    out["dropout"] = record(lambda: F.dropout(x, 0.1).sum().backward())
    return out

@sec("adamw_ops")
def _():
    ps = [torch.nn.Parameter(torch.randn(n, device=dev)) for n in (10, 70000, 300)]
    for p in ps: p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(ps, lr=1e-3)
    opt.step()  # state init
    return record(opt.step)

def mta_launches(numels, depth, scalarlist=False, cuda13=True):
    T = ([770, 448, 336, 252, 210] if cuda13 else [110, 64, 48, 36, 30])
    TS = ([672, 448, 336, 252, 210] if cuda13 else [96, 64, 48, 36, 30])
    max_t = (TS if scalarlist else T)[depth - 1]; max_b = 2240 if cuda13 else 320
    launches = loc_b = loc_t = 0
    for n in numels:
        if n == 0: continue
        loc_t += 1; chunks = -(-n // 65536)
        for c in range(chunks):
            loc_b += 1
            if (loc_t == max_t and c == chunks - 1) or loc_b == max_b:
                launches += 1; loc_b = 0; loc_t = 0 if c == chunks - 1 else 1
    return launches + (1 if loc_b else 0)

@sec("foreach_kernel_counts")
def _():
    from torch.profiler import profile, ProfilerActivity
    out = {}
    for N, n in ((200, 4096), (1000, 1000), (50, 10_000_000)):
        xs = [torch.randn(n, device=dev) for _ in range(N)]; ys = [torch.randn(n, device=dev) for _ in range(N)]
        for name, fn, depth, sl in (("mul_.Scalar", lambda: torch._foreach_mul_(xs, 0.5), 1, False),
                                    ("lerp_.Scalar", lambda: torch._foreach_lerp_(xs, ys, 0.1), 2, False),
                                    ("addcmul_.Scalar", lambda: torch._foreach_addcmul_(xs, ys, ys, 0.1), 3, False),
                                    ("sqrt", lambda: torch._foreach_sqrt(xs), 2, False),
                                    ("div_.ScalarList", lambda: torch._foreach_div_(xs, [1.0] * N), 1, True),
                                    ("addcdiv_.ScalarList", lambda: torch._foreach_addcdiv_(xs, ys, ys, [0.1] * N), 3, True)):
            fn(); torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn(); torch.cuda.synchronize()
            k = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and "multi_tensor_apply" in e.name)
            out[f"N{N}_n{n}_{name}"] = dict(measured=k, pred_cuda13=mta_launches([n] * N, depth, sl, True),
                                            pred_4kb=mta_launches([n] * N, depth, sl, False))
    return out

with open(os.path.join(os.environ.get("OUT", "."), "probe.json"), "w") as f:
    json.dump(R, f, indent=1, default=str)

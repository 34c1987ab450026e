"""Capture and predict programs shaped the way users write them, on fake CUDA: every one must capture (issue 31,
"no capture failure"). Op and library patterns run inside a `with kernelcast.capture()` block; training loops and
inference patterns and transformers training steps (built from small configs, no weights) go through
capture_workload as `kernelcast predict` does. Prints one line per program (ops, kernels, GPU time, sync points,
uncosted ops) and exits 1 if a program outside KNOWN_FAILURES fails.

    PYTHONPATH=src python3 scripts/eval/user_programs_check.py [NAME ...]   (transformers on the path for its set)

Written 2026-12-07 (twenty-first session) from the programs tried that day; the failures it found then are
fixed, with tests, but those in KNOWN_FAILURES. Five added 2026-12-08 from sparse and module-moving patterns tried
then (dense @ sparse, sparse conversions, a host boolean mask, a traced CNN, an EMA copy).
"""
# ruff: noqa: E501, E701, E702, E731
import kernelcast  # noqa: F401  (before torch: backward on fake CUDA)

import io  # noqa: F401
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelcast.capture import capture, capture_workload
from kernelcast.predict import predict_capture

D = "cuda"
BLOCKS: dict = {}  # run inside a capture block
BUILDS: dict = {}  # build() -> (step, args), captured as `kernelcast predict` captures
# Found and not fixed: what each fails on.
KNOWN_FAILURES: dict[str, str] = {}  # the three found then were fixed the next day (2026-12-08)


def block(f):
    BLOCKS[f.__name__] = f
    return f


def build(f):
    BUILDS[f.__name__] = f
    return f


# -- op and library patterns, inside a capture block --
@block
def grid_sample_stn():
    x = torch.randn(4, 3, 32, 32, device="cuda", requires_grad=True)
    theta = torch.randn(4, 2, 3, device="cuda", requires_grad=True)
    grid = F.affine_grid(theta, x.shape, align_corners=False)
    F.grid_sample(x, grid, align_corners=False).sum().backward()

@block
def weight_norm_param():
    m = nn.utils.parametrizations.weight_norm(nn.Linear(64, 64)).cuda()
    m(torch.randn(8, 64, device="cuda")).sum().backward()

@block
def spectral_norm_param():
    m = nn.utils.parametrizations.spectral_norm(nn.Linear(64, 64)).cuda()
    m(torch.randn(8, 64, device="cuda")).sum().backward()

@block
def orthogonal_param():
    m = nn.utils.parametrizations.orthogonal(nn.Linear(32, 32)).cuda()
    m(torch.randn(8, 32, device="cuda")).sum().backward()

@block
def clip_grad_norm():
    m = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()
    m(torch.randn(8, 64, device="cuda")).sum().backward()
    nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    nn.utils.clip_grad_value_(m.parameters(), 0.5)

@block
def grad_scaler():
    m = nn.Linear(64, 64).cuda(); opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = m(torch.randn(8, 64, device="cuda")).float().sum()
    scaler.scale(loss).backward(); scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(m.parameters(), 1.0); scaler.step(opt); scaler.update()

@block
def func_vmap_grad():
    from torch.func import vmap, grad, functional_call
    m = nn.Linear(16, 1).cuda(); params = dict(m.named_parameters())
    def loss(p, x, y): return ((functional_call(m, p, (x,)) - y) ** 2).mean()
    vmap(grad(loss), in_dims=(None, 0, 0))(params, torch.randn(8, 16, device="cuda"), torch.randn(8, 1, device="cuda"))

@block
def func_jacrev():
    from torch.func import jacrev
    jacrev(lambda x: torch.sin(x) * x.sum())(torch.randn(16, device="cuda"))

@block
def mha_padding_mask():
    m = nn.MultiheadAttention(64, 4, batch_first=True).cuda()
    x = torch.randn(4, 10, 64, device="cuda")
    mask = torch.zeros(4, 10, dtype=torch.bool, device="cuda"); mask[:, 7:] = True
    out, w = m(x, x, x, key_padding_mask=mask, need_weights=True)
    out.sum().backward()

@block
def transformer_full():
    m = nn.Transformer(d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=128, batch_first=True).cuda()
    src, tgt = torch.randn(2, 12, 64, device="cuda"), torch.randn(2, 9, 64, device="cuda")
    m(src, tgt, tgt_mask=nn.Transformer.generate_square_subsequent_mask(9, device="cuda")).sum().backward()

@block
def checkpoint_reentrant():
    from torch.utils.checkpoint import checkpoint
    m = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 64)).cuda()
    x = torch.randn(8, 64, device="cuda", requires_grad=True)
    checkpoint(m, x, use_reentrant=True).sum().backward()

@block
def ema_foreach_lerp():
    m = nn.Linear(64, 64).cuda(); ema = [p.detach().clone() for p in m.parameters()]
    with torch.no_grad():
        torch._foreach_lerp_(ema, list(m.parameters()), 0.001)

@block
def interpolate_modes():
    x = torch.randn(2, 3, 16, 16, device="cuda", requires_grad=True)
    y = F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False) .sum() + \
        F.interpolate(x, size=(20, 20), mode="bilinear", antialias=True).sum() + \
        F.interpolate(x[:, :, None], scale_factor=(1, 2, 2), mode="trilinear").sum() + \
        F.interpolate(x, scale_factor=0.5, mode="area").sum() + F.interpolate(x, scale_factor=3, mode="nearest-exact").sum()
    y.backward()

@block
def unfold_fold():
    x = torch.randn(2, 3, 16, 16, device="cuda", requires_grad=True)
    cols = F.unfold(x, 3, padding=1); F.fold(cols, (16, 16), 3, padding=1).sum().backward()

@block
def stft_istft():
    x = torch.randn(2, 4000, device="cuda")
    w = torch.hann_window(400, device="cuda")
    s = torch.stft(x, 400, 160, window=w, return_complex=True)
    torch.istft(s, 400, 160, window=w, length=4000)

@block
def bucketize_hist():
    x = torch.rand(1000, device="cuda")
    torch.bucketize(x, torch.linspace(0, 1, 11, device="cuda")); torch.histc(x, 10); torch.bincount((x * 10).long())
    torch.searchsorted(torch.linspace(0, 1, 11, device="cuda"), x)

@block
def unique_nonzero():
    x = torch.randint(0, 10, (1000,), device="cuda")
    torch.unique(x, return_counts=True); x.nonzero(); x[x > 5]; torch.unique_consecutive(x)

@block
def embedding_bag_psw():
    m = nn.EmbeddingBag(1000, 32, mode="sum").cuda()
    idx = torch.randint(0, 1000, (40,), device="cuda"); off = torch.arange(0, 40, 4, device="cuda")
    m(idx, off, per_sample_weights=torch.rand(40, device="cuda")).sum().backward()

@block
def ctc_loss():
    lp = torch.randn(50, 4, 20, device="cuda").log_softmax(2).detach().requires_grad_()
    tg = torch.randint(1, 20, (4, 10), device="cuda")
    F.ctc_loss(lp, tg, torch.full((4,), 50, dtype=torch.long), torch.full((4,), 10, dtype=torch.long)).backward()

@block
def normal_kl_rsample():
    from torch.distributions import Normal, kl_divergence
    mu = torch.randn(8, 4, device="cuda", requires_grad=True)
    q = Normal(mu, torch.ones_like(mu)); p = Normal(torch.zeros_like(mu), torch.ones_like(mu))
    (q.rsample().sum() + kl_divergence(q, p).sum()).backward()

@block
def gumbel_softmax():
    x = torch.randn(8, 10, device="cuda", requires_grad=True)
    F.gumbel_softmax(x, tau=0.5, hard=True).sum().backward()

@block
def cdist_norm():
    a = torch.randn(64, 16, device="cuda", requires_grad=True); b = torch.randn(32, 16, device="cuda")
    (torch.cdist(a, b).sum() + torch.linalg.norm(a, dim=1).sum() + torch.linalg.vector_norm(a, ord=3)).backward()

@block
def pad_modes():
    x = torch.randn(2, 3, 16, 16, device="cuda", requires_grad=True)
    (F.pad(x, (2, 2, 2, 2), mode="reflect").sum() + F.pad(x, (1, 1, 1, 1), mode="replicate").sum() +
     F.pad(x, (1, 1, 1, 1), mode="circular").sum()).backward()

@block
def pixel_shuffle():
    x = torch.randn(2, 16, 8, 8, device="cuda", requires_grad=True)
    (F.pixel_shuffle(x, 2).sum() + F.pixel_unshuffle(x, 2).sum() + F.channel_shuffle(x, 4).sum()).backward()

@block
def packed_lstm():
    m = nn.LSTM(16, 32, batch_first=True).cuda()
    x = torch.randn(4, 10, 16, device="cuda"); lengths = torch.tensor([10, 8, 5, 3])
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
    out, _ = m(packed); y, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True); y.sum().backward()

@block
def sdpa_gqa():
    q = torch.randn(2, 8, 16, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 2, 16, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True).sum().backward()

@block
def label_smoothing_weights():
    x = torch.randn(16, 10, device="cuda", requires_grad=True)
    F.cross_entropy(x, torch.randint(0, 10, (16,), device="cuda"), weight=torch.rand(10, device="cuda"),
                    label_smoothing=0.1, ignore_index=3).backward()

@block
def triplet_cosine():
    a, p, n = (torch.randn(16, 32, device="cuda", requires_grad=True) for _ in range(3))
    (F.triplet_margin_loss(a, p, n) + F.cosine_embedding_loss(a, p, torch.ones(16, device="cuda")) +
     F.margin_ranking_loss(a[:, 0], p[:, 0], torch.ones(16, device="cuda"))).backward()

@block
def topk_sort_scatter():
    x = torch.randn(64, 100, device="cuda", requires_grad=True)
    v, i = x.topk(5, dim=1); s, j = x.sort(dim=1, descending=True)
    out = torch.zeros_like(x).scatter(1, i, v); (out.sum() + s[:, :3].sum()).backward()
    torch.zeros(100, device="cuda").scatter_reduce_(0, torch.randint(0, 100, (50,), device="cuda"), torch.rand(50, device="cuda"), "amax")

@block
def einsum_complex():
    x = torch.randn(4, 8, 16, device="cuda", dtype=torch.complex64, requires_grad=True)
    w = torch.randn(8, 8, device="cuda", dtype=torch.complex64)
    torch.einsum("bij,ik->bkj", x, w).abs().sum().backward()

@block
def group_norm_conv_transpose():
    m = nn.Sequential(nn.ConvTranspose2d(8, 16, 4, stride=2, padding=1), nn.GroupNorm(4, 16), nn.SiLU(),
                      nn.Upsample(scale_factor=2), nn.Conv2d(16, 3, 3, padding=1)).cuda()
    m(torch.randn(2, 8, 16, 16, device="cuda")).sum().backward()

@block
def swa_utils():
    m = nn.Linear(16, 16).cuda(); swa = torch.optim.swa_utils.AveragedModel(m)
    swa.update_parameters(m); swa.update_parameters(m)

@block
def lr_sched_step():
    m = nn.Linear(16, 16).cuda(); opt = torch.optim.AdamW(m.parameters(), lr=1e-3, fused=True)
    sch = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.01, total_steps=10)
    m(torch.randn(4, 16, device="cuda")).sum().backward(); opt.step(); sch.step()

@block
def adam_capturable_amsgrad():
    m = nn.Linear(16, 16).cuda(); opt = torch.optim.Adam(m.parameters(), lr=1e-3, amsgrad=True, capturable=True)
    m(torch.randn(4, 16, device="cuda")).sum().backward(); opt.step()

@block
def other_optims():
    m = nn.Linear(16, 16).cuda()
    for cls in (torch.optim.RAdam, torch.optim.NAdam, torch.optim.Adagrad, torch.optim.Adamax, torch.optim.RMSprop, torch.optim.Rprop, torch.optim.Adadelta):
        opt = cls(m.parameters()); m(torch.randn(4, 16, device="cuda")).sum().backward(); opt.step(); opt.zero_grad()

@block
def lbfgs():
    m = nn.Linear(16, 1).cuda(); opt = torch.optim.LBFGS(m.parameters(), max_iter=3)
    x, y = torch.randn(32, 16, device="cuda"), torch.randn(32, 1, device="cuda")
    def closure():
        opt.zero_grad(); l = F.mse_loss(m(x), y); l.backward(); return l
    opt.step(closure)

@block
def sparse_adam_embedding():
    e = nn.Embedding(1000, 16, sparse=True).cuda(); opt = torch.optim.SparseAdam(e.parameters())
    e(torch.randint(0, 1000, (32,), device="cuda")).sum().backward(); opt.step()

@block
def dropout_kinds():
    x = torch.randn(4, 8, 16, 16, device="cuda", requires_grad=True)
    (F.dropout2d(x, 0.2).sum() + F.alpha_dropout(x, 0.2).sum() + F.feature_alpha_dropout(x, 0.2).sum() + F.dropout1d(x[:, :, 0], 0.1).sum()).backward()

@block
def roi_like_index_put():
    x = torch.zeros(100, 16, device="cuda")
    idx = torch.randint(0, 100, (40,), device="cuda")
    x.index_put_((idx,), torch.randn(40, 16, device="cuda"), accumulate=True)
    x[idx] += 1.0

@block
def cumulative_ops():
    x = torch.randn(8, 100, device="cuda", requires_grad=True)
    (torch.cummax(x, 1)[0].sum() + torch.cummin(x, 1)[0].sum() + torch.logcumsumexp(x, 1).sum() + x.cumsum(1).sum()).backward()

@block
def tensor_methods_misc():
    x = torch.randn(16, 16, device="cuda")
    x.tril_().triu(-2); torch.diag_embed(x); x.diagonal().sum(); torch.kron(x[:2, :2], x[:3, :3]); torch.block_diag(x[:2, :2], x[:3, :3])
    torch.roll(x, 3, 0); torch.rot90(x); torch.flip(x, [0]); x.renorm(2, 0, 1.0); torch.nan_to_num(x); x.clamp_(min=-1)
    torch.trapezoid(x); torch.diff(x); torch.cross(x[:, :3], x[:, 3:6], dim=1); torch.cartesian_prod(x[0, :3], x[1, :3])

@block
def linalg_common():
    a = torch.randn(8, 8, device="cuda", requires_grad=True)
    s = a @ a.T + 8 * torch.eye(8, device="cuda")
    (torch.linalg.cholesky(s).sum() + torch.linalg.solve(s, torch.randn(8, 2, device="cuda")).sum() + torch.linalg.inv(s).sum() + torch.logdet(s)).backward()


# -- training loops --
@build
def ddpm_train():
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.SiLU(), nn.Conv2d(32, 3, 3, padding=1)).to(D)
    betas = torch.linspace(1e-4, 0.02, 1000); alphas = torch.cumprod(1 - betas, 0).to(D)
    opt = torch.optim.AdamW(model.parameters())
    x0 = torch.randn(8, 3, 32, 32, device=D)
    def step(x0):
        t = torch.randint(0, 1000, (x0.shape[0],), device=D)
        a = alphas[t].view(-1, 1, 1, 1); noise = torch.randn_like(x0)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        F.mse_loss(model(xt), noise).backward(); opt.step(); opt.zero_grad()
    return step, (x0,)

@build
def ddim_sample_loop():
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.SiLU(), nn.Conv2d(16, 3, 3, padding=1)).to(D).eval()
    alphas = torch.cumprod(1 - torch.linspace(1e-4, 0.02, 1000, device=D), 0)
    x = torch.randn(2, 3, 32, 32, device=D)
    def step(x):
        with torch.no_grad():
            for t in torch.linspace(999, 0, 10).long():
                eps = model(x); a = alphas[t]
                x = (x - (1 - a).sqrt() * eps) / a.sqrt()
        return x
    return step, (x,)

@build
def gan_step():
    G = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32)).to(D); Dn = nn.Sequential(nn.Linear(32, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)).to(D)
    og, od = torch.optim.Adam(G.parameters(), 2e-4, betas=(0.5, 0.999)), torch.optim.Adam(Dn.parameters(), 2e-4, betas=(0.5, 0.999))
    real = torch.randn(32, 32, device=D)
    def step(real):
        z = torch.randn(32, 16, device=D); fake = G(z)
        ld = F.binary_cross_entropy_with_logits(Dn(real), torch.ones(32, 1, device=D)) + F.binary_cross_entropy_with_logits(Dn(fake.detach()), torch.zeros(32, 1, device=D))
        od.zero_grad(); ld.backward(); od.step()
        lg = F.binary_cross_entropy_with_logits(Dn(fake), torch.ones(32, 1, device=D)); og.zero_grad(); lg.backward(); og.step()
    return step, (real,)

@build
def clip_contrastive():
    img, txt = nn.Linear(128, 64).to(D), nn.Linear(96, 64).to(D); scale = nn.Parameter(torch.tensor(2.659)).to(D)
    a, b = torch.randn(16, 128, device=D), torch.randn(16, 96, device=D)
    def step(a, b):
        i, t = F.normalize(img(a), dim=-1), F.normalize(txt(b), dim=-1)
        logits = scale.exp() * i @ t.T; labels = torch.arange(16, device=D)
        ((F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2).backward()
    return step, (a, b)

@build
def distill_kl():
    teacher, student = nn.Linear(64, 10).to(D).eval(), nn.Linear(64, 10).to(D)
    x = torch.randn(32, 64, device=D)
    def step(x):
        with torch.no_grad(): tl = teacher(x)
        sl = student(x); T = 4.0
        (F.kl_div(F.log_softmax(sl / T, -1), F.softmax(tl / T, -1), reduction="batchmean") * T * T).backward()
    return step, (x,)

@build
def grad_accum_autocast():
    m = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10)).to(D); opt = torch.optim.SGD(m.parameters(), 0.1)
    xs = [torch.randn(8, 64, device=D) for _ in range(4)]; ys = [torch.randint(0, 10, (8,), device=D) for _ in range(4)]
    def step(xs, ys):
        for x, y in zip(xs, ys):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(m(x), y) / 4
            loss.backward()
        opt.step(); opt.zero_grad(set_to_none=True)
    return step, (xs, ys)

@build
def gpu_augment_mixup():
    m = nn.Conv2d(3, 8, 3).to(D)
    x = torch.randn(8, 3, 40, 40, device=D); y = F.one_hot(torch.randint(0, 10, (8,), device=D), 10).float()
    beta = torch.distributions.Beta(torch.tensor(0.4, device=D), torch.tensor(0.4, device=D))
    def step(x, y):
        i, j = torch.randint(0, 8, (2,)).tolist()
        crop = x[:, :, i:i + 32, j:j + 32]
        if torch.rand(1).item() < 0.5: crop = crop.flip(-1)
        lam = beta.sample(); perm = torch.randperm(8, device=D)
        mixed = lam * crop + (1 - lam) * crop[perm]
        m(mixed).mean().backward()
    return step, (x, y)

@build
def gnn_message_passing():
    lin = nn.Linear(32, 32).to(D)
    x = torch.randn(100, 32, device=D); edges = torch.randint(0, 100, (2, 400), device=D)
    def step(x, edges):
        src, dst = edges
        msg = lin(x)[src]
        agg = torch.zeros_like(x).index_add_(0, dst, msg)
        deg = torch.zeros(100, device=D).scatter_add_(0, dst, torch.ones(400, device=D)).clamp(min=1)
        out = agg / deg[:, None]
        mx = torch.zeros_like(x).scatter_reduce(0, dst[:, None].expand(-1, 32), msg, "amax", include_self=False)
        (out.sum() + mx.sum()).backward()
    return step, (x, edges)

@build
def point_cloud_knn():
    lin = nn.Linear(3, 16).to(D); pts = torch.randn(4, 256, 3, device=D)
    def step(pts):
        d = torch.cdist(pts, pts); idx = d.topk(8, largest=False).indices
        feats = lin(pts); nb = torch.gather(feats.unsqueeze(1).expand(-1, 256, -1, -1), 2, idx.unsqueeze(-1).expand(-1, -1, -1, 16))
        nb.max(2).values.sum().backward()
    return step, (pts,)

@build
def qat_fake_quant():
    m = nn.Linear(64, 64).to(D); x = torch.randn(8, 64, device=D)
    def step(x):
        w = torch.fake_quantize_per_tensor_affine(m.weight, 0.01, 0, -128, 127)
        xq = torch.fake_quantize_per_channel_affine(x, torch.full((64,), 0.02, device=D), torch.zeros(64, dtype=torch.int32, device=D), 1, -128, 127)
        F.linear(xq, w, m.bias).sum().backward()
    return step, (x,)

@build
def prune_l1():
    import torch.nn.utils.prune as prune
    m = nn.Linear(64, 64).to(D); prune.l1_unstructured(m, "weight", amount=0.3)
    x = torch.randn(8, 64, device=D)
    return (lambda x: m(x).sum().backward()), (x,)

@build
def autograd_hessian():
    from torch.autograd.functional import hessian, jacobian
    x = torch.randn(8, device=D)
    def step(x):
        hessian(lambda v: (v ** 3).sum(), x); jacobian(lambda v: v.sin() * 2, x)
    return step, (x,)

@build
def custom_function_amp():
    class Scale(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda")
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w); return x @ w
        @staticmethod
        @torch.amp.custom_bwd(device_type="cuda")
        def backward(ctx, g):
            x, w = ctx.saved_tensors; return g @ w.T, x.T @ g
    w = torch.randn(32, 32, device=D, requires_grad=True); x = torch.randn(8, 32, device=D)
    def step(x):
        with torch.autocast("cuda", dtype=torch.float16):
            Scale.apply(x, w).float().sum().backward()
    return step, (x,)

@build
def checkpoint_sequential():
    from torch.utils.checkpoint import checkpoint_sequential
    m = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(4)]).to(D)
    x = torch.randn(8, 64, device=D, requires_grad=True)
    return (lambda x: checkpoint_sequential(m, 2, x, use_reentrant=False).sum().backward()), (x,)

@build
def embedding_freq_padding():
    e = nn.Embedding(100, 16, padding_idx=0, scale_grad_by_freq=True).to(D)
    ids = torch.randint(0, 100, (8, 12), device=D)
    return (lambda ids: e(ids).sum().backward()), (ids,)

@build
def adaptive_log_softmax():
    m = nn.AdaptiveLogSoftmaxWithLoss(32, 1000, cutoffs=[100, 500]).to(D)
    x = torch.randn(16, 32, device=D); y = torch.randint(0, 1000, (16,), device=D)
    return (lambda x, y: m(x, y).loss.backward()), (x, y)

@build
def misc_modules():
    bil, cos, pd = nn.Bilinear(16, 16, 8).to(D), nn.CosineSimilarity(), nn.PairwiseDistance()
    a, b = torch.randn(8, 16, device=D, requires_grad=True), torch.randn(8, 16, device=D)
    return (lambda a, b: (bil(a, b).sum() + cos(a, b).sum() + pd(a, b).sum()).backward()), (a, b)

@build
def lstm_cell_loop():
    cell = nn.LSTMCell(16, 32).to(D); xs = torch.randn(20, 4, 16, device=D)
    def step(xs):
        h = c = torch.zeros(4, 32, device=D); outs = []
        for x in xs:
            h, c = cell(x, (h, c)); outs.append(h)
        torch.stack(outs).sum().backward()
    return step, (xs,)

@build
def sparse_mm():
    i = torch.randint(0, 100, (2, 300), device=D); v = torch.rand(300, device=D)
    A = torch.sparse_coo_tensor(i, v, (100, 100)).coalesce(); W = torch.randn(100, 16, device=D, requires_grad=True)
    return (lambda W: torch.sparse.mm(A, W).sum().backward()), (W,)

@build
def sparse_gcn_dense_at_sparse():
    i = torch.randint(0, 100, (2, 300), device=D); A = torch.sparse_coo_tensor(i, torch.rand(300, device=D), (100, 100)).coalesce()
    W = torch.randn(16, 100, device=D, requires_grad=True)
    return (lambda W: ((W @ A) * 2.0).sum().backward()), (W,)

@build
def sparse_conversions():
    i = torch.randint(0, 100, (2, 300), device=D); A = torch.sparse_coo_tensor(i, torch.rand(300, device=D), (100, 100)).coalesce()
    return (lambda x: (A.double().to_dense() + x).sum()), (torch.randn(100, 100, device=D, dtype=torch.float64),)

@build
def host_bool_mask_train():
    m = nn.Linear(16, 4).to(D); x = torch.randn(64, 16, device=D)
    def step(x):
        keep = torch.rand(64) > 0.3  # a mask built on the host
        m(x)[keep].pow(2).mean().backward()
    return step, (x,)

@build
def jit_trace_cnn():
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).to(D).eval()
    t = torch.jit.trace(m, torch.randn(2, 3, 16, 16, device=D))
    return (lambda x: t(x).sum()), (torch.randn(2, 3, 16, 16, device=D),)

@build
def ema_deepcopy():
    import copy
    m = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)).to(D); ema = copy.deepcopy(m).eval()
    opt = torch.optim.AdamW(m.parameters()); x = torch.randn(8, 32, device=D)
    def step(x):
        m(x).sum().backward(); opt.step(); opt.zero_grad()
        with torch.no_grad():
            torch._foreach_lerp_(list(ema.parameters()), list(m.parameters()), 0.001)
    return step, (x,)

@build
def early_stop_while():
    m = nn.Linear(16, 1).to(D); opt = torch.optim.SGD(m.parameters(), 0.01)
    x, y = torch.randn(64, 16, device=D), torch.randn(64, 1, device=D)
    def step(x, y):
        it = 0; loss = torch.tensor(1e9)
        while loss.item() > 1e-3 and it < 5:
            opt.zero_grad(); loss = F.mse_loss(m(x), y); loss.backward(); opt.step(); it += 1
    return step, (x, y)

@build
def nan_check_skip():
    m = nn.Linear(16, 16).to(D); opt = torch.optim.Adam(m.parameters())
    x = torch.randn(8, 16, device=D)
    def step(x):
        loss = m(x).pow(2).mean(); loss.backward()
        if torch.isfinite(loss): opt.step()
        gn = torch.stack([p.grad.norm() for p in m.parameters()]).norm()
        if gn > 10: print("big grad")
        opt.zero_grad()
    return step, (x,)


# -- inference and runtime patterns --
@build
def inference_mode_half():
    m = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64)).to(D).half().eval()
    x = torch.randn(8, 64, device=D, dtype=torch.half)
    def step(x):
        with torch.inference_mode(): return m(x)
    return step, (x,)

@build
def channels_last_bf16():
    m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU()).to(D).to(memory_format=torch.channels_last).bfloat16()
    x = torch.randn(4, 3, 32, 32, device=D, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    return (lambda x: m(x).float().sum().backward()), (x,)

@build
def jit_script_module():
    m = torch.jit.script(nn.Sequential(nn.Linear(16, 16), nn.ReLU())).to(D)
    x = torch.randn(4, 16, device=D)
    return (lambda x: m(x).sum().backward()), (x,)

@build
def compile_fullgraph_dynamic():
    m = nn.Sequential(nn.Linear(16, 16), nn.ReLU()).to(D)
    f = torch.compile(m, fullgraph=True, dynamic=True)
    x = torch.randn(4, 16, device=D)
    return (lambda x: f(x).sum().backward()), (x,)

@build
def sdpa_bool_mask_dropout():
    q = torch.randn(2, 4, 16, 32, device=D, requires_grad=True)
    mask = torch.rand(16, 16, device=D) > 0.2
    return (lambda q: F.scaled_dot_product_attention(q, q, q, attn_mask=mask, dropout_p=0.1).sum().backward()), (q,)

@build
def mha_eval_fastpath_seq_first():
    m = nn.MultiheadAttention(64, 4).to(D).eval()
    x = torch.randn(10, 2, 64, device=D)
    def step(x):
        with torch.no_grad(): return m(x, x, x)[0]
    return step, (x,)

@build
def embedding_bag_max():
    m = nn.EmbeddingBag(100, 16, mode="max").to(D)
    idx = torch.randint(0, 100, (2, 8), device=D)
    return (lambda idx: m(idx).sum().backward()), (idx,)

@build
def old_amp_api():
    m = nn.Linear(16, 16).to(D); scaler = torch.cuda.amp.GradScaler()
    x = torch.randn(4, 16, device=D)
    def step(x):
        with torch.cuda.amp.autocast():
            loss = m(x).sum()
        scaler.scale(loss).backward()
    return step, (x,)

@build
def sdpa_kernel_ctx():
    from torch.nn.attention import sdpa_kernel, SDPBackend
    q = torch.randn(2, 4, 16, 32, device=D, dtype=torch.bfloat16)
    def step(q):
        with sdpa_kernel([SDPBackend.MATH]): a = F.scaled_dot_product_attention(q, q, q)
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION): b = F.scaled_dot_product_attention(q, q, q)
        return a + b
    return step, (q,)

@build
def streams_events_pinned():
    s = torch.cuda.Stream(); x = torch.randn(1024, 1024).pin_memory(); w = torch.randn(1024, 1024, device=D)
    def step(x):
        with torch.cuda.stream(s):
            xd = x.to(D, non_blocking=True); e = torch.cuda.Event(); e.record()
        torch.cuda.current_stream().wait_stream(s); xd.record_stream(torch.cuda.current_stream())
        return xd @ w
    return step, (x,)

@build
def memory_queries_seed():
    x = torch.randn(64, 64, device=D)
    def step(x):
        torch.cuda.manual_seed_all(0); torch.manual_seed(0)
        y = x @ x; a = torch.cuda.memory_allocated(); torch.cuda.empty_cache()
        g = torch.Generator(device=D); g.manual_seed(1); z = torch.randn(64, 64, device=D, generator=g)
        return y + z, a
    return step, (x,)

@build
def host_reads():
    m = nn.Linear(16, 4).to(D); x = torch.randn(8, 16, device=D)
    def step(x):
        out = m(x); preds = out.argmax(1).tolist(); arr = out.detach().cpu().numpy(); print(out.mean())
        buf = io.BytesIO(); torch.save(out.detach(), buf)
        torch.testing.assert_close(out, out)
        return preds, arr
    return step, (x,)

@build
def dataparallel_single():
    m = nn.DataParallel(nn.Linear(16, 16).to(D)); x = torch.randn(4, 16, device=D)
    return (lambda x: m(x).sum().backward()), (x,)

@build
def weight_tying_lm():
    emb = nn.Embedding(100, 32).to(D); head = nn.Linear(32, 100, bias=False).to(D); head.weight = emb.weight
    ids = torch.randint(0, 100, (4, 12), device=D)
    return (lambda ids: F.cross_entropy(head(emb(ids)).view(-1, 100), ids.view(-1)).backward()), (ids,)

@build
def rnn_gru_bidirectional_dropout():
    m = nn.GRU(16, 32, num_layers=2, bidirectional=True, dropout=0.1, batch_first=True).to(D)
    x = torch.randn(4, 10, 16, device=D)
    return (lambda x: m(x)[0].sum().backward()), (x,)

@build
def conv1d_causal_dilated():
    m = nn.Sequential(*[nn.Conv1d(16, 16, 3, dilation=2 ** i, padding=2 * 2 ** i) for i in range(4)]).to(D)
    x = torch.randn(2, 16, 100, device=D)
    return (lambda x: m(x)[..., :100].sum().backward()), (x,)

@build
def upsample_conv_transpose3d():
    m = nn.Sequential(nn.ConvTranspose3d(4, 8, 2, stride=2), nn.InstanceNorm3d(8, affine=True), nn.LeakyReLU(), nn.MaxPool3d(2), nn.AdaptiveAvgPool3d(2)).to(D)
    x = torch.randn(2, 4, 8, 8, 8, device=D)
    return (lambda x: m(x).sum().backward()), (x,)

@build
def complex_ops():
    x = torch.randn(4, 64, device=D, dtype=torch.complex64, requires_grad=True)
    return (lambda x: (torch.fft.ifft(torch.fft.fft(x) * x.conj()).real.sum() + x.angle().sum() + torch.view_as_real(x).sum()).backward()), (x,)



def transformers_programs() -> dict:
    """Training steps of transformers models built from small configs (no weights): {name: build}."""
    import transformers as T

    V = 1000
    def lm(cfg_cls, model_cls, **kw):
        def build():
            cfg = cfg_cls(**kw)
            m = model_cls(cfg).cuda().train()
            ids = torch.randint(0, 900, (2, 32), device="cuda")
            def step(ids):
                out = m(input_ids=ids, labels=ids)
                out.loss.backward()
            return step, (ids,)
        return build
    def small(**kw):
        base = dict(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
        base.update(kw); return base
    def vision(cfg_cls, model_cls, image=64, channels=3, labels=True, **kw):
        def build():
            cfg = cfg_cls(**kw)
            m = model_cls(cfg).cuda().train()
            x = torch.randn(2, channels, image, image, device="cuda")
            y = torch.randint(0, 2, (2,), device="cuda")
            def step(x, y):
                out = m(pixel_values=x, labels=y) if labels else m(pixel_values=x)
                (out.loss if labels else out.last_hidden_state.float().mean()).backward()
            return step, (x, y)
        return build
    def audio(cfg_cls, model_cls, **kw):
        def build():
            cfg = cfg_cls(**kw)
            m = model_cls(cfg).cuda().train()
            x = torch.randn(2, 16000, device="cuda")
            def step(x):
                m(input_values=x).last_hidden_state.mean().backward()
            return step, (x,)
        return build
    def seq2seq(cfg_cls, model_cls, **kw):
        def build():
            cfg = cfg_cls(**kw)
            m = model_cls(cfg).cuda().train()
            ids = torch.randint(3, 900, (2, 24), device="cuda"); lab = torch.randint(3, 900, (2, 16), device="cuda")
            def step(ids, lab):
                m(input_ids=ids, labels=lab).loss.backward()
            return step, (ids, lab)
        return build

    return {
     "mixtral": lm(T.MixtralConfig, T.MixtralForCausalLM, **small(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)),
     "qwen2_moe": lm(T.Qwen2MoeConfig, T.Qwen2MoeForCausalLM, **small(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64)),
     "mamba": lm(T.MambaConfig, T.MambaForCausalLM, vocab_size=V, hidden_size=64, num_hidden_layers=2, state_size=8),
     "falcon": lm(T.FalconConfig, T.FalconForCausalLM, vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4),
     "bloom": lm(T.BloomConfig, T.BloomForCausalLM, vocab_size=V, hidden_size=64, n_layer=2, n_head=4),
     "mpt": lm(T.MptConfig, T.MptForCausalLM, vocab_size=V, d_model=64, n_layers=2, n_heads=4),
     "gemma2": lm(T.Gemma2Config, T.Gemma2ForCausalLM, **small(num_key_value_heads=2, head_dim=16)),
     "phi3": lm(T.Phi3Config, T.Phi3ForCausalLM, **small(num_key_value_heads=2, pad_token_id=0)),
     "stablelm": lm(T.StableLmConfig, T.StableLmForCausalLM, **small(num_key_value_heads=2)),
     "rwkv": lm(T.RwkvConfig, T.RwkvForCausalLM, vocab_size=V, hidden_size=64, num_hidden_layers=2, attention_hidden_size=64, intermediate_size=128, context_length=64),
     "xlnet": lm(T.XLNetConfig, T.XLNetLMHeadModel, vocab_size=V, d_model=64, n_layer=2, n_head=4, d_inner=128),
     "longformer": lm(T.LongformerConfig, T.LongformerForMaskedLM, **small(attention_window=8, max_position_embeddings=80)),
     "big_bird": lm(T.BigBirdConfig, T.BigBirdForMaskedLM, **small(attention_type="original_full", max_position_embeddings=80)),
     "funnel": lm(T.FunnelConfig, T.FunnelForMaskedLM, vocab_size=V, d_model=64, n_head=4, d_head=16, d_inner=128, block_sizes=[1, 1]),
     "electra": lm(T.ElectraConfig, T.ElectraForMaskedLM, **small(embedding_size=32)),
     "albert": lm(T.AlbertConfig, T.AlbertForMaskedLM, **small(embedding_size=32)),
     "t5": seq2seq(T.T5Config, T.T5ForConditionalGeneration, vocab_size=V, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, decoder_start_token_id=0),
     "bart": seq2seq(T.BartConfig, T.BartForConditionalGeneration, vocab_size=V, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128),
     "pegasus": seq2seq(T.PegasusConfig, T.PegasusForConditionalGeneration, vocab_size=V, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128),
     "swin": vision(T.SwinConfig, T.SwinForImageClassification, image=64, embed_dim=32, depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=2),
     "convnext": vision(T.ConvNextConfig, T.ConvNextForImageClassification, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=2),
     "segformer": vision(T.SegformerConfig, T.SegformerModel, labels=False, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2], decoder_hidden_size=32),
     "beit": vision(T.BeitConfig, T.BeitForImageClassification, image=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, use_relative_position_bias=True, num_labels=2),
     "deit": vision(T.DeiTConfig, T.DeiTForImageClassification, image=32, image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, num_labels=2),
     "dinov2": vision(T.Dinov2Config, T.Dinov2Model, labels=False, image=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4),
     "wav2vec2": audio(T.Wav2Vec2Config, T.Wav2Vec2Model, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4),
     "hubert": audio(T.HubertConfig, T.HubertModel, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4),
    }


def run(name: str, kind: str, program) -> bool:
    try:
        if kind == "block":
            with capture("h200") as cap:
                program()
            captured = cap.capture
        else:
            captured = capture_workload(program, "h200")
        p = predict_capture(captured, "h200")
        print(f"OK   {name:30s} ops {len(captured.ops):5d} kernels {p.kernels:5d} gpu {p.gpu_time_us:9.1f} us "
              f"syncs {p.sync_points:3d} uncosted {list(p.uncosted)[:3]}", flush=True)
        return True
    except Exception as exc:  # a failure is a result here
        known = " (known)" if name in KNOWN_FAILURES else ""
        print(f"FAIL {name:30s}{known} {type(exc).__name__}: {str(exc)[:240]}", flush=True)
        return False


def main() -> int:
    programs = [(n, "block", f) for n, f in BLOCKS.items()] + [(n, "build", f) for n, f in BUILDS.items()]
    try:
        programs += [(n, "build", f) for n, f in transformers_programs().items()]
    except ImportError:
        print("transformers is not importable: its training steps are skipped")
    chosen = set(sys.argv[1:])
    failed = [n for n, kind, f in programs if (not chosen or n in chosen) and not run(n, kind, f)]
    unexpected = [n for n in failed if n not in KNOWN_FAILURES]
    print(f"{len(failed)} failed ({len(unexpected)} not known): {unexpected}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())

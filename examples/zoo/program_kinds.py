"""Kinds of program that broke the capture or the prediction when tried as users would (issue 31):
activation checkpointing, 3-D CNNs, FFT layers, TF32 GEMMs, cuDNN LSTM inference, a 7B-parameter optimizer step.

    kernelcast predict examples/zoo/program_kinds.py:vit_checkpointed_train --gpu h200
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

BF16 = torch.bfloat16


def _train(model, loss_of, *inputs, opt=None):
    opt = opt or torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(*inputs):
        loss = loss_of(model, *inputs)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, inputs


def _bf16_cross_entropy(model, x, labels):
    with torch.autocast("cuda", dtype=BF16):
        return nn.functional.cross_entropy(model(x), labels)


def _no_grad_forward(model, x):
    def step(x):
        with torch.no_grad():
            out = model(x)
        return out[0] if isinstance(out, tuple) else out  # nn.LSTM: (output, (h, c))

    return step, (x,)


class _Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class _Encoder(nn.Module):
    def __init__(self, width=768, heads=12, depth=8, checkpointed=True):
        super().__init__()
        self.blocks = nn.ModuleList(_Block(width, heads) for _ in range(depth))
        self.head = nn.Linear(width, 1000)
        self.checkpointed = checkpointed

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        return self.head(x.mean(dim=1))


def _vit_train(checkpointed):
    model = _Encoder(checkpointed=checkpointed).cuda()
    x = torch.randn(32, 197, 768, device="cuda")
    labels = torch.randint(0, 1000, (32,), device="cuda")

    return _train(model, _bf16_cross_entropy, x, labels)


def vit_checkpointed_train():
    """A ViT-B-shaped encoder (8 blocks, 197 tokens, batch 32), bf16 autocast, each block checkpointed
    (torch.utils.checkpoint, non-reentrant): the forward keeps only block inputs, backward recomputes."""
    return _vit_train(True)


def vit_plain_train():
    """The same encoder without checkpointing (the memory checkpointing saves is the difference)."""
    return _vit_train(False)


def video_conv3d_train():
    """A small 3-D CNN for video (R3D-style: 3x3x3 convolutions, batch norm, ReLU, strided downsampling),
    bf16 autocast, batch 4 x 3 x 16 frames x 112 x 112."""
    def stage(cin, cout, stride):
        return nn.Sequential(nn.Conv3d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm3d(cout),
                             nn.ReLU(inplace=True))

    model = nn.Sequential(stage(3, 32, (1, 2, 2)), stage(32, 64, 2), stage(64, 128, 2), stage(128, 256, 2),
                          nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(256, 400)).cuda()
    x = torch.randn(4, 3, 16, 112, 112, device="cuda")
    labels = torch.randint(0, 400, (4,), device="cuda")

    return _train(model, _bf16_cross_entropy, x, labels)


def volumetric_conv3d_forward_bf16():
    """A 3-D U-Net-style encoder forward in bf16 (medical volumes: batch 2 x 1 x 64^3)."""
    model = nn.Sequential(
        nn.Conv3d(1, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.SiLU(),
        nn.Conv3d(32, 64, 3, stride=2, padding=1), nn.GroupNorm(8, 64), nn.SiLU(),
        nn.Conv3d(64, 128, 3, stride=2, padding=1), nn.GroupNorm(8, 128), nn.SiLU(),
        nn.ConvTranspose3d(128, 64, 2, stride=2), nn.SiLU(),
    ).to("cuda", BF16).eval()
    return _no_grad_forward(model, torch.randn(2, 1, 64, 64, 64, device="cuda", dtype=BF16))


class _SpectralConv(nn.Module):
    """An FNO-style spectral layer: rfft2, a complex einsum on the lowest modes, irfft2."""

    def __init__(self, channels, modes):
        super().__init__()
        self.modes = modes
        scale = 1 / channels
        self.weight = nn.Parameter(scale * torch.randn(channels, channels, modes, modes, dtype=torch.cfloat))
        self.skip = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        spectrum = torch.fft.rfft2(x)
        out = torch.zeros_like(spectrum)
        m = self.modes
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", spectrum[:, :, :m, :m], self.weight)
        return nn.functional.gelu(torch.fft.irfft2(out, s=x.shape[-2:]) + self.skip(x))


def fft_layers_train():
    """Four spectral layers (32 channels, 16 modes) on batch 16 x 128 x 128, fp32 training."""
    model = nn.Sequential(nn.Conv2d(3, 32, 1), *(_SpectralConv(32, 16) for _ in range(4)), nn.Conv2d(32, 1, 1)).cuda()
    x = torch.randn(16, 3, 128, 128, device="cuda")
    target = torch.randn(16, 1, 128, 128, device="cuda")
    return _train(model, lambda model, x, target: nn.functional.mse_loss(model(x), target), x, target)


def mlp_tf32_train():
    """An fp32 MLP (4 x 4096 wide, batch 2048) trained with TF32 GEMMs (allow_tf32 set in build())."""
    torch.backends.cuda.matmul.allow_tf32 = True
    layers = []
    for _ in range(4):
        layers += [nn.Linear(4096, 4096), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(4096, 10)).cuda()
    x = torch.randn(2048, 4096, device="cuda")
    labels = torch.randint(0, 10, (2048,), device="cuda")
    return _train(model, lambda model, x, labels: nn.functional.cross_entropy(model(x), labels), x, labels)


def lstm_inference_fp32():
    """A 2-layer cuDNN LSTM (hidden 1024) forward in fp32, batch 32 x 256 steps, under no_grad."""
    model = nn.LSTM(512, 1024, num_layers=2, batch_first=True).cuda().eval()
    return _no_grad_forward(model, torch.randn(32, 256, 512, device="cuda"))


def llama7b_adamw_step():
    """The optimizer step alone of a Llama-7B-shaped model (32 layers, hidden 4096, MLP 11008, vocab 32000:
    6.7B parameters) in bf16 with bf16 gradients, AdamW (foreach): multi_tensor_apply's launches over 291
    tensors of up to 131M elements."""
    hidden, mlp, layers, vocab = 4096, 11008, 32, 32000
    shapes = [(vocab, hidden), (vocab, hidden), (hidden,)]
    for _ in range(layers):
        shapes += [(hidden, hidden)] * 4 + [(mlp, hidden), (mlp, hidden), (hidden, mlp), (hidden,), (hidden,)]
    params = [nn.Parameter(torch.empty(shape, device="cuda", dtype=BF16)) for shape in shapes]
    for p in params:
        p.grad = torch.empty_like(p)
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)

    def step():
        opt.step()

    return step, ()


# PyTorch's fused inference path ("fast path"): nn.MultiheadAttention, nn.TransformerEncoderLayer and
# nn.TransformerEncoder in eval without autograd run torch._native_multi_head_attention /
# torch._transformer_encoder_layer_fwd (aten/src/ATen/native/transformers/), and with a key padding mask a
# nested batch, where the conditions in torch/nn/modules/transformer.py (why_not_sparsity_fast_path) hold.


def _encoder(width, heads, layers, nested):
    layer = nn.TransformerEncoderLayer(width, heads, 4 * width, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=nested).cuda().eval()


def encoder_fastpath_forward():
    """A 6-layer nn.TransformerEncoder (d_model 512, 8 heads) in fp32, eval and no_grad, batch 16 x 128, no
    mask: each layer one torch._transformer_encoder_layer_fwd on the GPU."""
    torch.manual_seed(0)
    return _no_grad_forward(_encoder(512, 8, 6, nested=False), torch.randn(16, 128, 512, device="cuda"))


def encoder_fastpath_padded_fp16():
    """The same encoder in fp16 with a key padding mask (a quarter of each row padded): the nested-tensor path,
    with the mask's left-alignment check."""
    torch.manual_seed(0)
    model = _encoder(512, 8, 6, nested=True).half()
    x = torch.randn(16, 128, 512, device="cuda", dtype=torch.float16)
    mask = torch.zeros(16, 128, dtype=torch.bool, device="cuda")
    mask[:, 96:] = True

    def step(x, mask):
        with torch.no_grad():
            return model(x, src_key_padding_mask=mask)

    return step, (x, mask)


def mha_fastpath_forward():
    """nn.MultiheadAttention alone (embed 1024, 16 heads) in bf16, eval and no_grad, self-attention over
    8 x 512 tokens, need_weights=False: torch._native_multi_head_attention."""
    torch.manual_seed(0)
    attn = nn.MultiheadAttention(1024, 16, batch_first=True).cuda().to(BF16).eval()
    x = torch.randn(8, 512, 1024, device="cuda", dtype=BF16)

    def step(x):
        with torch.no_grad():
            return attn(x, x, x, need_weights=False)[0]

    return step, (x,)


# -- backward formulas whose GPU branch reads the GPU (issue 31; capture/real_backward.py) ------------------------
class _RadianceField(nn.Module):
    """A NeRF-style MLP: a sample's position in, density and colour out (Mildenhall et al. 2020, smaller)."""

    def __init__(self, width=256, depth=6):
        super().__init__()
        layers = [nn.Linear(63, width), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [nn.Linear(width, width), nn.ReLU()]
        self.trunk = nn.Sequential(*layers)
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        out = self.head(self.trunk(x))
        return torch.relu(out[..., 0]), torch.sigmoid(out[..., 1:])


def nerf_volume_render_train():
    """Volume rendering's transmittance is a cumprod along each ray (nerf-pytorch's raw2outputs: alpha * cumprod(1 -
    alpha)): its backward is cumprod's, whose GPU branch reads whether any factor is zero. 2048 rays x 64 samples."""
    rays, samples = 2048, 64
    model = _RadianceField().cuda()
    encoded = torch.randn(rays, samples, 63, device="cuda")
    deltas = torch.full((rays, samples), 0.03, device="cuda")
    target = torch.rand(rays, 3, device="cuda")

    def render_loss(model, encoded, deltas, target):
        sigma, rgb = model(encoded)
        alpha = 1.0 - torch.exp(-sigma * deltas)
        ones = torch.ones(rays, 1, device="cuda")
        transmittance = torch.cumprod(torch.cat([ones, 1.0 - alpha + 1e-10], -1), -1)[:, :-1]
        weights = alpha * transmittance
        colour = (weights[..., None] * rgb).sum(-2)
        return nn.functional.mse_loss(colour, target)

    return _train(model, render_loss, encoded, deltas, target, opt=torch.optim.Adam(model.parameters(), lr=5e-4))


def policy_gradient_train():
    """REINFORCE on a categorical policy: actions sampled with torch.distributions.Categorical (torch.multinomial:
    its input checks run on the GPU from torch 2.11), their log-probabilities gathered, a baseline-subtracted loss.
    4096 states x 18 actions, a 3-layer MLP."""
    model = nn.Sequential(nn.Linear(128, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 18)).cuda()
    states = torch.randn(4096, 128, device="cuda")
    returns = torch.randn(4096, device="cuda")

    def loss_of(model, states, returns):
        policy = torch.distributions.Categorical(logits=model(states))
        actions = policy.sample()
        advantage = returns - returns.mean()
        return -(policy.log_prob(actions) * advantage).mean() - 0.01 * policy.entropy().mean()

    return _train(model, loss_of, states, returns)


# -- patterns that failed to capture until 2026-12-08 (issue 31; scripts/eval/user_programs_check.py) -------------
class _GraphConvolution(nn.Module):
    """A GCN layer (Kipf & Welling 2017): the normalised adjacency, a sparse COO matrix, times the features'
    projection, `torch.sparse.mm(adj, x @ W)`."""

    def __init__(self, width_in, width_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width_in, width_out) * width_in ** -0.5)

    def forward(self, adj, x):
        return torch.sparse.mm(adj, x @ self.weight)


def gcn_sparse_adjacency_train():
    """A two-layer GCN on a 20,000-node graph of 200,000 random edges (self-loops added, degree-normalised), 256
    features in, 16 classes, fp32, Adam: the SpMM forward and its backward (adj.t() @ grad, after a coalesce)."""
    nodes, edges = 20_000, 200_000
    ids = torch.randint(0, nodes, (2, edges), device="cuda")
    ids = torch.cat([ids, torch.arange(nodes, device="cuda").expand(2, nodes)], 1)
    degree = torch.zeros(nodes, device="cuda").index_add_(0, ids[0], torch.ones(ids.shape[1], device="cuda"))
    norm = degree.rsqrt()
    adj = torch.sparse_coo_tensor(ids, norm[ids[0]] * norm[ids[1]], (nodes, nodes)).coalesce()
    layers = nn.ModuleList([_GraphConvolution(256, 64), _GraphConvolution(64, 16)]).cuda()
    x = torch.randn(nodes, 256, device="cuda")
    labels = torch.randint(0, 16, (nodes,), device="cuda")

    def loss_of(layers, adj, x, labels):
        hidden = torch.relu(layers[0](adj, x))
        return nn.functional.cross_entropy(layers[1](adj, hidden), labels)

    return _train(layers, loss_of, adj, x, labels, opt=torch.optim.Adam(layers.parameters(), lr=1e-2))


def checkpoint_each_step_train():
    """An MLP training step that saves the model's state_dict with torch.save after every step (to an in-memory
    buffer here): one blocking device-to-host copy per parameter (torch/serialization.py)."""
    import io

    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, labels = torch.randn(256, 1024, device="cuda"), torch.randint(0, 10, (256,), device="cuda")

    def step(x, labels):
        nn.functional.cross_entropy(model(x), labels).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.save(model.state_dict(), io.BytesIO())

    return step, (x, labels)


class _ScriptedBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        h = self.linear(x)
        return x + torch.sigmoid(h) * h * 0.5 + 0.1  # a chain of elementwise ops TorchScript's fuser can join


def torchscript_mlp_forward():
    """A torch.jit.script'ed MLP of 8 residual blocks (1024 wide, batch 512, fp32) moved with .cuda(), inference:
    after its profiling runs TorchScript's NNC fuser may join each block's elementwise chain into one kernel."""
    model = torch.jit.script(nn.Sequential(*[_ScriptedBlock(1024) for _ in range(8)])).cuda()
    return _no_grad_forward(model, torch.randn(512, 1024, device="cuda"))

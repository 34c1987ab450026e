"""Diffusion-style U-Net blocks (group norm, SiLU, attention over pixels), an audio front-end (conv1d stack), and
a small transformer trained with mixed precision (autocast + GradScaler) or clip_grad_norm_.

    kernelcast predict examples/zoo/blocks.py:unet_block_train --gpu h200
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# -- diffusion -----------------------------------------------------------------------------------------------


class ResBlock(nn.Module):
    def __init__(self, cin, cout, temb=512, groups=32):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, t):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(t))[:, :, None, None]
        h = self.conv2(F.dropout(F.silu(self.norm2(h)), 0.1, self.training))
        return self.skip(x) + h


class SpatialAttention(nn.Module):
    def __init__(self, ch, heads=8, groups=32):
        super().__init__()
        self.heads = heads
        self.norm = nn.GroupNorm(groups, ch)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.out = nn.Conv2d(ch, ch, 1)

    def forward(self, x):
        b, c, hgt, wid = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, hgt * wid).unbind(1)
        o = F.scaled_dot_product_attention(q.transpose(-1, -2), k.transpose(-1, -2), v.transpose(-1, -2))
        return x + self.out(o.transpose(-1, -2).reshape(b, c, hgt, wid))


class UNetStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.time = nn.Sequential(nn.Linear(128, 512), nn.SiLU(), nn.Linear(512, 512))
        self.res1 = ResBlock(128, 256)
        self.attn = SpatialAttention(256)
        self.res2 = ResBlock(256, 256)
        self.down = nn.Conv2d(256, 256, 3, 2, 1)
        self.up = nn.ConvTranspose2d(256, 128, 4, 2, 1)

    def forward(self, x, t):
        temb = self.time(t)
        h = self.res2(self.attn(self.res1(x, temb)), temb)
        return self.up(self.down(h))


def unet_block_train():
    torch.manual_seed(0)
    model = UNetStage().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 128, 32, 32, device="cuda")
    t = torch.randn(8, 128, device="cuda")

    def step(x, t):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(model(x, t).float(), x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (x, t)


def unet_block_forward_fp16():
    torch.manual_seed(0)
    model = UNetStage().cuda().half().eval()
    x = torch.randn(16, 128, 32, 32, device="cuda", dtype=torch.float16)
    t = torch.randn(16, 128, device="cuda", dtype=torch.float16)

    def step(x, t):
        with torch.no_grad():
            return model(x, t)

    return step, (x, t)

# -- audio ---------------------------------------------------------------------------------------------------


class ConvFrontEnd(nn.Module):
    """A conv1d stack over raw audio (strides 5,2,2,2,2,2,2: 320x down-sampling), batch-norm'd, with GELU."""

    def __init__(self, ch=256):
        super().__init__()
        layers, cin = [], 1
        for kernel, stride in [(10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)]:
            layers += [nn.Conv1d(cin, ch, kernel, stride, bias=False), nn.BatchNorm1d(ch), nn.GELU()]
            cin = ch
        self.net = nn.Sequential(*layers)
        self.proj = nn.Linear(ch, 256)

    def forward(self, audio):
        return self.proj(self.net(audio[:, None]).transpose(1, 2))


def audio_conv1d_train():
    torch.manual_seed(0)
    model = ConvFrontEnd().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    audio = torch.randn(8, 48000, device="cuda")

    def step(audio):
        loss = model(audio).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (audio,)


def audio_spectrogram_forward():
    """A log-mel style front end: STFT (cuFFT), power, a mel projection, log, then conv1d layers."""
    torch.manual_seed(0)
    window = torch.hann_window(400, device="cuda")
    mel = torch.rand(201, 80, device="cuda")
    convs = nn.Sequential(nn.Conv1d(80, 256, 3, padding=1), nn.GELU(), nn.Conv1d(256, 256, 3, 2, 1), nn.GELU()).cuda()
    audio = torch.randn(8, 160000, device="cuda")

    def step(audio):
        with torch.no_grad():
            spec = torch.stft(audio, 400, 160, window=window, return_complex=True).abs().square()
            feats = torch.log(torch.clamp(spec.transpose(1, 2) @ mel, min=1e-10))
            return convs(feats.transpose(1, 2))

    return step, (audio,)

# -- a small transformer for optimizers and mixed precision ---------------------------------------------------


def small_transformer(dim=512, layers=2, vocab=8192):
    layer = nn.TransformerEncoderLayer(dim, 8, 4 * dim, dropout=0.1, batch_first=True, norm_first=True)
    return nn.ModuleDict({"emb": nn.Embedding(vocab, dim), "enc": nn.TransformerEncoder(layer, layers),
                          "head": nn.Linear(dim, vocab)})


def _lm_loss(model, ids):
    logits = model["head"](model["enc"](model["emb"](ids)))
    return F.cross_entropy(logits.flatten(0, 1), ids.flatten())


def amp_fp16_gradscaler_train():
    torch.manual_seed(0)
    model = small_transformer().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    ids = torch.randint(0, 8192, (16, 256), device="cuda")

    def step(ids):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = _lm_loss(model, ids)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    return step, (ids,)


def amp_bf16_clip_train():
    torch.manual_seed(0)
    model = small_transformer().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, 8192, (16, 256), device="cuda")

    def step(ids):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = _lm_loss(model, ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (ids,)


class TemporalConvBlock(nn.Module):
    """A TTS/ASR-style block on (batch, frames, channels): layer norm over channels, then a conv1d over frames
    through transposes, as FastSpeech-like and Conformer-like code writes it."""

    def __init__(self, channels=384, kernel=9):
        super().__init__()
        self.norm = nn.LayerNorm(channels)
        self.conv1 = nn.Conv1d(channels, 4 * channels, kernel, padding=kernel // 2)
        self.conv2 = nn.Conv1d(4 * channels, channels, 1)

    def forward(self, x):
        h = self.norm(x).transpose(1, 2)
        h = self.conv2(F.relu(self.conv1(h)))
        return x + h.transpose(1, 2)


def temporal_conv_train():
    torch.manual_seed(0)
    model = nn.Sequential(*(TemporalConvBlock() for _ in range(3))).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(16, 400, 384, device="cuda")

    def step(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (x,)

"""Synthetic steps of the validation suite: GEMMs of odd shapes, elementwise ops from 4 KB to 1 GB, norms and
softmax. Two of the GEMMs (GPT-2's lm_head, 8192x50257x768, and its padded twin 8192x50304x768) are also
calibration shapes; no other shape here is one the calibration measured.

    kernelcast validate examples/suite.py:matmul_sweep --gpu h200
"""

import torch
import torch.nn.functional as F

MATMULS = [  # (M, N, K, dtype, weight layout)
    (1000, 1000, 1000, torch.bfloat16, "nn"), (3000, 5000, 700, torch.bfloat16, "linear"),
    (777, 4097, 1023, torch.bfloat16, "nn"), (8192, 50257, 768, torch.bfloat16, "linear"),
    (8192, 50304, 768, torch.bfloat16, "linear"), (2048, 8192, 2048, torch.bfloat16, "linear"),
    (512, 12000, 3000, torch.bfloat16, "nn"), (16, 4096, 4096, torch.bfloat16, "linear"),
    (5000, 5000, 5000, torch.float32, "nn"), (3333, 2222, 1111, torch.float32, "linear"),
    (24000, 1536, 6144, torch.bfloat16, "linear"), (1536, 6144, 24000, torch.bfloat16, "nn"),
]
ELEMENTWISE_BYTES = [4 << 10, 10 << 10, 300 << 10, 5 << 20, 80 << 20, 700 << 20, 1 << 30]


def matmul_sweep():
    operands = []
    for m, n, k, dtype, layout in MATMULS:
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(n, k, device="cuda", dtype=dtype) if layout == "linear" else torch.randn(k, n, device="cuda", dtype=dtype)
        operands.append((a, b, layout))

    def step(operands):
        for a, b, layout in operands:
            F.linear(a, b) if layout == "linear" else a @ b

    return step, (operands,)


def elementwise_sweep():
    tensors = [(torch.randn(n // 4, device="cuda"), torch.randn(n // 4, device="cuda")) for n in ELEMENTWISE_BYTES]

    def step(tensors):
        for x, y in tensors:
            z = x * y
            z = torch.sigmoid(z)
            z = torch.where(x > 0, z, y)
            z.to(torch.bfloat16)

    return step, (tensors,)


def norms_softmax():
    ln_bf16 = torch.nn.LayerNorm(1024).cuda().bfloat16()
    ln_fp32 = torch.nn.LayerNorm(2048).cuda()
    x1 = torch.randn(6144, 1024, device="cuda", dtype=torch.bfloat16)
    x2 = torch.randn(3000, 2048, device="cuda")
    s1 = torch.randn(24576, 2000, device="cuda")
    s2 = torch.randn(96, 12, 384, 384, device="cuda", dtype=torch.bfloat16)
    h = torch.randn(4096, 5120, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(5120, device="cuda", dtype=torch.bfloat16)

    def step(x1, x2, s1, s2, h, w):
        ln_bf16(x1)
        ln_fp32(x2)
        torch.softmax(s1, dim=-1)
        torch.log_softmax(s1, dim=-1)
        torch.softmax(s2, dim=-1)
        variance = h.float().pow(2).mean(-1, keepdim=True)  # Llama's RMSNorm, as transformers writes it
        w * (h.float() * torch.rsqrt(variance + 1e-6)).to(torch.bfloat16)

    return step, (x1, x2, s1, s2, h, w)

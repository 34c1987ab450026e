"""Recommenders with embedding bags, a hand-written MoE with top-k routing, and graph networks with scatter and
index_add.

    kernelcast predict examples/zoo/recsys_moe_graph.py:dlrm_train_adagrad --gpu h200
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# -- recommenders --------------------------------------------------------------------------------------------


class DLRM(nn.Module):
    def __init__(self, tables=8, rows=100_000, dim=64, dense=13, mode="sum"):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode=mode) for _ in range(tables))
        self.bottom = nn.Sequential(nn.Linear(dense, 256), nn.ReLU(), nn.Linear(256, dim), nn.ReLU())
        pairs = (tables + 1) * tables // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                 nn.Linear(256, 1))

    def forward(self, dense, indices, offsets):
        x = self.bottom(dense)
        embs = [bag(idx, off) for bag, idx, off in zip(self.bags, indices, offsets)]
        feats = torch.stack([x, *embs], dim=1)  # (B, T+1, D)
        inter = torch.bmm(feats, feats.transpose(1, 2))
        i, j = torch.tril_indices(feats.shape[1], feats.shape[1], offset=-1, device=feats.device)
        return self.top(torch.cat([x, inter[:, i, j]], dim=1)).squeeze(1)


def _dlrm_batch(model, batch=2048, bag=20):
    dense = torch.randn(batch, 13, device="cuda")
    indices = [torch.randint(0, 100_000, (batch * bag,), device="cuda") for _ in model.bags]
    offsets = [torch.arange(0, batch * bag, bag, device="cuda") for _ in model.bags]
    labels = torch.rand(batch, device="cuda")
    return dense, indices, offsets, labels


def dlrm_train_adagrad():
    torch.manual_seed(0)
    model = DLRM().cuda()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.01)
    dense, indices, offsets, labels = _dlrm_batch(model)

    def step(dense, indices, offsets, labels):
        loss = F.binary_cross_entropy_with_logits(model(dense, indices, offsets), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (dense, indices, offsets, labels)


def dlrm_forward_mean():
    torch.manual_seed(0)
    model = DLRM(mode="mean").cuda().eval()
    dense, indices, offsets, _ = _dlrm_batch(model, batch=4096)

    def step(dense, indices, offsets):
        with torch.no_grad():
            return model(dense, indices, offsets)

    return step, (dense, indices, offsets)


def sparse_embedding_sgd():
    """A large nn.Embedding with sparse gradients, trained with SGD (sparse update path)."""
    torch.manual_seed(0)
    emb = nn.Embedding(500_000, 128, sparse=True).cuda()
    head = nn.Linear(128, 1).cuda()
    opt = torch.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.1)
    ids = torch.randint(0, 500_000, (4096, 8), device="cuda")
    target = torch.rand(4096, device="cuda")

    def step(ids, target):
        loss = F.mse_loss(head(emb(ids).mean(1)).squeeze(1), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (ids, target)

def _sparse_tables_step(opt, tables, dense_opt, ids, offsets, head, target):
    def step(ids, offsets, target):
        pooled = torch.cat([t(i, o) for t, i, o in zip(tables, ids, offsets)], dim=1)
        loss = F.binary_cross_entropy_with_logits(head(pooled).squeeze(1), target)
        loss.backward()
        opt.step()
        dense_opt.step()
        opt.zero_grad(set_to_none=True)
        dense_opt.zero_grad(set_to_none=True)

    return step, (ids, offsets, target)


def _sparse_tables(mode: str, rows: int, dim: int, tables: int, batch: int, bag: int):
    tables_ = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode=mode, sparse=True) for _ in range(tables)).cuda()
    head = nn.Linear(tables * dim, 1).cuda()
    ids = [torch.randint(0, rows, (batch * bag,), device="cuda") for _ in range(tables)]
    offsets = [torch.arange(0, batch * bag, bag, device="cuda") for _ in range(tables)]
    return tables_, head, ids, offsets, torch.rand(batch, device="cuda")


def sparse_bag_adagrad():
    """Four sparse EmbeddingBag tables (sum) trained with Adagrad's sparse path (coalesce, sparse_mask, dense +=
    sparse), the head with SGD."""
    torch.manual_seed(0)
    tables, head, ids, offsets, target = _sparse_tables("sum", 200_000, 64, 4, 1024, 16)
    opt = torch.optim.Adagrad(tables.parameters(), lr=0.05)
    return _sparse_tables_step(opt, tables, torch.optim.SGD(head.parameters(), lr=0.05), ids, offsets, head, target)


def sparse_bag_mean_sgd():
    """Two sparse EmbeddingBag tables (mean) of 128-wide rows trained with plain SGD."""
    torch.manual_seed(0)
    tables, head, ids, offsets, target = _sparse_tables("mean", 300_000, 128, 2, 2048, 24)
    opt = torch.optim.SGD(tables.parameters(), lr=0.1)
    return _sparse_tables_step(opt, tables, torch.optim.SGD(head.parameters(), lr=0.1), ids, offsets, head, target)


def sparse_embedding_sparse_adam():
    """nn.Embedding(sparse=True) trained with torch.optim.SparseAdam, the MLP on top with Adam (foreach)."""
    torch.manual_seed(0)
    emb = nn.Embedding(100_000, 96, sparse=True).cuda()
    mlp = nn.Sequential(nn.Linear(96, 256), nn.ReLU(), nn.Linear(256, 1)).cuda()
    sparse_opt = torch.optim.SparseAdam(list(emb.parameters()), lr=1e-3)
    dense_opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    ids = torch.randint(0, 100_000, (2048, 10), device="cuda")
    target = torch.rand(2048, device="cuda")

    def step(ids, target):
        loss = F.mse_loss(mlp(emb(ids).sum(1)).squeeze(1), target)
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        sparse_opt.zero_grad(set_to_none=True)
        dense_opt.zero_grad(set_to_none=True)

    return step, (ids, target)


# -- mixture of experts --------------------------------------------------------------------------------------


class MoE(nn.Module):
    """Top-2 routing over 8 expert MLPs, the token loop of Mixtral-style code: each expert gathers its tokens
    with a boolean mask (data-dependent sizes) and index_add_ writes them back."""

    def __init__(self, dim=512, hidden=1024, experts=8, k=2):
        super().__init__()
        self.k = k
        self.gate = nn.Linear(dim, experts, bias=False)
        self.w1 = nn.ModuleList(nn.Linear(dim, hidden, bias=False) for _ in range(experts))
        self.w2 = nn.ModuleList(nn.Linear(hidden, dim, bias=False) for _ in range(experts))

    def forward(self, x):
        tokens = x.flatten(0, 1)
        weights, chosen = torch.topk(F.softmax(self.gate(tokens), dim=-1), self.k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(tokens)
        for e, (w1, w2) in enumerate(zip(self.w1, self.w2)):
            token_idx, slot = torch.where(chosen == e)
            y = w2(F.silu(w1(tokens[token_idx]))) * weights[token_idx, slot, None]
            out.index_add_(0, token_idx, y)
        return out.view_as(x)


def moe_train():
    torch.manual_seed(0)
    model = MoE().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 256, 512, device="cuda")

    def step(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (x,)


def moe_forward_bincount():
    """Routing by counts: bincount of the chosen experts, then split (host reads the counts)."""
    torch.manual_seed(0)
    model = MoE().cuda().to(torch.bfloat16).eval()
    x = torch.randn(8, 256, 512, device="cuda", dtype=torch.bfloat16)

    def step(x):
        with torch.no_grad():
            tokens = x.flatten(0, 1)
            _, chosen = torch.topk(model.gate(tokens), 2, dim=-1)
            flat = chosen.flatten()
            counts = torch.bincount(flat, minlength=8).tolist()
            order = torch.argsort(flat, stable=True)
            pieces = torch.split(tokens[order // 2], counts)
            outs = [w2(F.silu(w1(p))) for p, w1, w2 in zip(pieces, model.w1, model.w2)]
            return torch.cat(outs)

    return step, (x,)

# -- graph networks ------------------------------------------------------------------------------------------


def _graph(nodes=50_000, edges=500_000, feats=128):
    src = torch.randint(0, nodes, (edges,), device="cuda")
    dst = torch.randint(0, nodes, (edges,), device="cuda")
    return torch.randn(nodes, feats, device="cuda"), src, dst


class GCNLayer(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.lin = nn.Linear(cin, cout)

    def forward(self, x, src, dst, norm):
        h = self.lin(x)
        out = torch.zeros_like(h).index_add_(0, dst, h[src] * norm[:, None])
        return F.relu(out)


def gcn_train():
    torch.manual_seed(0)
    x, src, dst = _graph()
    layers = nn.ModuleList([GCNLayer(128, 256), GCNLayer(256, 256), GCNLayer(256, 64)]).cuda()
    opt = torch.optim.Adam(layers.parameters(), lr=1e-3)
    deg = torch.zeros(x.shape[0], device="cuda").index_add_(0, dst, torch.ones_like(dst, dtype=torch.float))
    norm = deg.clamp(min=1).rsqrt()[dst]
    target = torch.randint(0, 64, (x.shape[0],), device="cuda")

    def step(x, src, dst, norm, target):
        h = x
        for layer in layers:
            h = layer(h, src, dst, norm)
        loss = F.cross_entropy(h, target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (x, src, dst, norm, target)


def gat_forward_scatter():
    """Graph attention: per-edge scores, a scatter-max / scatter-sum softmax over each node's in-edges."""
    torch.manual_seed(0)
    x, src, dst = _graph(nodes=20_000, edges=200_000, feats=64)
    lin = nn.Linear(64, 4 * 32, bias=False).cuda()
    att = torch.randn(1, 4, 64, device="cuda")

    def step(x, src, dst):
        with torch.no_grad():
            h = lin(x).view(-1, 4, 32)
            score = F.leaky_relu((torch.cat([h[src], h[dst]], dim=-1) * att).sum(-1), 0.2)  # (E, heads)
            smax = torch.full((x.shape[0], 4), float("-inf"), device="cuda")
            smax = smax.scatter_reduce(0, dst[:, None].expand(-1, 4), score, reduce="amax")
            e = (score - smax[dst]).exp()
            denom = torch.zeros(x.shape[0], 4, device="cuda").scatter_add_(0, dst[:, None].expand(-1, 4), e)
            alpha = e / denom[dst]
            out = torch.zeros_like(h).index_add_(0, dst, h[src] * alpha[..., None])
            return out.flatten(1)

    return step, (x, src, dst)

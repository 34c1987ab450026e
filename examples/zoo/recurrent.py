"""Recurrent networks: nn.LSTM / nn.GRU / nn.RNN (cuDNN), bidirectional and packed, and cell loops.

    kernelcast predict examples/zoo/recurrent.py:lstm_train --gpu h200
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def lstm_train():
    """2-layer LSTM language model, fp32, Adam."""
    torch.manual_seed(0)
    emb = nn.Embedding(10000, 256).cuda()
    lstm = nn.LSTM(256, 512, num_layers=2, batch_first=True).cuda()
    head = nn.Linear(512, 10000).cuda()
    params = [*emb.parameters(), *lstm.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    ids = torch.randint(0, 10000, (32, 128), device="cuda")

    def step(ids):
        out, _ = lstm(emb(ids))
        loss = F.cross_entropy(head(out).flatten(0, 1), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, (ids,)


def gru_bidirectional_forward():
    torch.manual_seed(0)
    gru = nn.GRU(128, 256, num_layers=2, bidirectional=True).cuda().eval()
    x = torch.randn(200, 16, 128, device="cuda")

    def step(x):
        with torch.no_grad():
            return gru(x)[0]

    return step, (x,)


def rnn_tanh_train():
    torch.manual_seed(0)
    rnn = nn.RNN(64, 128, num_layers=1, nonlinearity="tanh").cuda()
    x = torch.randn(100, 32, 64, device="cuda")

    def step(x):
        out, h = rnn(x)
        out.square().mean().backward()
        return out

    return step, (x,)


def lstm_packed_forward():
    """A bidirectional LSTM over a packed batch of variable-length sequences (lengths known on the host)."""
    torch.manual_seed(0)
    lstm = nn.LSTM(80, 256, bidirectional=True, batch_first=True).cuda().eval()
    x = torch.randn(16, 300, 80, device="cuda")
    lengths = torch.tensor([300 - 15 * i for i in range(16)])  # on the host, sorted descending

    def step(x):
        with torch.no_grad():
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
            out, _ = lstm(packed)
            return nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]

    return step, (x,)


def lstmcell_loop_train():
    torch.manual_seed(0)
    cell = nn.LSTMCell(64, 128).cuda()
    x = torch.randn(32, 16, 64, device="cuda")

    def step(x):
        h = torch.zeros(16, 128, device="cuda")
        c = torch.zeros(16, 128, device="cuda")
        outs = []
        for t in range(x.shape[0]):
            h, c = cell(x[t], (h, c))
            outs.append(h)
        torch.stack(outs).square().mean().backward()

    return step, (x,)


def grucell_loop_train():
    """The shared case grucell_loop_vs_gru.py at a 32-step length."""
    torch.manual_seed(0)
    cell = nn.GRUCell(64, 128).cuda()
    x = torch.randn(32, 32, 64, device="cuda")

    def step(x):
        h = torch.zeros(32, 128, device="cuda")
        outs = []
        for t in range(x.shape[0]):
            h = cell(x[t], h)
            outs.append(h)
        out = torch.stack(outs)
        out.square().mean().backward()
        return out

    return step, (x,)

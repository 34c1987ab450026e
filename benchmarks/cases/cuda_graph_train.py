"""A whole training step under a user's CUDA graph (torch.cuda.graph's documentation, "whole-network capture"):
forward, loss, backward and a capturable Adam step captured once in build(); each step copies the batch into
the static buffers and replays the graph."""

import torch


def build(batch: int = 64, width: int = 1024):
    model = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.ReLU(),
                                torch.nn.Linear(2 * width, width)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
    static_x = torch.randn(batch, width, device="cuda")
    static_t = torch.randn(batch, width, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(static_x), static_t).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = torch.nn.functional.mse_loss(model(static_x), static_t)
        loss.backward()
        opt.step()

    def step(x, t, _graphed=(model, opt)):  # the step keeps what the graph replays on
        static_x.copy_(x)
        static_t.copy_(t)
        graph.replay()

    return step, (torch.randn(batch, width, device="cuda"), torch.randn(batch, width, device="cuda"))

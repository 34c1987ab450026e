"""A user's own CUDA graph around an MLP's forward (the pattern of torch.cuda.graph's documentation): warm-up on a
side stream, the forward captured once in build(), each step copies its input into the static buffer and
replays the graph."""

import torch


def build(batch: int = 8, width: int = 512, layers: int = 8):
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*blocks).cuda().eval()
    static_x = torch.randn(batch, width, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        static_y = model(static_x)

    def step(x, _graphed=(model,)):  # the step keeps the model whose memory the graph replays
        static_x.copy_(x)
        graph.replay()
        return static_y

    return step, (torch.randn(batch, width, device="cuda"),)

"""Small programs on CUDA streams, racy and correct, with the hazards each has written beside it: what
tests/predict/test_hazards.py checks kernelcast's analysis against (predict/hazards.py), and what
scripts/device/sanitizer_compare.py runs under PyTorch's CUDA Stream Sanitizer on a GPU. Each takes (x, w, host): two
512 x 512 fp32 CUDA tensors and a pinned host tensor of the same shape.

An expected hazard is (kind, line of the first access, line of the second, first stream, second stream), lines
counted from the program's `def` line, streams as the capture numbers them (0 the default, 1 the first made).
"""

import torch


# -- racy -------------------------------------------------------------------------------------------------
def read_without_wait(x, w, host):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = x @ w
    y.sum()  # the default stream reads y with no wait for s
    y.record_stream(torch.cuda.current_stream())


def write_while_read(x, w, host):
    s = torch.cuda.Stream()
    y = x * 2
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        z = y @ w  # s reads y
        y.record_stream(s)
    y.add_(1)  # the default stream writes y while s may still read it
    return z


def freed_without_record_stream(x, w, host):
    s = torch.cuda.Stream()
    y = x * 2  # allocated on the default stream
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        z = y @ w  # used on s
    del y  # freed: the default stream may reuse the block while s reads it
    return z, x + 1


def prefetch_not_waited(x, w, host):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        batch = host.to("cuda", non_blocking=True)  # the copy runs on s
    batch.record_stream(torch.cuda.current_stream())
    return batch @ w  # no wait for s: the product may read the batch before it has arrived


def event_recorded_too_early(x, w, host):
    s = torch.cuda.Stream()
    done = torch.cuda.Event()
    done.record(s)  # recorded before the work it should mark
    with torch.cuda.stream(s):
        y = x @ w
    done.wait(torch.cuda.current_stream())
    y.record_stream(torch.cuda.current_stream())
    return y.sum()


RACY = {
    read_without_wait: [("unordered-read", 3, 4, 1, 0)],
    write_while_read: [("unordered-write", 5, 7, 1, 0)],
    freed_without_record_stream: [("freed-while-in-use", 5, 7, 1, 0)],
    prefetch_not_waited: [("unordered-read", 3, 5, 1, 0)],
    event_recorded_too_early: [("unordered-read", 5, 8, 1, 0)],
}


# -- correct ----------------------------------------------------------------------------------------------
def one_stream(x, w, host):
    y = x @ w
    y.add_(1)
    return y.sum()


def prefetch_waited(x, w, host):
    """The seed pattern: a pinned non_blocking copy on a side stream, wait_stream, record_stream."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        batch = host.to("cuda", non_blocking=True)
    torch.cuda.current_stream().wait_stream(s)
    batch.record_stream(torch.cuda.current_stream())
    return batch @ w


def event_ordered(x, w, host):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = x @ w
        done = torch.cuda.Event()
        done.record()
    done.wait(torch.cuda.current_stream())
    y.record_stream(torch.cuda.current_stream())
    return y.sum()


def synchronized(x, w, host):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = x @ w
    torch.cuda.synchronize()  # the host waits for every stream
    z = y.sum()
    s.wait_stream(torch.cuda.current_stream())  # s's next allocation waits for the default stream's read
    return z


def handed_back(x, w, host):
    s = torch.cuda.Stream()
    y = x * 2
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        z = y @ w
    torch.cuda.current_stream().wait_stream(s)  # the default stream waits for s before y is written or freed
    y.add_(1)
    del y
    z.record_stream(torch.cuda.current_stream())  # z, made on s, is read on the default stream
    return z.sum()


CORRECT = [one_stream, prefetch_waited, event_ordered, synchronized, handed_back]


PROGRAMS = {**{p.__name__: p for p in RACY}, **{p.__name__: p for p in CORRECT}}

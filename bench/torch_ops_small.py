"""Per-call cost of a small LayerNorm: torch.ops.addnorm.layer_norm against
torch.nn.functional.layer_norm, float32, called from Python: the forward of one (1, 768) row,
and a training call on (8, 768), forward and backward with x, weight and bias requiring grad
(issue 33's target: addnorm no slower than torch); then the same training call with weight and
bias frozen (fine-tuning: neither side computes their gradients); last,
addnorm's backward operator asked for every gradient against asked for dx alone (the
output_mask autograd passes when weight and bias are frozen), on 8, 256 and 4096 rows.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_ops_small.py

Prints the CPU model, each per-call time (the median of several timing rounds, each the mean
over many calls, addnorm's and torch's rounds alternating) and the ratio addnorm / torch (the
median of the rounds' ratios, with quartiles), for plain tensors and for a weight and bias
that require gradients (the autograd kernel then records a graph, as in training). A script,
not a test: timings belong in benchmarks, and the machine may be shared.
"""
import statistics
import timeit

import torch

import addnorm.torch  # noqa: F401  (loads torch.ops.addnorm)
from cpu_model import cpu_model  # bench/, this script's folder

CALLS = 5000
ROUNDS = 15


def quartiles(values):
    q1, median, q3 = statistics.quantiles(values, n=4)
    return median, q1, q3


def compare_calls(label, ours, theirs):
    """Rounds of CALLS calls, addnorm's and torch's alternating, so that a slow spell of a shared
    machine falls on both; prints the per-call medians and the median ratio with its quartiles."""
    ours(), theirs()  # warm up (first-call allocations, lazy initialisation)
    ours_us, theirs_us, ratios = [], [], []
    for _ in range(ROUNDS):
        ours_us.append(timeit.timeit(ours, number=CALLS) / CALLS * 1e6)
        theirs_us.append(timeit.timeit(theirs, number=CALLS) / CALLS * 1e6)
        ratios.append(ours_us[-1] / theirs_us[-1])
    ratio, low, high = quartiles(ratios)
    print(f"{label:<28} addnorm {statistics.median(ours_us):6.2f} us   "
          f"torch {statistics.median(theirs_us):6.2f} us   ratio {ratio:.2f} [{low:.2f}, {high:.2f}]")


def compare(label, requires_grad):
    x = torch.randn(1, 768)
    weight = torch.randn(768, requires_grad=requires_grad)
    bias = torch.randn(768, requires_grad=requires_grad)
    compare_calls(label, lambda: torch.ops.addnorm.layer_norm(x, [768], weight, bias, 1e-5),
                  lambda: torch.nn.functional.layer_norm(x, [768], weight, bias, 1e-5))


def compare_training(rows=8, width=768, frozen=False):
    x = torch.randn(rows, width, requires_grad=True)
    weight = torch.randn(width, requires_grad=not frozen)
    bias = torch.randn(width, requires_grad=not frozen)
    upstream = torch.randn(rows, width)

    def step(layer_norm):
        def run():
            layer_norm(x, [width], weight, bias, 1e-5).backward(upstream)
        return run

    label = f"({rows}, {width}) fwd+bwd" + (", frozen w/b" if frozen else "")
    compare_calls(label, step(torch.ops.addnorm.layer_norm), step(torch.nn.functional.layer_norm))


def compare_output_mask(rows, width=768):
    """The time of layer_norm_backward computing dx, dweight and dbias over its time computing dx
    alone: what frozen parameters save, addnorm against itself, rounds alternating."""
    x, dy = torch.randn(rows, width), torch.randn(rows, width)
    weight, bias = torch.randn(width), torch.randn(width)
    mean = x.mean(-1)
    rstd = torch.rsqrt(x.var(-1, unbiased=False) + 1e-5)
    op = torch.ops.addnorm.layer_norm_backward

    def call(mask):
        return lambda: op(dy, x, [width], weight, bias, 1e-5, mean, rstd, output_mask=mask)

    every, dx_only = call([True, True, True]), call([True, False, False])
    every(), dx_only()
    number = max(20, 200000 // rows)
    ratios = []
    for _ in range(ROUNDS):
        ratios.append(timeit.timeit(every, number=number) / timeit.timeit(dx_only, number=number))
    ratio, low, high = quartiles(ratios)
    print(f"({rows}, {width}) all grads / dx only   ratio {ratio:.2f} [{low:.2f}, {high:.2f}]")


def main():
    print(f"CPU: {cpu_model()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"median of {ROUNDS} rounds of {CALLS} calls each, addnorm's and torch's alternating; "
          "ratio addnorm / torch, median [quartiles] over rounds")
    print("(1, 768) float32 LayerNorm forward")
    compare("plain tensors", requires_grad=False)
    compare("weight/bias require grad", requires_grad=True)
    print("float32 LayerNorm forward and backward, x requiring grad, weight and bias requiring "
          "grad or frozen")
    # (Not larger calls: from about 128 KiB glibc maps fresh gradients anew call after call, as
    # docs/performance.md's allocator section says, and the page faults drown both sides.)
    compare_training()
    compare_training(frozen=True)
    print("addnorm's float32 layer_norm_backward: every gradient against dx alone "
          "(output_mask), median [quartiles] of the time ratio over rounds")
    for rows in (8, 256, 4096):
        compare_output_mask(rows)


if __name__ == "__main__":
    main()

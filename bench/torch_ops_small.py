"""Per-call cost of a small LayerNorm: torch.ops.addnorm.layer_norm against
torch.nn.functional.layer_norm, float32, called from Python: the forward of one (1, 768) row,
and a training call on (8, 768), forward and backward with x, weight and bias requiring grad
(issue 33's target: addnorm no slower than torch).

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


def compare_training(rows=8, width=768):
    x = torch.randn(rows, width, requires_grad=True)
    weight = torch.randn(width, requires_grad=True)
    bias = torch.randn(width, requires_grad=True)
    upstream = torch.randn(rows, width)

    def step(layer_norm):
        def run():
            layer_norm(x, [width], weight, bias, 1e-5).backward(upstream)
        return run

    compare_calls(f"({rows}, {width}) forward+backward", step(torch.ops.addnorm.layer_norm),
                  step(torch.nn.functional.layer_norm))


def main():
    print(f"CPU: {cpu_model()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"median of {ROUNDS} rounds of {CALLS} calls each, addnorm's and torch's alternating; "
          "ratio addnorm / torch, median [quartiles] over rounds")
    print("(1, 768) float32 LayerNorm forward")
    compare("plain tensors", requires_grad=False)
    compare("weight/bias require grad", requires_grad=True)
    print(f"(8, 768) float32 LayerNorm forward and backward, x, weight and bias requiring grad")
    compare_training()


if __name__ == "__main__":
    main()

"""Per-call cost of a small LayerNorm forward: torch.ops.addnorm.layer_norm against
torch.nn.functional.layer_norm on one (1, 768) row, float32, called from Python.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_ops_small.py

Prints the CPU model, each per-call time (the median of several timing rounds, each the mean
over many calls) and the ratio addnorm / torch, for plain tensors and for a weight and bias
that require gradients (the autograd kernel then records a graph, as in training). A script,
not a test: timings belong in benchmarks, and the machine may be shared.
"""
import statistics
import timeit

import torch

import addnorm.torch  # noqa: F401  (loads torch.ops.addnorm)
from cpu_model import cpu_model  # bench/, this script's folder

CALLS = 20000
ROUNDS = 7


def per_call_us(function):
    function()  # warm up (first-call allocations, lazy initialisation)
    rounds = timeit.repeat(function, number=CALLS, repeat=ROUNDS)
    return statistics.median(rounds) / CALLS * 1e6


def compare(label, requires_grad):
    x = torch.randn(1, 768)
    weight = torch.randn(768, requires_grad=requires_grad)
    bias = torch.randn(768, requires_grad=requires_grad)
    ours = per_call_us(lambda: torch.ops.addnorm.layer_norm(x, [768], weight, bias, 1e-5))
    theirs = per_call_us(lambda: torch.nn.functional.layer_norm(x, [768], weight, bias, 1e-5))
    print(f"{label:<28} addnorm {ours:6.2f} us   torch {theirs:6.2f} us   "
          f"ratio {ours / theirs:.2f}")


def main():
    print(f"CPU: {cpu_model()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"(1, 768) float32 LayerNorm forward, median of {ROUNDS} rounds of {CALLS} calls")
    compare("plain tensors", requires_grad=False)
    compare("weight/bias require grad", requires_grad=True)


if __name__ == "__main__":
    main()

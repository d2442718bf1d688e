"""GroupNorm and InstanceNorm speed: addnorm.torch.group_norm against
torch.nn.functional.group_norm in the same process, on the same tensors, calls interleaved.

    OMP_NUM_THREADS=1 PYTHONPATH=build/python /usr/bin/python3 bench/torch_group_norm.py
    OMP_NUM_THREADS=2 PYTHONPATH=build/python /usr/bin/python3 bench/torch_group_norm.py

For each shape it prints the forward's and the forward + backward's time per call (the median
over rounds, each round one call of each implementation in turn), the ratio torch / addnorm
(above 1: addnorm is faster), and the forward's bytes moved (x read, y written) per second
beside a copy of x (x.clone(): the same bytes) timed in the same rounds. A script, not a test:
the machine may be shared, so only ratios from one run mean anything.
"""
import os
import statistics
import time

import torch
import torch.nn.functional as F

import addnorm
import addnorm.torch as at
from cpu_model import cpu_model  # bench/, this script's folder

ROUNDS = 31
CASES = [  # (label, shape, groups, dtype)
    ("SD UNet block, G=32", (8, 256, 32, 32), 32, torch.float32),
    ("ResNet stage 1, G=32", (32, 64, 56, 56), 32, torch.float32),
    ("in cache, G=32", (16, 512, 8, 8), 32, torch.float32),
    ("InstanceNorm (G=C)", (8, 64, 64, 64), 64, torch.float32),
    ("SD UNet block bf16, G=32", (8, 256, 32, 32), 32, torch.bfloat16),
]


def median_times(functions):
    """Median seconds per call of each function, calls interleaved round by round."""
    for function in functions:
        function()
    samples = [[] for _ in functions]
    for _ in range(ROUNDS):
        for function, times in zip(functions, samples):
            start = time.perf_counter()
            function()
            times.append(time.perf_counter() - start)
    return [statistics.median(times) for times in samples]


def case(label, shape, groups, dtype):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype)
    weight = torch.randn(shape[1], dtype=dtype)
    bias = torch.randn(shape[1], dtype=dtype)
    dy = torch.randn(shape, dtype=dtype)
    leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]

    def train_step(function):
        def step():
            for leaf in leaves:
                leaf.grad = None
            function(leaves[0], groups, leaves[1], leaves[2]).backward(dy)
        return step

    ours_fwd, torch_fwd, copy, ours_step, torch_step = median_times([
        lambda: at.group_norm(x, groups, weight, bias),
        lambda: F.group_norm(x, groups, weight, bias),
        lambda: x.clone(),
        train_step(at.group_norm),
        train_step(F.group_norm),
    ])
    moved = 2 * x.numel() * x.element_size() / 1e9
    print(f"{label:<26} {str(tuple(shape)):<20} fwd torch/addnorm {torch_fwd / ours_fwd:5.2f}  "
          f"addnorm {moved / ours_fwd:6.1f} GB/s, copy {moved / copy:6.1f} GB/s  "
          f"| fwd+bwd torch/addnorm {torch_step / ours_step:5.2f}")


def main():
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    torch.set_num_threads(int(threads) if threads.isdigit() else torch.get_num_threads())
    print(f"CPU: {cpu_model()}; torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"OMP_NUM_THREADS={threads}; addnorm SIMD target {addnorm.simd_target()}")
    print(f"median of {ROUNDS} interleaved rounds; ratios above 1 mean addnorm is faster")
    for label, shape, groups, dtype in CASES:
        case(label, shape, groups, dtype)


if __name__ == "__main__":
    main()

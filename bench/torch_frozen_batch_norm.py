"""What a frozen BatchNorm in eval mode saves: torch.ops.addnorm.batch_norm_backward with running
statistics, asked for every gradient against asked for dx and dbias alone (the output_mask
autograd passes when the weight is frozen; the kernel then does not read x), float32
(N, C, H, W) = (64, 256, 32, 32), 64 MiB a tensor, calls of the two alternating.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_frozen_batch_norm.py

Prints the CPU model and the median [quartiles] over rounds of the time ratio, every gradient /
dx and dbias; the byte model of the two is 3 tensors against 2. A script, not a test.

The script runs itself under the allocator tuning of docs/performance.md (GLIBC_TUNABLES, as the
benchmark's torch-tuned pass): as installed, glibc maps every fresh 64 MiB output anew and its
16384 page faults a call outweigh the kernel (the ratio then reads 1.02).
"""
import os
import sys
import timeit

import torch

import addnorm.torch  # noqa: F401  (loads torch.ops.addnorm)
from cpu_model import cpu_model  # bench/, this script's folder
from torch_ops_small import ROUNDS, quartiles


TUNED_ALLOCATOR = ("glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1099511627776:"
                   "glibc.malloc.tcache_count=0")


def main():
    if os.environ.get("GLIBC_TUNABLES") != TUNED_ALLOCATOR:
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, GLIBC_TUNABLES=TUNED_ALLOCATOR))
    print(f"CPU: {cpu_model()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    shape, channels = (64, 256, 32, 32), 256
    x, dy = torch.randn(shape), torch.randn(shape)
    weight, bias = torch.rand(channels) + 0.5, torch.randn(channels)
    mean, var = torch.randn(channels), torch.rand(channels) + 0.5
    op = torch.ops.addnorm.batch_norm_backward

    def call(mask):
        return lambda: op(dy, x, weight, bias, mean, var, False, 1e-5, output_mask=mask)

    every, frozen = call([True, True, True]), call([True, False, True])
    every(), frozen()
    ratios = [timeit.timeit(every, number=5) / timeit.timeit(frozen, number=5)
              for _ in range(ROUNDS)]
    ratio, low, high = quartiles(ratios)
    print(f"eval-mode batch_norm_backward {shape}: every gradient / dx and dbias "
          f"{ratio:.2f} [{low:.2f}, {high:.2f}]")


if __name__ == "__main__":
    main()

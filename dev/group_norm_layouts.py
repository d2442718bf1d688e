#!/usr/bin/python3
"""GroupNorm's forward (or, with --backward, its backward alone) on a channels-last input against
the same tensor contiguous, for addnorm.torch.group_norm and PyTorch's F.group_norm, in one
process: calls of the four alternate round by round, and each figure is the median over rounds of
the best of --calls calls (ms), so the shared machine's drift reaches all four alike. Prints the
CPU, then a table and each implementation's channels-last time over its contiguous time. The
backward is timed as autograd.grad of one recorded forward (retain_graph), with grad_y stored
as the input is.

    PYTHONPATH=build/python /usr/bin/python3 dev/group_norm_layouts.py
    PYTHONPATH=build/python /usr/bin/python3 dev/group_norm_layouts.py --shape 8,320,64,64 --groups 32
    PYTHONPATH=build/python /usr/bin/python3 dev/group_norm_layouts.py --backward
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import addnorm.torch as at


def cpu_model():
    with open("/proc/cpuinfo") as info:
        return next((line.split(":", 1)[1].strip() for line in info
                     if line.startswith("model name")), "unknown CPU")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="8,320,64,64", help="N,C,H,W (or N,C,D,H,W)")
    parser.add_argument("--groups", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backward", action="store_true",
                        help="time the backward (dx, dweight, dbias) instead of the forward")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    shape = tuple(int(d) for d in args.shape.split(","))
    layout = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    generator = torch.Generator().manual_seed(args.seed)
    x = torch.randn(shape, generator=generator)
    x_last = x.to(memory_format=layout)
    weight = torch.randn(shape[1], generator=generator)
    bias = torch.randn(shape[1], generator=generator)
    functions = {"addnorm": at.group_norm, "torch": F.group_norm}
    inputs = {"contiguous": x, "channels-last": x_last}
    if args.backward:
        dy = torch.randn(shape, generator=generator)

        def backward_of(function, stored):
            leaves = [t.detach().requires_grad_() for t in (stored, weight, bias)]
            y = function(leaves[0], args.groups, leaves[1], leaves[2])
            dy_stored = dy.contiguous(
                memory_format=layout if stored is x_last else torch.contiguous_format)
            return lambda: torch.autograd.grad(y, leaves, dy_stored, retain_graph=True)

        cases = {(name, kind): backward_of(function, stored)
                 for name, function in functions.items() for kind, stored in inputs.items()}
    else:
        cases = {(name, kind): (lambda f=function, t=stored: f(t, args.groups, weight, bias))
                 for name, function in functions.items() for kind, stored in inputs.items()}
    times = {case: [] for case in cases}
    with torch.set_grad_enabled(args.backward):
        for call in cases.values():
            call()
        for _ in range(args.rounds):
            for case, call in cases.items():
                best = float("inf")
                for _ in range(args.calls):
                    start = time.perf_counter()
                    call()
                    best = min(best, time.perf_counter() - start)
                times[case].append(best * 1e3)
    print(f"CPU: {cpu_model()}; {'backward' if args.backward else 'forward'}, "
          f"shape {shape}, {args.groups} groups, float32, "
          f"{args.threads} threads, {args.rounds} rounds of best-of-{args.calls}, seed {args.seed}")
    print("| implementation | contiguous (ms) | channels-last (ms) | channels-last / contiguous |")
    print("|---|--:|--:|--:|")
    for name in ("addnorm", "torch"):
        first = statistics.median(times[(name, "contiguous")])
        last = statistics.median(times[(name, "channels-last")])
        print(f"| {name} | {first:.1f} | {last:.1f} | {last / first:.2f} |")


if __name__ == "__main__":
    main()

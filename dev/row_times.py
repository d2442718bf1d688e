#!/usr/bin/python3
"""Nanoseconds a row of several builds of libaddnorm.so and of the plain loop, called in turn in
one process (dev/alternate.c), in cache and from memory: where ab.py --in-process gives ratios,
this gives each library's own time a row, so that a gap to plain can be split into its parts by
builds that each remove one (docs/performance.md, "What limits each op", the bullet "The float32
backward at D = 128").

    /usr/bin/python3 dev/row_times.py --op layer_norm_bwd --dim 128 --mib 0.25,64 \\
        default=build-dev/default/libaddnorm.so nodgamma=build-dev/kSkipParameterGrads-1/libaddnorm.so

The builds are ab.py's (build-dev/<tunables>/); plain is compiled as ab.py compiles it and is
library 0 (so only the ops it has, on rows of whole registers). Each round is a process of its
own, loading the libraries in a rotated order; a library's figure is the median (and range) of
all its calls. One thread is pinned to one core."""
import argparse
import os
import statistics
from pathlib import Path

import ab
import in_process

ROOT = Path(__file__).resolve().parents[1]


def pooled(rounds):
    """[[seconds of each call] per library] per round: all of a library's calls together."""
    return [sum((times[library] for times in rounds), []) for library in range(len(rounds[0]))]


def row_times(rows, times):
    """Each library's (median, min, max) nanoseconds a row, from its seconds a call."""
    if rows <= 0:
        raise ValueError("rows must be positive")
    return [tuple(value / rows * 1e9 for value in (statistics.median(calls), min(calls), max(calls)))
            for calls in times]


def named_library(text):
    """NAME=PATH, the path an existing file."""
    name, equals, path = text.partition("=")
    if not equals or not name or not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"expected NAME=PATH of an existing library, got {text!r}")
    return name, Path(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", required=True, choices=sorted(in_process.PLAIN_OPS),
                        help="an op the plain loop has")
    parser.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    parser.add_argument("--dim", type=int, required=True)
    parser.add_argument("--mib", default="0.25,64", help="tensor sizes, comma-separated")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=40, help="calls a library a round")
    parser.add_argument("--rounds", type=int, default=3, help="processes a size")
    parser.add_argument("libraries", nargs="+", type=named_library, metavar="NAME=PATH")
    args = parser.parse_args()
    if min(args.dim, args.threads, args.reps, args.rounds) < 1:
        parser.error("--dim, --threads, --reps and --rounds must be positive")
    if args.dim % 16:
        parser.error(f"--dim {args.dim}: the plain loop takes rows of whole registers (16 floats)")
    try:
        sizes = [float(m) for m in args.mib.split(",")]
    except ValueError:
        parser.error(f"--mib {args.mib!r}: expected sizes in MiB, comma-separated")
    if any(not size > 0 for size in sizes):
        parser.error("--mib: sizes must be positive")
    if len(args.libraries) > 7:
        parser.error("at most 7 libraries (alternate.c loads 8, plain included)")
    build_dev = ROOT / "build-dev"
    binary = in_process.driver(build_dev, ROOT)
    names = ["plain"] + [name for name, _ in args.libraries]
    paths = [in_process.plain_library(build_dev, ROOT)] + [path for _, path in args.libraries]
    if args.threads == 1:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print(f"{args.op} {args.dtype} D = {args.dim}, {args.threads} thread(s), "
          f"{args.rounds} rounds of {args.reps} calls a library, {ab.cpu_name()}")
    case = (args.op, args.dtype, args.dim, args.threads)
    for mib in sizes:
        rounds = []
        for first in range(args.rounds):
            rows, times = in_process.measure(binary, paths, case, mib, args.reps,
                                             first % len(paths))
            rounds.append(times)
        print(f"\n{mib:g} MiB a tensor ({rows} rows): ns a row, median (min-max)")
        for name, (median, low, high) in zip(names, row_times(rows, pooled(rounds))):
            print(f"  {name:<24} {median:7.1f} ({low:.1f}-{high:.1f})")


if __name__ == "__main__":
    main()

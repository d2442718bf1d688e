#!/usr/bin/python3
"""Nanoseconds a row of several builds of libaddnorm.so and of the plain loop, called in turn in
one process (dev/alternate.c), in cache and from memory: where ab.py --in-process gives ratios,
this gives each library's own time a row, so that a gap to plain can be split into its parts by
builds that each remove one (docs/performance.md, "What limits each op", Backwards).

    /usr/bin/python3 dev/row_times.py --op layer_norm_bwd --dim 128 --mib 0.25,64 \\
        default=build-dev/default/libaddnorm.so nodgamma=build-dev/kSkipParameterGrads-1/libaddnorm.so

The builds are ab.py's (build-dev/<tunables>/); plain is compiled as ab.py compiles it and
always comes first. One thread, pinned to core 0 unless --threads says otherwise."""
import argparse
import os
import statistics
from pathlib import Path

import ab
import in_process

ROOT = Path(__file__).resolve().parents[1]


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
    parser.add_argument("--op", required=True, help="one of alternate.c's ops")
    parser.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    parser.add_argument("--dim", type=int, required=True)
    parser.add_argument("--mib", default="0.25,64", help="tensor sizes, comma-separated")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("libraries", nargs="+", type=named_library, metavar="NAME=PATH")
    args = parser.parse_args()
    if args.dim < 1 or args.threads < 1 or args.reps < 1:
        parser.error("--dim, --threads and --reps must be positive")
    build_dev = ROOT / "build-dev"
    binary = in_process.driver(build_dev, ROOT)
    names = ["plain"] + [name for name, _ in args.libraries]
    paths = [in_process.plain_library(build_dev, ROOT)] + [path for _, path in args.libraries]
    if args.threads == 1:
        os.sched_setaffinity(0, {0})
    print(f"{args.op} {args.dtype} D = {args.dim}, {args.threads} thread(s), "
          f"{args.reps} calls a library, {ab.cpu_name()}")
    for mib in (float(m) for m in args.mib.split(",")):
        rows, times = in_process.measure(binary, paths, (args.op, args.dtype, args.dim, args.threads),
                                         mib, args.reps)
        print(f"\n{mib:g} MiB a tensor ({rows} rows): ns a row, median (min-max)")
        for name, (median, low, high) in zip(names, row_times(rows, times)):
            print(f"  {name:<24} {median:7.1f} ({low:.1f}-{high:.1f})")


if __name__ == "__main__":
    main()

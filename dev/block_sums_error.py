#!/usr/bin/python3
"""How far the 16-bit streams' float32 block sums put a row's rstd from float64, by lane count and
block length: the experiment behind kFloat32BlockAdditions (src/ops/cpu/norm_numerics.hpp).

The kernels sum a 16-bit row in float32 lanes, shifted by the mean of its first register, two
registers a step (two accumulators per lane for the sum and for the squares), and flush each
block of `block` steps into float64 (BlockSumsRun in src/ops/cpu/shifted_sums-inl.h). This
emulates those sums with NumPy float32 arithmetic, in the kernels' order, on bfloat16 rows drawn
uniform in [-2.45, 2.45] (variance about 2, as the case table's ordinary rows), and prints the
largest and the 99th-percentile error of rstd = 1 / sqrt(var + eps) in float32 ulp of the float64
value. Lanes: 4 (SSE4), 8 (AVX2), 16 (AVX3).

    /usr/bin/python3 dev/block_sums_error.py                 # blocks 64 and 16, seed 3
    /usr/bin/python3 dev/block_sums_error.py --blocks 8,16,32,64 --rows 500
"""

import argparse

import numpy as np

EPS = 1e-5


def to_bfloat16(values):
    """float32 values rounded to bfloat16 (to nearest even), returned as float32."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return rounded.astype(np.uint32).view(np.float32)


def block_variance(row, lanes, block):
    """The row's variance as the float32 block sums give it (before the recentring check)."""
    f32 = np.float32
    estimate = f32(np.sum(row[:lanes], dtype=f32) / f32(lanes))
    centred = (row - estimate).astype(f32)
    total, squares, i = 0.0, 0.0, 0
    while i + 2 * lanes <= len(row):
        sums = [np.zeros(lanes, f32), np.zeros(lanes, f32)]
        sq = [np.zeros(lanes, f32), np.zeros(lanes, f32)]
        for _ in range(block):
            if i + 2 * lanes > len(row):
                break
            for k in range(2):
                c = centred[i + k * lanes:i + (k + 1) * lanes]
                sums[k] = (sums[k] + c).astype(f32)
                # A fused multiply-add: the exact product plus the sum, rounded once.
                sq[k] = (sq[k].astype(np.float64) + c.astype(np.float64) ** 2).astype(f32)
            i += 2 * lanes
        total += float(np.sum((sums[0] + sums[1]).astype(f32), dtype=np.float64))
        squares += float(np.sum((sq[0] + sq[1]).astype(f32), dtype=np.float64))
    for c in centred[i:].astype(np.float64):  # the end of the row, in float64
        total += c
        squares += c * c
    offset = total / len(row)
    return squares / len(row) - offset * offset


def rstd_ulps(row, lanes, block):
    want = 1.0 / np.sqrt(np.var(row.astype(np.float64)) + EPS)
    got = np.float32(1.0 / np.sqrt(block_variance(row, lanes, block) + EPS))
    return abs(float(got) - want) / float(np.spacing(np.float32(want)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", default="64,16", help="block lengths (additions per lane)")
    parser.add_argument("--dims", default="512,1024,4096,8192", help="row lengths")
    parser.add_argument("--lanes", default="4,8,16", help="float32 lanes a register")
    parser.add_argument("--rows", type=int, default=200, help="random rows a shape")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    print("| block | D | lanes | max ulp | p99 ulp |")
    print("|---|---|---|---|---|")
    for block in map(int, args.blocks.split(",")):
        for dim in map(int, args.dims.split(",")):
            for lanes in map(int, args.lanes.split(",")):
                rng = np.random.default_rng(args.seed)
                errors = [
                    rstd_ulps(to_bfloat16(rng.uniform(-2.45, 2.45, dim)), lanes, block)
                    for _ in range(args.rows)
                ]
                print(f"| {block} | {dim} | {lanes} | {max(errors):.2f} | "
                      f"{np.percentile(errors, 99):.2f} |")


if __name__ == "__main__":
    main()

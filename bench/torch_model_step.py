"""Whole-model training step time: a pre-norm nn.TransformerEncoder (GPT-2-like sizes, scaled
down for a CPU) with torch's LayerNorm against the same model patched with addnorm's, in float32
and in bfloat16 (the whole model converted with .to(torch.bfloat16)).

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_model_step.py [--width 256 ...]

A step is forward, mean-squared loss, backward and an SGD update. Prints the median step time of
each and the ratio patched / torch. Both models hold the same parameters and see the same batch.
A script, not a test: timings belong in benchmarks, and the machine may be shared.
"""
import argparse
import copy
import statistics
import time

import torch

import addnorm.torch as an


def build(width, layers, heads):
    layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0,
                                             batch_first=True, norm_first=True)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def step_ms(model, batch, target, steps):
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    times = []
    for _ in range(steps + 2):  # the first two are warm-up
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = (model(batch) - target).float().square().mean()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[2:]) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; width {args.width}, "
          f"{args.layers} layers, batch {args.batch} x {args.length} tokens, median of "
          f"{args.steps} steps")
    for dtype in (torch.float32, torch.bfloat16):
        theirs = build(args.width, args.layers, args.heads).to(dtype).train()
        ours = an.patch(copy.deepcopy(theirs))
        batch = torch.randn(args.batch, args.length, args.width, dtype=dtype)
        target = torch.randn_like(batch)
        torch_ms = step_ms(theirs, batch, target, args.steps)
        addnorm_ms = step_ms(ours, batch, target, args.steps)
        print(f"{str(dtype):<16} torch {torch_ms:8.1f} ms   addnorm {addnorm_ms:8.1f} ms   "
              f"ratio {addnorm_ms / torch_ms:.2f}")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""One training step of the same model in addnorm and in PyTorch 1.13, side by side.

The model: token embedding (x sqrt(d)) + sinusoidal positions, N TransformerEncoderLayers
(batch_first, dropout 0, ReLU, pre-norm or post-norm LayerNorm; a final LayerNorm for
pre-norm), a linear head, cross-entropy, Adam. PyTorch runs its own nn.TransformerEncoder, as a
user would. Runs alternate (addnorm, torch, addnorm, ...) so that drift on a shared machine
hits both; the medians and their ratio are printed, and with --json as one JSON object.

usage: nn_train_step_bench.py [--build DIR] [--rounds 3] [--steps 10] [--threads N]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import time
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]


def torch_step_times(cfg, steps, warmup):
    torch.manual_seed(0)
    d, vocab = cfg["d_model"], cfg["vocab"]
    pre = cfg["placement"] == "pre_norm"
    layer = torch.nn.TransformerEncoderLayer(d, cfg["n_heads"], cfg["d_ff"], dropout=0.0,
                                             batch_first=True, norm_first=pre)
    encoder = torch.nn.TransformerEncoder(layer, cfg["depth"],
                                          norm=torch.nn.LayerNorm(d) if pre else None,
                                          enable_nested_tensor=False)
    embedding = torch.nn.Embedding(vocab, d)
    head = torch.nn.Linear(d, vocab)
    position = torch.arange(cfg["seq"], dtype=torch.float64)[:, None]
    index = torch.arange(d)
    angle = position / 10000.0 ** ((index - index % 2).double() / d)
    pe = torch.where(index % 2 == 0, torch.sin(angle), torch.cos(angle)).float()
    params = [*encoder.parameters(), *embedding.parameters(), *head.parameters()]
    optimizer = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    count = cfg["batch"] * cfg["seq"]
    tokens = torch.tensor([(i * 7) % vocab for i in range(count)]).reshape(cfg["batch"], -1)
    targets = torch.tensor([(i * 3 + 1) % vocab for i in range(count)])
    times = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        x = embedding(tokens) * math.sqrt(d) + pe
        logits = head(encoder(x))
        loss = torch.nn.functional.cross_entropy(logits.reshape(count, vocab), targets)
        loss.backward()
        optimizer.step()
        if step >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def addnorm_step_time(tool, cfg, steps, warmup):
    args = [f"{k}={v}" for k, v in cfg.items()] + [f"steps={steps}", f"warmup={warmup}"]
    result = subprocess.run([str(tool), *args], check=True, capture_output=True, text=True)
    return json.loads(result.stdout)["median_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.environ.get("ADDNORM_BUILD_DIR", REPO_ROOT / "build"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--placement", default="pre_norm", choices=["pre_norm", "post_norm"])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    tool = Path(options.build) / "src" / "nn" / "nn_train_step_bench"
    torch.set_num_threads(options.threads)
    cfg = dict(depth=6, d_model=256, n_heads=8, d_ff=1024, batch=options.batch, seq=options.seq,
               vocab=64, placement=options.placement)
    ours, theirs = [], []
    for _ in range(options.rounds):
        ours.append(addnorm_step_time(tool, cfg, options.steps, options.warmup))
        theirs.append(torch_step_times(cfg, options.steps, options.warmup))
    report = dict(config=cfg, threads=options.threads, torch=torch.__version__,
                  addnorm_ms=statistics.median(ours), torch_ms=statistics.median(theirs))
    report["speedup"] = report["torch_ms"] / report["addnorm_ms"]
    if options.json:
        print(json.dumps(report))
    else:
        print(f"{cfg}, {options.threads} threads, torch {torch.__version__}")
        print(f"addnorm {report['addnorm_ms']:.1f} ms/step, torch {report['torch_ms']:.1f} "
              f"ms/step: addnorm is {report['speedup']:.2f}x torch's speed")


if __name__ == "__main__":
    main()

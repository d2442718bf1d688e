"""Train a small transformer built with addnorm's modules under torch.distributed DDP (gloo).

    python3 examples/ddp_train.py                      # 2 processes on 127.0.0.1 (spawned)
    python3 examples/ddp_train.py --world-size 1       # one process, the same global batch
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 python3 examples/ddp_train.py
                                                       # one rank of a multi-machine run

The model is a decoder-only transformer whose every Add & Norm is addnorm.torch.AddNorm (post-
norm by default, with dropout) and whose final norm is addnorm.torch.LayerNorm. It learns to
continue arithmetic sequences (t, t + k, t + 2k, ... mod vocab).

Data parallelism changes nothing about the mathematics: each step's global batch is split by
rows across the ranks, DDP averages the gradients (each rank's mean loss over an equal share),
and every rank's AddNorm sets dropout_offset to where its rows start in the global batch, so
addnorm's counter-based dropout drops exactly the elements one process would drop on the whole
batch. The losses and parameters of a 2-process run therefore equal a 1-process run's up to
float rounding (tests/python/test_python_ddp.py checks it).

--out FILE saves {"losses": [...], "state_dict": {...}} from rank 0 (torch.save).
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

import addnorm.torch as an


class Block(torch.nn.Module):
    """Attention and feed-forward sub-layers, each followed (post-norm) or preceded (pre-norm)
    by addnorm's fused Add & Norm."""

    def __init__(self, width, heads, dropout, placement, norm):
        super().__init__()
        self.placement = placement
        self.attention = torch.nn.MultiheadAttention(width, heads, batch_first=True)
        self.feed_forward = torch.nn.Sequential(torch.nn.Linear(width, 4 * width),
                                                torch.nn.GELU(),
                                                torch.nn.Linear(4 * width, width))
        self.add_norm_1 = an.AddNorm(width, placement, norm, dropout)
        self.add_norm_2 = an.AddNorm(width, placement, norm, dropout)

    def forward(self, h, y, mask):
        """post: h is the stream and y is unused; pre: y = Norm(h) is the sub-layers' input."""
        if self.placement == "post":
            h = self.add_norm_1(h, self.attention(h, h, h, attn_mask=mask, need_weights=False)[0])
            return self.add_norm_2(h, self.feed_forward(h)), None
        h, y = self.add_norm_1(h, self.attention(y, y, y, attn_mask=mask, need_weights=False)[0])
        return self.add_norm_2(h, self.feed_forward(y))


class TinyTransformer(torch.nn.Module):
    def __init__(self, vocab=16, width=32, heads=4, layers=2, length=12, dropout=0.1,
                 placement="post", norm="layer_norm"):
        super().__init__()
        self.placement = placement
        self.embed = torch.nn.Embedding(vocab, width)
        self.position = torch.nn.Parameter(0.02 * torch.randn(length, width))
        self.first_norm = an.LayerNorm(width) if placement == "pre" else None
        self.blocks = torch.nn.ModuleList(
            Block(width, heads, dropout, placement, norm) for _ in range(layers))
        # Post-norm's stream is already normalised; pre-norm's last AddNorm normalises it.
        self.head = torch.nn.Linear(width, vocab)
        self.register_buffer("mask", torch.triu(torch.full((length, length), float("-inf")), 1))

    def forward(self, tokens):
        h = self.embed(tokens) + self.position[:tokens.shape[1]]
        y = self.first_norm(h) if self.first_norm is not None else None
        mask = self.mask[:tokens.shape[1], :tokens.shape[1]]
        for block in self.blocks:
            h, y = block(h, y, mask)
        return self.head(h if self.placement == "post" else y)


def global_batch(step, batch, length, vocab, seed):
    """Step's global batch of arithmetic sequences, the same for every rank and world size."""
    generator = torch.Generator().manual_seed(seed * 100003 + step)
    start = torch.randint(0, vocab, (batch, 1), generator=generator)
    stride = torch.randint(1, 4, (batch, 1), generator=generator)
    return (start + stride * torch.arange(length + 1)) % vocab


def train(rank, world_size, args):
    """Runs the training loop as one rank; returns (losses, state_dict) of the plain model."""
    torch.manual_seed(args.seed)  # same initial parameters and dropout seeds on every rank
    model = TinyTransformer(args.vocab, args.width, args.heads, args.layers, args.length,
                            args.dropout, args.placement, args.norm)
    local_batch = args.batch // world_size
    for module in model.modules():
        if isinstance(module, an.AddNorm):
            # Rows [rank * local_batch, ...) of the global batch: start there in the stream.
            module.dropout_offset = rank * local_batch * args.length * args.width
    trained = DistributedDataParallel(model) if world_size > 1 else model
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    losses = []
    for step in range(args.steps):
        tokens = global_batch(step, args.batch, args.length, args.vocab, args.seed)
        tokens = tokens[rank * local_batch:(rank + 1) * local_batch]
        logits = trained(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, args.vocab),
                                                 tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients over the ranks here
        optimizer.step()
        reported = loss.detach().clone()
        if world_size > 1:
            dist.all_reduce(reported)
            reported /= world_size
        losses.append(float(reported))
        if rank == 0 and args.verbose:
            print(f"step {step:3d}  loss {losses[-1]:.6f}", flush=True)
    return losses, {name: value.detach().clone() for name, value in model.state_dict().items()}


def run_rank(rank, world_size, args):
    """One process of a distributed run: join the process group, train, save from rank 0."""
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        losses, state = train(rank, world_size, args)
        if rank == 0 and args.out:
            torch.save({"losses": losses, "state_dict": state}, args.out)
    finally:
        dist.destroy_process_group()


def spawned_rank(rank, world_size, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    run_rank(rank, world_size, args)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=2,
                        help="processes to spawn on 127.0.0.1 (1: no torch.distributed at "
                             "all); ignored when RANK and WORLD_SIZE are set")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8, help="global batch (sequences)")
    parser.add_argument("--length", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=16)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--placement", choices=("post", "pre"), default="post")
    parser.add_argument("--norm", choices=("layer_norm", "rms_norm"), default="layer_norm")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--out", help="save losses and final parameters here (rank 0)")
    parser.add_argument("--quiet", dest="verbose", action="store_false")
    return parser.parse_args()


def main():
    args = parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        # Launched per process (by hand or by torchrun), possibly across machines:
        # MASTER_ADDR and MASTER_PORT name rank 0's machine.
        world_size = int(os.environ["WORLD_SIZE"])
        if args.batch % world_size:
            raise SystemExit(f"--batch {args.batch} is not divisible by WORLD_SIZE {world_size}")
        run_rank(int(os.environ["RANK"]), world_size, args)
    elif args.world_size == 1:
        torch.set_num_threads(args.threads)
        losses, state = train(0, 1, args)
        if args.out:
            torch.save({"losses": losses, "state_dict": state}, args.out)
    else:
        if args.batch % args.world_size:
            raise SystemExit(f"--batch {args.batch} is not divisible by --world-size "
                             f"{args.world_size}")
        mp.spawn(spawned_rank, args=(args.world_size, args, free_port()),
                 nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()

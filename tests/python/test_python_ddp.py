"""examples/ddp_train.py: 2-process DistributedDataParallel (gloo, 127.0.0.1) equals one process
on the same global batch. The model uses addnorm's AddNorm (with dropout 0.1: each rank's
dropout offset makes its masks those of the one-process run) and LayerNorm, so the losses and
final parameters agree up to float32 rounding of the gradient averaging."""
import os
import subprocess
import sys
from pathlib import Path

import torch

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"
STEPS = 6


def run(tmp_path, world_size, placement):
    out = tmp_path / f"world{world_size}_{placement}.pt"
    environment = dict(os.environ, OMP_NUM_THREADS="1")
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        environment.pop(name, None)
    subprocess.run([sys.executable, str(EXAMPLE), "--world-size", str(world_size), "--steps",
                    str(STEPS), "--placement", placement, "--out", str(out), "--quiet"],
                   check=True, env=environment, timeout=120)
    return torch.load(out)


def test_two_process_ddp_equals_one_process(tmp_path):
    # Post-norm (the default): AddNorm with dropout after both sub-layers. Pre-norm runs the same
    # code paths in the example and is left out to keep the test at a few seconds.
    distributed = run(tmp_path, 2, "post")
    single = run(tmp_path, 1, "post")
    assert len(distributed["losses"]) == len(single["losses"]) == STEPS
    torch.testing.assert_close(torch.tensor(distributed["losses"]),
                               torch.tensor(single["losses"]), rtol=1e-5, atol=1e-6)
    assert single["losses"][-1] < single["losses"][0]  # it trains
    assert distributed["state_dict"].keys() == single["state_dict"].keys()
    for name, value in single["state_dict"].items():
        torch.testing.assert_close(distributed["state_dict"][name], value, rtol=1e-4, atol=1e-5,
                                   msg=name)

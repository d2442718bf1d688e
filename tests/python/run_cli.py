"""Helpers for driving `addnorm run OP` from the Python tests.

Inputs are saved as .npy files in a scratch directory, the command runs, and the .npy files it
wrote are loaded back with NumPy, as the run's manifest (addnorm-run.json) lists them.
"""
import itertools
import json
import subprocess
from pathlib import Path

import numpy as np

_run_counter = itertools.count()
# What a complete run leaves beside its outputs (src/cli/run_io.hpp, kRunManifest).
MANIFEST = "addnorm-run.json"


def run_addnorm(addnorm_bin, workdir, op, inputs=None, options=(), out_dir=None):
    """Runs `addnorm run OP --name file.npy ... OPTIONS --out DIR`.

    `inputs` maps option names (without --) to arrays, saved with np.save, or to paths of files
    that already exist. DIR is a fresh directory under `workdir` unless `out_dir` is given.
    Returns (completed process, output directory).
    """
    assert Path(addnorm_bin).exists(), f"{addnorm_bin} is missing: build it or set ADDNORM_BIN"
    call = next(_run_counter)
    in_dir = Path(workdir) / f"in{call}"
    in_dir.mkdir(parents=True)
    out_dir = Path(workdir) / f"out{call}" if out_dir is None else Path(out_dir)
    args = [str(addnorm_bin), "run", op]
    for name, value in (inputs or {}).items():
        if isinstance(value, (str, Path)):
            path = Path(value)
        else:
            path = in_dir / f"{name}.npy"
            np.save(path, value)
        args += [f"--{name}", str(path)]
    args += [str(option) for option in options]
    args += ["--out", str(out_dir)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return result, out_dir


def run_ok(addnorm_bin, workdir, op, inputs=None, options=()):
    """Runs the op, expects success, and returns {output name: array} for every file written.
    The folder holds exactly the files the run's manifest lists, as it describes them."""
    result, out_dir = run_addnorm(addnorm_bin, workdir, op, inputs, options)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    manifest = json.loads((out_dir / MANIFEST).read_text())
    listed = [entry["file"] for entry in manifest["outputs"]]
    assert sorted(path.name for path in out_dir.iterdir()) == sorted(listed + [MANIFEST])
    outputs = {}
    for entry in manifest["outputs"]:
        path = out_dir / entry["file"]
        array = np.load(path)
        assert [list(array.shape), str(array.dtype)] == [entry["shape"], entry["dtype"]], entry
        assert path.stat().st_size == entry["bytes"], entry
        outputs[path.stem] = array
    # The summary names each file it wrote, with its shape and dtype.
    for name, array in outputs.items():
        assert f"{name}.npy" in result.stdout
        assert str(list(array.shape)) in result.stdout
        assert str(array.dtype) in result.stdout
    return outputs


def run_fails(addnorm_bin, workdir, op, inputs=None, options=(), out_dir=None):
    """Runs the op, expects a failure that wrote nothing, and returns the error message."""
    result, out_dir = run_addnorm(addnorm_bin, workdir, op, inputs, options, out_dir)
    assert result.returncode != 0, result.stdout
    if out_dir.is_dir():
        assert not any(out_dir.iterdir()), list(out_dir.iterdir())
    assert result.stdout == ""
    message = result.stderr.strip()
    assert message, "the failure printed no message"
    assert "Traceback" not in message and "terminate called" not in message
    return message

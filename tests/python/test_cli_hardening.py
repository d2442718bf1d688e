"""`addnorm run` refuses values it cannot hold exactly, and writes its outputs all or nothing.

Reproductions from the hardening review: numbers that CLI11 used to wrap or round silently,
and outputs left half-written by a full disk, a directory
in the way or a killed run.
"""
import json
import os
import re
import resource
import signal
import subprocess

import numpy as np
import pytest

from run_cli import MANIFEST, run_addnorm


def run_dropout(addnorm_bin, tmp_path, *options):
    x = np.ones((2, 8), np.float32)
    return run_addnorm(addnorm_bin, tmp_path, "dropout", {"x": x}, options)[0]


@pytest.mark.parametrize("option, value, message", [
    ("--seed", "-1", "--seed: is -1, expected a whole number"),
    ("--seed", "18446744073709551616", "larger than the largest allowed"),
    ("--seed", "1e3", "--seed: is 1e3, expected a whole number"),
    ("--offset", "-1", "--offset: is -1, expected a whole number"),
    ("--p", "0.99999999999", "--p: is 0.99999999999, which rounds to 1 in float32"),
    ("--p", "nan", "--p: is nan, expected a finite decimal number"),
    ("--p", "1e-50", "--p: is 1e-50, too small for float32"),
])
def test_numbers_that_would_change_are_refused(addnorm_bin, tmp_path, option, value, message):
    result = run_dropout(addnorm_bin, tmp_path, "--p", "0.5", option, value)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_largest_seed_is_accepted_exactly(addnorm_bin, tmp_path):
    top = run_dropout(addnorm_bin, tmp_path, "--p", "0.5", "--seed", "18446744073709551615")
    below = run_dropout(addnorm_bin, tmp_path, "--p", "0.5", "--seed", "18446744073709551614")
    assert top.returncode == 0 and below.returncode == 0, top.stderr + below.stderr


def test_eps_beyond_float32_is_refused(addnorm_bin, tmp_path):
    x = np.ones((2, 4), np.float32)
    result, _ = run_addnorm(addnorm_bin, tmp_path, "layer_norm", {"x": x},
                            ["--normalized_shape", "4", "--eps", "1e50"])
    assert result.returncode != 0
    assert "--eps: is 1e50, beyond float32's range" in result.stderr


def test_eps_just_beyond_float32_states_a_limit_below_it(addnorm_bin, tmp_path):
    # 3.4028235e38 (float32's largest value, as NumPy prints it) is just above the exact largest
    # value; the message's limit must read as smaller than the typed value, and the largest value
    # written out exactly is accepted.
    x = np.ones((2, 4), np.float32)
    typed = "3.4028235e38"
    result, _ = run_addnorm(addnorm_bin, tmp_path, "layer_norm", {"x": x},
                            ["--normalized_shape", "4", "--eps", typed])
    assert result.returncode != 0
    limit = re.search(r"beyond float32's range \(at most ([0-9.e+]+) in magnitude\)",
                      result.stderr)
    assert limit, result.stderr
    assert float(limit.group(1)) == float(np.finfo(np.float32).max) < float(typed)
    result, _ = run_addnorm(addnorm_bin, tmp_path / "largest", "layer_norm", {"x": x},
                            ["--normalized_shape", "4", "--eps", limit.group(1)])
    assert result.returncode == 0, result.stderr


def test_float64_values_too_small_for_float32_are_normalised_in_float64(addnorm_bin, tmp_path):
    # float32 would flush them to 0 (a row of zeros); float64 holds them, and with eps = 0 the
    # row normalises as any other: the same y as the first row's.
    x = np.array([[1.0, 2.0, 3.0], [1e-50, 2e-50, 3e-50]])
    result, out = run_addnorm(addnorm_bin, tmp_path, "layer_norm", {"x": x},
                              ["--normalized_shape", "3", "--eps", "0"])
    assert result.returncode == 0, result.stderr
    y = np.load(out / "y.npy")
    assert y.dtype == np.float64
    np.testing.assert_allclose(y[1], y[0], rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(y[0], [-np.sqrt(1.5), 0.0, np.sqrt(1.5)], rtol=1e-14, atol=1e-15)


def test_eps_and_momentum_below_float32_are_refused_in_a_float32_run(addnorm_bin, tmp_path):
    x = np.ones((2, 4), np.float32)
    result, _ = run_addnorm(addnorm_bin, tmp_path, "layer_norm", {"x": x},
                            ["--normalized_shape", "4", "--eps", "1e-50"])
    assert result.returncode == 1
    assert "--eps: is 1e-50, too small for float32 (it would become 0)" in result.stderr
    result, _ = run_addnorm(addnorm_bin, tmp_path, "batch_norm", {"x": x},
                            ["--momentum", "1e-50"])
    assert result.returncode == 1
    assert "--momentum: is 1e-50, too small for float32" in result.stderr


def test_float64_runs_take_eps_and_momentum_as_typed(addnorm_bin, tmp_path):
    # float32 would round both to 0; a float64 run uses them, as NumPy does in float64.
    x = np.array([[0.0, 1e-25, 2e-25], [5.0, 5.0 + 1e-25, 5.0 - 1e-25]])
    result, out = run_addnorm(addnorm_bin, tmp_path, "layer_norm", {"x": x},
                              ["--normalized_shape", "3", "--eps", "1e-50"])
    assert result.returncode == 0, result.stderr
    centred = x[0] - x[0].mean()
    expected = centred / np.sqrt((centred ** 2).mean() + 1e-50)
    np.testing.assert_allclose(np.load(out / "y.npy")[0], expected, rtol=1e-14, atol=0)
    assert abs(expected[2]) < 1.0  # eps moved it: without eps it would be sqrt(1.5)

    batch = np.arange(12.0).reshape(4, 3)
    running = np.zeros(3)
    result, out = run_addnorm(addnorm_bin, tmp_path, "batch_norm",
                              {"x": batch, "running_mean": running, "running_var": running + 1},
                              ["--momentum", "1e-50"])
    assert result.returncode == 0, result.stderr
    np.testing.assert_allclose(np.load(out / "running_mean.npy"), 1e-50 * batch.mean(axis=0),
                               rtol=1e-15, atol=0)


def test_each_input_file_is_read_once(addnorm_bin, tmp_path):
    # x and the weight are float32 and the residual, given between them, float64: the run is in
    # float64, and no file is opened twice to find that out.
    rng = np.random.default_rng(3)
    inputs = {"x": rng.standard_normal((4, 8)).astype(np.float32),
              "residual": rng.standard_normal((4, 8)),
              "weight": rng.standard_normal(8).astype(np.float32)}
    paths = {}
    for name, array in inputs.items():
        paths[name] = tmp_path / f"input_{name}.npy"
        np.save(paths[name], array)
    log = tmp_path / "opens.log"
    traced = subprocess.run(
        ["strace", "-f", "-o", str(log), "-e", "trace=open,openat,openat2", str(addnorm_bin),
         "run", "add_norm_pre", "--x", str(paths["x"]), "--residual", str(paths["residual"]),
         "--weight", str(paths["weight"]), "--normalized_shape", "8", "--out",
         str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert traced.returncode == 0, traced.stderr
    opens = log.read_text()
    for name, path in paths.items():
        assert opens.count(f'"{path}"') == 1, (name, opens)
    h = np.load(tmp_path / "out" / "h.npy")
    assert h.dtype == np.float64
    np.testing.assert_array_equal(h, inputs["x"].astype(np.float64) + inputs["residual"])


def old_outputs(out):
    """An --out folder holding a previous run's files; returns their bytes by name."""
    out.mkdir()
    before = {}
    for name in ("y", "mean", "rstd"):
        np.save(out / f"{name}.npy", np.full(3, 7.0, np.float32))
        before[name] = (out / f"{name}.npy").read_bytes()
    return before


def assert_unchanged(out, before):
    """The previous run's files are exactly as they were, and no staging folder is left."""
    files = sorted(p.name for p in out.iterdir() if p.is_file())
    assert files == sorted(f"{name}.npy" for name in before)
    for name, data in before.items():
        assert (out / f"{name}.npy").read_bytes() == data, name
    assert not [p for p in out.iterdir() if p.name.startswith(".addnorm-run-")]


def test_a_full_disk_changes_nothing(addnorm_bin, tmp_path):
    # A file-size limit stands in for a full disk: writing y (4 MiB) fails with EFBIG.
    out = tmp_path / "out"
    before = old_outputs(out)
    x = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    result = subprocess.run([str(addnorm_bin), "run", "layer_norm", "--x", str(tmp_path / "x.npy"),
                             "--normalized_shape", "1024", "--out", str(out)],
                            capture_output=True, text=True, timeout=60, preexec_fn=limit_file_size)
    assert result.returncode != 0
    assert "nothing was written" in result.stderr, result.stderr
    assert_unchanged(out, before)


def test_a_directory_in_the_way_changes_nothing(addnorm_bin, tmp_path):
    out = tmp_path / "out"
    before = old_outputs(out)
    (out / "mean.npy").unlink()
    del before["mean"]
    (out / "mean.npy").mkdir()  # the second output's name is taken by a directory
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    result, _ = run_addnorm(addnorm_bin, tmp_path, "layer_norm", {"x": x},
                            ["--normalized_shape", "8"], out_dir=out)
    assert result.returncode != 0
    assert "mean.npy exists and is not a regular file" in result.stderr, result.stderr
    assert_unchanged(out, before)


def test_staging_left_by_a_killed_run_is_removed(addnorm_bin, tmp_path):
    finished = subprocess.Popen(["true"])
    finished.wait()
    out = tmp_path / "out"
    out.mkdir()
    stale = out / f".addnorm-run-{finished.pid}-abcdef"
    stale.mkdir()
    (stale / "y.npy").write_bytes(b"half")
    mine = out / f".addnorm-run-{os.getpid()}-abcdef"  # a live process's: left alone
    mine.mkdir()
    x = np.ones((2, 4), np.float32)
    result, _ = run_addnorm(addnorm_bin, tmp_path, "layer_norm", {"x": x},
                            ["--normalized_shape", "4"], out_dir=out)
    assert result.returncode == 0, result.stderr
    assert not stale.exists()
    assert mine.exists()
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == \
        [MANIFEST, "mean.npy", "rstd.npy", "y.npy"]


def test_a_run_killed_between_renames_leaves_no_manifest(addnorm_bin, tmp_path):
    # The outputs move into place one rename each; strace kills the process at the rename that
    # would move mean.npy into --out (after y.npy's). The folder then mixes two runs, and the
    # missing manifest says so: a run removes the old manifest before its first move and moves
    # its own in last.
    out = tmp_path / "out"
    x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
    np.save(tmp_path / "x2.npy", x * 3 + 1)
    command = [str(addnorm_bin), "run", "layer_norm", "--x", str(tmp_path / "x2.npy"),
               "--normalized_shape", "8", "--out", str(out)]
    renames = "rename,renameat,renameat2"
    # Which rename that is (the staging writes rename too), from a traced run into a scratch folder.
    log = tmp_path / "renames.log"
    traced = subprocess.run(["strace", "-f", "-o", str(log), "-e", f"trace={renames}",
                             *command[:-1], str(tmp_path / "scratch")],
                            capture_output=True, text=True, timeout=60)
    assert traced.returncode == 0, traced.stderr
    calls = [line for line in log.read_text().splitlines() if "rename" in line]
    moves = [i + 1 for i, line in enumerate(calls) if "/scratch/mean.npy" in line]
    assert len(moves) == 1, calls
    first, _ = run_addnorm(addnorm_bin, tmp_path, "layer_norm", {"x": x},
                           ["--normalized_shape", "8"], out_dir=out)
    assert first.returncode == 0 and (out / MANIFEST).is_file(), first.stderr
    before = {name: (out / name).read_bytes() for name in ("y.npy", "mean.npy", "rstd.npy")}
    killed = subprocess.run(["strace", "-f", "-o", "/dev/null", "-e", f"trace={renames}",
                             "-e", f"inject={renames}:signal=SIGKILL:when={moves[0]}", *command],
                            capture_output=True, text=True, timeout=60)
    assert killed.returncode != 0, killed.stderr
    assert not (out / MANIFEST).exists()
    assert (out / "y.npy").read_bytes() != before["y.npy"]  # the new run's
    assert (out / "mean.npy").read_bytes() == before["mean.npy"]  # the old run's
    # The next complete run leaves a manifest again, and clears the killed run's staging folder.
    again, _ = run_addnorm(addnorm_bin, tmp_path, "layer_norm", {"x": x},
                           ["--normalized_shape", "8"], out_dir=out)
    assert again.returncode == 0, again.stderr
    listed = json.loads((out / MANIFEST).read_text())["outputs"]
    assert [entry["file"] for entry in listed] == ["y.npy", "mean.npy", "rstd.npy"]
    assert not [p for p in out.iterdir() if p.name.startswith(".addnorm-run-")]


@pytest.mark.parametrize("experiment", ["gradient-flow", "activation-growth", "batch-vs-layer",
                                        "init-gradients", "update-size", "depth-training"])
def test_lab_seeds_are_taken_exactly(addnorm_bin, experiment):
    result = subprocess.run([str(addnorm_bin), "lab-run", experiment, "--seed", "-1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "--seed: is -1, expected a whole number" in result.stderr, result.stderr


def test_outputs_are_bounded_by_the_inputs(addnorm_bin, tmp_path):
    """An .npy of a few bytes whose shape has a 0 (no elements) but a huge batch must not make
    GroupNorm allocate statistics for every empty group: no output outgrows the largest input.
    Run under a 1 GiB address-space limit, so that an allocation of the 2^33 x 7 statistics
    would fail loudly rather than pass by overcommit."""
    path = tmp_path / "hostile.npy"
    np.save(path, np.empty((2**33, 0, 4), np.float32))
    assert path.stat().st_size < 200

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    result = subprocess.run([str(addnorm_bin), "run", "group_norm", "--x", str(path),
                             "--num_groups", "7", "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=60, preexec_fn=limit_memory)
    assert result.returncode == 1, result
    assert "mean would have shape [8589934592, 7]" in result.stderr
    assert "expected at most 1" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_run_removes_the_earlier_runs_outputs_it_does_not_replace(addnorm_bin, tmp_path):
    """A folder holds one run's outputs: layer_norm after add_norm_pre leaves y, mean, rstd
    and no h; files that were never listed by a run (the user's) stay."""
    out = tmp_path / "out"
    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    first, _ = run_addnorm(addnorm_bin, tmp_path, "add_norm_pre", {"x": x, "r": x},
                           ["--normalized_shape", "8"], out_dir=out)
    assert first.returncode == 0, first.stderr
    first_files = {entry["file"] for entry in json.loads((out / MANIFEST).read_text())["outputs"]}
    assert "h.npy" in first_files
    (out / "notes.txt").write_text("mine")
    (out / "kept.npy").write_bytes(b"mine too")
    second, _ = run_addnorm(addnorm_bin, tmp_path, "dropout", {"x": x}, ["--p", "0.5"],
                            out_dir=out)
    assert second.returncode == 0, second.stderr
    listed = [entry["file"] for entry in json.loads((out / MANIFEST).read_text())["outputs"]]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        listed + [MANIFEST, "notes.txt", "kept.npy"])
    assert not set(listed) & (first_files - {"y.npy"})


def test_a_hostile_manifest_removes_nothing_outside_the_runs_own_npy_files(addnorm_bin,
                                                                          tmp_path):
    """The manifest is a file anyone can edit: names with a directory part, hidden names,
    non-.npy names and directories listed in it are left alone; a malformed one lists nothing."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "victim.npy").write_bytes(b"outside")
    (out / "sub").mkdir()
    (out / "sub" / "inner.npy").write_bytes(b"inner")
    (out / ".hidden.npy").write_bytes(b"hidden")
    (out / "notes.txt").write_text("mine")
    (out / "folder.npy").mkdir()
    (out / "old.npy").write_bytes(b"an earlier output")
    (out / "config").write_text("mine too")
    # A NUL ends the name the system calls see: "notes.txt\0.npy" must not reach notes.txt.
    names = ["../victim.npy", str(tmp_path / "victim.npy"), "sub/inner.npy", ".hidden.npy",
             "notes.txt", "notes.txt\u0000.npy", "config\u0000x.npy", "a.b.npy", "folder.npy",
             "old.npy", 7, None]
    (out / MANIFEST).write_text(json.dumps({"outputs": [{"file": n} for n in names]}))
    x = np.ones((2, 4), np.float32)
    result, _ = run_addnorm(addnorm_bin, tmp_path, "dropout", {"x": x}, ["--p", "0.5"],
                            out_dir=out)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "victim.npy").read_bytes() == b"outside"
    assert (out / "sub" / "inner.npy").exists() and (out / ".hidden.npy").exists()
    assert (out / "notes.txt").exists() and (out / "folder.npy").is_dir()
    assert (out / "config").exists()
    assert not (out / "old.npy").exists()  # a plain .npy the earlier manifest listed
    for malformed in ("not json", "[1, 2]", '{"outputs": {"file": "y.npy"}}'):
        (out / "again.npy").write_bytes(b"x")
        (out / MANIFEST).write_text(malformed)
        result, _ = run_addnorm(addnorm_bin, tmp_path, "dropout", {"x": x}, ["--p", "0.5"],
                                out_dir=out)
        assert result.returncode == 0, result.stderr
        assert (out / "again.npy").exists()


def test_a_run_keeps_an_earlier_output_it_reads(addnorm_bin, tmp_path):
    """Runs chained in one folder: a run whose input is an earlier run's output there does not
    remove it, though its own outputs do not include it."""
    out = tmp_path / "out"
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    first, _ = run_addnorm(addnorm_bin, tmp_path, "add_norm_pre", {"x": x, "r": x},
                           ["--normalized_shape", "4"], out_dir=out)
    assert first.returncode == 0, first.stderr
    h = np.load(out / "h.npy")
    second, _ = run_addnorm(addnorm_bin, tmp_path, "layer_norm", {"x": out / "h.npy"},
                            ["--normalized_shape", "4"], out_dir=out)
    assert second.returncode == 0, second.stderr
    assert np.array_equal(np.load(out / "h.npy"), h)
    listed = {entry["file"] for entry in json.loads((out / MANIFEST).read_text())["outputs"]}
    assert "h.npy" not in listed and "y.npy" in listed


def test_a_manifest_that_is_a_link_a_fifo_or_too_large_lists_nothing(addnorm_bin, tmp_path):
    """A manifest that is a link is refused before anything is written (and read, should one
    be swapped in later, without following it or waiting on a FIFO); one over 1 MiB lists
    nothing. No run hangs, and none removes the file the bad manifest names."""
    out = tmp_path / "out"
    out.mkdir()
    listing = json.dumps({"outputs": [{"file": "old.npy"}]})
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(listing)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    x = np.ones((2, 4), np.float32)
    for make in (lambda m: m.symlink_to(elsewhere), lambda m: m.symlink_to(fifo),
                 lambda m: m.write_text(listing[:-1] + " " * (1 << 20) + "}")):
        (out / "old.npy").write_bytes(b"an earlier output")
        manifest = out / MANIFEST
        if manifest.exists() or manifest.is_symlink():
            manifest.unlink()
        make(manifest)
        result, _ = run_addnorm(addnorm_bin, tmp_path, "dropout", {"x": x}, ["--p", "0.5"],
                                out_dir=out)
        assert result.returncode == 0 or "is not a regular file" in result.stderr, result.stderr
        assert (out / "old.npy").exists()

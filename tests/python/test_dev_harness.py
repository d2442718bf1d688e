"""dev/'s scripts: the kernels' tunables as cmake/tuning.cmake reads and checks them (through ab.py), and its
summary (ratios round by round, shares of plain), on records written here in addnorm-bench's
shape; block_sums_error.py's emulation against float64 sums; ab.py --in-process's grid, its
medians and its driver (dev/alternate.c, compiled here and run on tiny tensors with two copies of
the build's libaddnorm.so: that it calls every op, not how fast). No benchmark runs."""
import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "dev"))
import ab  # noqa: E402  (dev/ is not a package)
import block_sums_error  # noqa: E402
import in_process  # noqa: E402
import row_times  # noqa: E402


def test_tunables_are_read_from_the_kernels_with_their_defaults():
    found = ab.tunables()
    assert found["kShortRowMaxDim"] == ("1024", "src/ops/cpu/norm_forward-inl.h")
    assert found["kMomentsAheadMaxDim"][0] == "128"
    assert found["kInterleaveShortRows"][0] == "1"
    assert found["kBatchNormStreams"] == ("4", "src/ops/cpu/batch_norm_kernels.cpp")
    assert found["kStreamingStoreBytes"] == ("int64_t{8} << 20", "src/ops/cpu/kernels.hpp")
    # Every definition is found, none twice, and tuning.hpp's own description is not one.
    code = [line for path in (REPO_ROOT / "src/ops/cpu").iterdir()
            for line in path.read_text().splitlines() if not line.lstrip().startswith("//")]
    definitions = [name for line in code for name in re.findall(r'tuned\("(k\w+)"', line)]
    assert sorted(definitions) == sorted(found)
    assert "kName" not in found


@pytest.mark.parametrize("tuning", ["kShortRowMaxDim=512", "kMaxGroup=4,kGroupBytes=8192", ""])
def test_a_well_formed_tunables_string_is_accepted(tuning):
    ab.check_tuning(tuning)


@pytest.mark.parametrize("tuning, message", [
    ("kNoSuchThing=3", "has no tunable kNoSuchThing"),
    ("kShortRowMaxDim=-1", "is not kName=value"),
    ("kShortRowMaxDim=1e3", "is not kName=value"),
    ("kShortRowMaxDim", "is not kName=value"),
    ("kShortRowMaxDim=512,", "has an empty item"),
    ("ShortRowMaxDim=512", "is not kName=value"),
    ("kMaxGroup=4;kGroupBytes=8192", "has a ';'"),
])
def test_a_bad_tunables_string_is_refused_by_name(tuning, message):
    with pytest.raises(ValueError, match=message):
        ab.check_tuning(tuning)


def test_a_bad_tunables_string_fails_before_any_build():
    result = subprocess.run([sys.executable, str(REPO_ROOT / "dev/ab.py"), "kNoSuchThing=1"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "has no tunable kNoSuchThing" in result.stderr
    assert not (REPO_ROOT / "build-dev" / "kNoSuchThing-1").exists()


def run(records):
    return {"meta": {"cpu": "test CPU"}, "records": records}


def rec(impl, gbps, *, dim=128, threads=1, time_over_plain=None, in_cache=False):
    """A record; time_over_plain: its median time over plain's in the same run (`ratios`)."""
    return {"impl": impl, "op": "layer_norm_fwd", "dtype": "f32", "rows": 1024, "dim": dim,
            "threads": threads, "in_cache": in_cache, "decode": False, "gbps": gbps,
            "ratios": {} if time_over_plain is None else {"plain": time_over_plain}}


def test_summary_takes_ratios_within_each_round_and_median_shares():
    # Shares of plain 0.5, 0.8, 0.625 (times 2, 1.25, 1.6 plain's).
    base = [run([rec("addnorm", 10.0, time_over_plain=2.0), rec("plain", 20.0)]),
            run([rec("addnorm", 20.0, time_over_plain=1.25), rec("plain", 25.0)]),
            run([rec("addnorm", 30.0, time_over_plain=1.6), rec("plain", 48.0)])]
    # The machine's speed drifts between rounds; the variant is 1.1x, 1.2x, 0.9x its round's base.
    variant = [run([rec("addnorm", 11.0, time_over_plain=4.0)]),
               run([rec("addnorm", 24.0, time_over_plain=1.0)]),
               run([rec("addnorm", 27.0, time_over_plain=2.0)])]
    # The base again in each round (the control): 0.95x, 1.0x, 1.05x the first run.
    control = [run([rec("addnorm", 9.5)]), run([rec("addnorm", 20.0)]),
               run([rec("addnorm", 31.5)])]
    [case] = ab.summarise(base, variant, control)
    assert case.key == ("layer_norm_fwd", "f32", 1024, 128, 1, "memory")
    assert case.ratios == pytest.approx([1.1, 1.2, 0.9])
    assert case.noise == pytest.approx([0.95, 1.0, 1.05])
    assert case.base_share == pytest.approx(0.625)
    assert case.variant_share == pytest.approx(0.5)
    table = ab.markdown(ab.summarise(base, variant, control), "", "kMaxGroup=4", "test CPU")
    assert "| 0.90, 1.10, 1.20 | 0.95, 1.00, 1.05 | 0.62 | 0.50 |" in table
    assert "test CPU" in table
    assert ab.summarise(base, variant)[0].noise is None  # no control run: no noise column


def test_summary_keeps_only_cases_both_sides_ran_in_every_round():
    base = [run([rec("addnorm", 10.0), rec("addnorm", 10.0, dim=256)])]
    variant = [run([rec("addnorm", 12.0, dim=256), rec("addnorm", 9.0, in_cache=True)])]
    cases = ab.summarise(base, variant)
    assert [case.key[3] for case in cases] == [256]
    assert cases[0].ratios == pytest.approx([1.2])
    assert cases[0].base_share is None  # no plain in that run: no share
    with pytest.raises(ValueError, match="same number of rounds"):
        ab.summarise(base, variant + variant)
    with pytest.raises(ValueError, match="same number of rounds"):
        ab.summarise(base, variant, variant + variant)


def test_block_sums_flushed_every_addition_are_as_exact_as_float64():
    # With one addition a block, each lane's sums are flushed to float64 at once: what is left
    # is rstd's rounding to float32 (0.5 ulp) and that of each square and pair sum, a few 2^-24
    # of single values spread over the row's 512.
    rng = np.random.default_rng(1)
    for _ in range(10):
        row = block_sums_error.to_bfloat16(rng.uniform(-2.45, 2.45, 512))
        for lanes in (4, 16):
            assert block_sums_error.rstd_ulps(row, lanes, 1) <= 0.6


def test_longer_blocks_and_fewer_lanes_lose_more():
    rng = np.random.default_rng(3)
    rows = [block_sums_error.to_bfloat16(rng.uniform(-2.45, 2.45, 1024)) for _ in range(40)]
    worst = {(lanes, block): max(block_sums_error.rstd_ulps(r, lanes, block) for r in rows)
             for lanes in (4, 16) for block in (16, 64)}
    assert worst[(4, 64)] > 2 * worst[(4, 16)]
    assert worst[(4, 64)] > worst[(16, 64)]
    assert worst[(4, 16)] <= 4 and worst[(16, 16)] <= 4  # the case table's bound


def test_to_bfloat16_rounds_to_nearest_even():
    # bfloat16 has 7 fraction bits: its unit at 1 is 2^-7. Ties go to the even neighbour.
    values = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-9, 1.0 + 2**-9, 1.0 + 2**-7 + 2**-8],
                      dtype=np.float32)
    want = [1.0, 1.0, 1.0 + 2**-7, 1.0, 1.0 + 2 * 2**-7]
    np.testing.assert_array_equal(block_sums_error.to_bfloat16(values), want)


def test_bench_options_go_over_the_defaults_by_name():
    args = ab.bench_arguments(["--dims", "512,1024", "--threads", "1", "--in-cache-mib", "2"])
    pairs = dict(ab.options(args))
    assert pairs["--dims"] == "512,1024" and pairs["--threads"] == "1"
    assert pairs["--ops"] == "layer_norm_fwd" and pairs["--impls"] == "addnorm,plain"
    assert pairs["--in-cache-mib"] == "2" and "--quiet" in pairs
    assert args.count("--dims") == 1
    assert ab.bench_arguments([]) == ab.DEFAULT_BENCH_ARGS
    with pytest.raises(ValueError, match="expected an option"):
        ab.bench_arguments(["512"])


def test_the_variant_is_built_with_the_base_tunables_under_its_own():
    assert ab.merged_tuning("kMaxGroup=4,kGroupBytes=8192", "kMaxGroup=2") == \
        "kMaxGroup=2,kGroupBytes=8192"
    assert ab.merged_tuning("", "kMaxGroup=2") == "kMaxGroup=2"


def test_an_unknown_option_before_the_separator_fails_before_any_build():
    result = subprocess.run([sys.executable, str(REPO_ROOT / "dev/ab.py"), "kMaxGroup=4",
                             "--dims", "64"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "unrecognized arguments: --dims 64" in result.stderr
    assert not (REPO_ROOT / "build-dev" / "kMaxGroup-4").exists()


def test_an_unknown_base_commit_fails_before_any_build():
    result = subprocess.run([sys.executable, str(REPO_ROOT / "dev/ab.py"), "--base-commit",
                             "no-such-revision"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "git knows no commit 'no-such-revision'" in result.stderr


def test_neither_tunables_nor_a_base_commit_is_refused():
    result = subprocess.run([sys.executable, str(REPO_ROOT / "dev/ab.py")], capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert "or --base-commit" in result.stderr


def test_a_commit_builds_apart_from_the_working_tree_and_the_report_names_both():
    commit = ab.resolve_commit("HEAD")
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    assert ab.build_dir("", commit[:12]).name == f"{commit[:12]}-default"
    assert ab.build_dir("kMaxGroup=4").name == "kMaxGroup-4"
    assert ab.side_label("", f"commit {commit[:12]}") == f"commit {commit[:12]}"
    assert ab.side_label("kMaxGroup=4", "the working tree") == "the working tree, kMaxGroup=4"
    assert ab.side_label("") == "defaults"


def test_a_commit_checkout_that_holds_another_commit_is_made_again(tmp_path, monkeypatch):
    # A worktree cut short, or a folder left where the checkout goes, is replaced by the commit.
    monkeypatch.setattr(ab, "ROOT", REPO_ROOT)
    commit = ab.resolve_commit("HEAD")
    where = REPO_ROOT / "build-dev" / f"src-{commit[:12]}"
    if where.exists():
        pytest.skip("a real checkout of HEAD is in build-dev/; not disturbing it")
    where.mkdir(parents=True)
    (where / "left-over").write_text("not a checkout")
    try:
        assert ab.commit_source(commit) == where
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True)
        assert head.stdout.strip() == commit
        assert not (where / "left-over").exists()
    finally:
        subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(where)],
                       capture_output=True)
        shutil.rmtree(where, ignore_errors=True)
        subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "prune"], capture_output=True)


# ---- ab.py --in-process (dev/in_process.py, dev/alternate.c) ----


def test_in_process_cases_take_the_bench_option_names_over_their_defaults():
    grid, mib, reps = in_process.cases(ab.options(["--dims", "128,512", "--threads", "2",
                                                   "--ops", "rms_norm_bwd", "--reps", "7"]))
    assert grid == [("rms_norm_bwd", "f32", 128, 2), ("rms_norm_bwd", "f32", 512, 2)]
    assert (mib, reps) == (64.0, 7)
    grid, _, _ = in_process.cases([])
    assert len(grid) == 2 * 6 * 2  # two ops, six row lengths, two thread counts


def test_in_process_grids_take_every_op_in_both_dtypes():
    grid, _, _ = in_process.cases(ab.options(["--ops", "batch_norm_train_fwd,layer_norm_fwd",
                                              "--dtypes", "f32,bf16", "--dims", "64",
                                              "--threads", "1"]))
    assert grid == [("batch_norm_train_fwd", "f32", 64, 1), ("batch_norm_train_fwd", "bf16", 64, 1),
                    ("layer_norm_fwd", "f32", 64, 1), ("layer_norm_fwd", "bf16", 64, 1)]


@pytest.mark.parametrize("given, message", [
    (["--impls", "plain"], "takes --ops"),
    (["--ops", "batch_norm_fwd"], "'batch_norm_fwd' is not one of"),
    (["--dtypes", "f16"], "'f16' is not f32 or bf16"),
    (["--dims", "0"], "must be positive"),
    (["--dims", "64,x"], "--dims: expected a comma-separated list"),
    (["--reps", "0"], "must be positive"),
])
def test_in_process_cases_refuse_what_the_driver_cannot_run(given, message):
    with pytest.raises(ValueError, match=message):
        in_process.cases(ab.options(given))


def test_in_process_medians_are_taken_within_each_process():
    # Round 1: the variant 1.25x the base's speed in both calls, the control 1.0x and 0.5x;
    # round 2: the variant 0.8x (a process where it ran slower throughout).
    rounds = [([1.0, 2.0], [0.8, 1.6], [1.0, 4.0]),
              ([1.0, 1.0], [1.25, 1.25], [1.0, 1.0])]
    variant, control = in_process.round_medians(rounds)
    assert variant == pytest.approx([1.25, 0.8])
    assert control == pytest.approx([0.75, 1.0])


def test_in_process_shares_of_plain_are_each_rounds_median_of_plains_time_over_a_sides():
    # Round 1: plain takes 1.0 where the base takes 2.0 and the variant 1.25 (shares 0.5, 0.8);
    # round 2: the base 0.5 and 1.0 of plain's two calls' times (shares 1.0 and 0.5: median 0.75).
    rounds = [([2.0, 2.0], [1.25, 1.25], [2.0, 2.0], [1.0, 1.0]),
              ([1.0, 2.0], [1.0, 1.0], [1.0, 2.0], [1.0, 1.0])]
    base, variant = in_process.plain_shares(rounds)
    assert base == pytest.approx([0.5, 0.75]) and variant == pytest.approx([0.8, 1.0])
    assert in_process.plain_shares([times[:3] for times in rounds]) == (None, None)
    case = ab.CaseSummary(("rms_norm_fwd", "f32", 8, 64, 1, "in process, 1 MiB"), [1.0, 1.0],
                          base, variant, noise=[1.0, 1.0])
    assert "| 0.62 (0.50–0.75) | 0.90 (0.80–1.00) |" in ab.markdown([case], "a", "b", "cpu")


def test_row_times_are_each_librarys_median_min_and_max_seconds_over_its_rows():
    # 4 rows: 2e-6 s a call is 500 ns a row; a library's calls 1, 3 and 2 us: median 2 us.
    times = row_times.row_times(4, [[2e-6, 2e-6], [1e-6, 3e-6, 2e-6]])
    assert times[0] == pytest.approx((500.0, 500.0, 500.0))
    assert times[1] == pytest.approx((500.0, 250.0, 750.0))
    with pytest.raises(ValueError, match="rows"):
        row_times.row_times(0, [[1.0]])


def test_row_times_pools_each_librarys_calls_over_the_rounds():
    rounds = [[[1.0, 2.0], [3.0]], [[4.0], [5.0, 6.0]]]
    assert row_times.pooled(rounds) == [[1.0, 2.0, 4.0], [3.0, 5.0, 6.0]]


def test_row_times_refuses_a_library_that_is_not_name_equals_an_existing_file(tmp_path):
    library = tmp_path / "libaddnorm.so"
    library.write_bytes(b"")
    assert row_times.named_library(f"base={library}") == ("base", library)
    for bad in [str(library), f"={library}", f"base={tmp_path / 'missing.so'}"]:
        with pytest.raises(Exception, match="NAME=PATH"):
            row_times.named_library(bad)


def test_in_process_output_must_have_every_library_at_every_repetition():
    rows, times = in_process.parse("rows 12\nsample 1 0 0.5\nsample 0 0 0.25\n"
                                   "sample 0 1 0.125\nsample 1 1 1.0\n", 2)
    assert rows == 12 and times == [[0.25, 0.125], [0.5, 1.0]]
    with pytest.raises(ValueError, match="every library"):
        in_process.parse("rows 12\nsample 0 0 0.5\nsample 0 1 0.5\nsample 1 0 0.5\n", 2)


def test_in_process_times_come_back_in_the_order_of_the_libraries_whatever_the_load_order(
        tmp_path):
    # A stand-in for alternate: each library's "time" is its name's number, so a wrong mapping
    # from load order back to the libraries shows.
    fake = tmp_path / "alternate"
    fake.write_text("#!/bin/sh\nshift 5\necho rows 3\ni=0\nfor lib in \"$@\"; do\n"
                    "  echo sample $i 0 $(basename $lib)\n  i=$((i + 1))\ndone\n")
    fake.chmod(0o755)
    for first in range(3):
        rows, times = in_process.measure(fake, ["1", "2", "4"], ("rms_norm_fwd", "f32", 8, 1),
                                         1.0, 1, first=first)
        assert rows == 3 and times == [[1.0], [2.0], [4.0]]


def built_library(compiler):
    """The build's libaddnorm.so, or a skip where it or `compiler` is missing."""
    build = Path(os.environ.get("ADDNORM_BUILD_DIR", REPO_ROOT / "build")).resolve()
    library = build / "libaddnorm.so"
    if not library.is_file() or shutil.which(compiler) is None:
        pytest.skip(f"needs {compiler} and {library} (the CMake target addnorm_shared)")
    return library


@pytest.fixture(scope="module")
def alternate(tmp_path_factory):
    """dev/alternate.c compiled here, and two separate files of the build's libaddnorm.so."""
    library = built_library("cc")
    where = tmp_path_factory.mktemp("alternate")
    binary = where / "alternate"
    subprocess.run(["cc", "-O1", "-std=c11", "-Wall", "-Werror", f"-I{REPO_ROOT / 'include'}",
                    "-o", str(binary), str(REPO_ROOT / "dev" / "alternate.c"), "-ldl"],
                   check=True)
    copies = [where / "libaddnorm-a.so", where / "libaddnorm-b.so"]
    for copy in copies:
        shutil.copyfile(library, copy)
    return binary, copies


@pytest.mark.parametrize("op", in_process.OPS)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_the_driver_calls_each_library_at_every_repetition(alternate, op, dtype):
    binary, libraries = alternate
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run([str(binary), op, dtype, "48", "0.0625", "3", *map(str, libraries)],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    rows, times = in_process.parse(result.stdout, 2)
    assert rows == 65536 // (4 if dtype == "f32" else 2) // 48  # 1/16 MiB of rows of 48
    assert all(len(t) == 3 and min(t) > 0 for t in times)


@pytest.mark.parametrize("args, message", [
    (["layer_norm_fwd", "f16", "48", "1", "1"], "DTYPE: expected f32 or bf16"),
    (["group_norm", "f32", "48", "0.0625", "1"], "OP: expected"),
    (["layer_norm_fwd", "f32", "0", "1", "1"], "must be positive"),
    (["layer_norm_fwd", "f32", "48", "1"], "usage"),
])
def test_the_driver_refuses_bad_arguments_by_name(alternate, args, message):
    binary, libraries = alternate
    result = subprocess.run([str(binary), *args, str(libraries[0])], capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert message in result.stderr


# ---- the plain loop behind the C ABI (dev/plain_abi.cpp) ----


class _Tensor(ctypes.Structure):
    """addnorm_tensor (addnorm.h): data, shape, rank, dtype."""
    _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("rank", ctypes.c_int32), ("dtype", ctypes.c_int32)]


def _tensor(array):
    shape = (ctypes.c_int64 * array.ndim)(*array.shape)
    tensor = _Tensor(array.ctypes.data, shape, array.ndim, 0)  # ADDNORM_FLOAT32
    tensor._keep = shape
    return ctypes.byref(tensor)


@pytest.fixture(scope="module")
def plain_and_addnorm(tmp_path_factory):
    """The plain library compiled as ab.py --in-process compiles it, and the build's addnorm."""
    library = built_library("c++")
    plain = in_process.plain_library(tmp_path_factory.mktemp("plain"), REPO_ROOT)
    mode = os.RTLD_LOCAL | getattr(os, "RTLD_DEEPBIND", 0)
    return ctypes.CDLL(str(plain), mode=mode), ctypes.CDLL(str(library), mode=mode)


def _run(lib, op, x, r, dy, gamma, beta):
    """One op of the driver through `lib`'s C ABI, on float32 [rows, dim] arrays: its output
    (y, or dx for a backward), after a forward of the same library for a backward's
    statistics."""
    rows, dim = x.shape
    y, h, dx = (np.zeros_like(x) for _ in range(3))
    mean, rstd = np.zeros(rows, np.float32), np.zeros(rows, np.float32)
    dgamma, dbeta = np.zeros(dim, np.float32), np.zeros(dim, np.float32)
    eps = ctypes.c_double(1e-5)
    rms = op.startswith("rms_norm") or op == "add_norm_pre_rms_fwd"
    if op in ("layer_norm_fwd", "layer_norm_bwd"):
        status = lib.addnorm_layer_norm(_tensor(x), 1, _tensor(gamma), _tensor(beta), eps,
                                        _tensor(y), _tensor(mean), _tensor(rstd))
    elif op in ("rms_norm_fwd", "rms_norm_bwd"):
        status = lib.addnorm_rms_norm(_tensor(x), 1, _tensor(gamma), 0, eps, _tensor(y),
                                      _tensor(rstd))
    elif op.startswith("add_norm_pre"):
        status = lib.addnorm_add_norm_pre(_tensor(x), _tensor(r), 1, int(rms), _tensor(gamma),
                                          None if rms else _tensor(beta), 0, eps, _tensor(h),
                                          _tensor(y), None if rms else _tensor(mean),
                                          _tensor(rstd))
    else:  # add_norm_post_p0_fwd
        status = lib.addnorm_add_norm_post(_tensor(x), _tensor(r), 1, 0, _tensor(gamma),
                                           _tensor(beta), 0, eps, ctypes.c_double(0.0),
                                           ctypes.c_uint64(1), ctypes.c_uint64(0), _tensor(y),
                                           _tensor(mean), _tensor(rstd))
    assert status == 0
    if op == "layer_norm_bwd":
        status = lib.addnorm_layer_norm_backward(_tensor(dy), _tensor(x), 1, _tensor(gamma),
                                                 _tensor(beta), eps, _tensor(mean),
                                                 _tensor(rstd), _tensor(dx), _tensor(dgamma),
                                                 _tensor(dbeta))
    elif op == "rms_norm_bwd":
        status = lib.addnorm_rms_norm_backward(_tensor(dy), _tensor(x), 1, _tensor(gamma), 0,
                                               eps, _tensor(rstd), _tensor(dx), _tensor(dgamma))
    assert status == 0
    return dx if op.endswith("_bwd") else y


@pytest.mark.parametrize("op", in_process.PLAIN_OPS)
def test_the_plain_library_computes_each_op_as_addnorm_does(plain_and_addnorm, op):
    """The plain loop behind the C ABI reads each argument where addnorm's C ABI puts it: its
    output agrees with addnorm's to plain's own float32 tolerance (bench's check_plain)."""
    plain, addnorm = plain_and_addnorm
    generator = np.random.default_rng(5)
    x, r, dy = (generator.uniform(-2, 3, (7, 48)).astype(np.float32) for _ in range(3))
    gamma = generator.uniform(0.5, 1.5, 48).astype(np.float32)
    beta = generator.uniform(-0.5, 0.5, 48).astype(np.float32)
    want = _run(addnorm, op, x, r, dy, gamma, beta)
    got = _run(plain, op, x, r, dy, gamma, beta)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-3 * float(np.abs(want).max()))


def test_the_plain_library_refuses_what_it_does_not_compute(plain_and_addnorm):
    plain, _ = plain_and_addnorm
    plain.addnorm_last_error.restype = ctypes.c_char_p
    x = np.zeros((2, 48), np.float32)
    y, s = np.ones_like(x), np.zeros_like(x)
    gamma, beta, stats = np.ones(48, np.float32), np.zeros(48, np.float32), np.zeros(2, np.float32)
    status = plain.addnorm_add_norm_post(_tensor(x), _tensor(s), 1, 0, _tensor(gamma),
                                         _tensor(beta), 0, ctypes.c_double(1e-5),
                                         ctypes.c_double(0.1), ctypes.c_uint64(1),
                                         ctypes.c_uint64(0), _tensor(y), _tensor(stats),
                                         _tensor(stats))
    assert status == 1 and b"expected p = 0" in plain.addnorm_last_error()
    assert (y == 1).all()  # nothing written
    odd = np.zeros((2, 40), np.float32)
    status = plain.addnorm_rms_norm(_tensor(odd), 1, _tensor(np.ones(40, np.float32)), 0,
                                    ctypes.c_double(1e-5), _tensor(np.zeros_like(odd)),
                                    _tensor(stats))
    assert status == 1 and b"multiple of 16" in plain.addnorm_last_error()

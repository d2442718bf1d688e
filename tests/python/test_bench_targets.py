"""bench/targets.py, which turns an addnorm-bench --json result into issue 10's target table: each
target's value is derived here by hand from the records' medians, % of ceiling and same-run
ratios, and the met / not met verdicts checked on both sides of each threshold. (No benchmark
runs: the records are written here, in the shape addnorm-bench writes them.)"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "bench"))
import targets  # noqa: E402  (bench/ is not a package)


def record(op, impl, median_s, *, dtype="f32", dim=1024, rows=4096, threads=2, pct=0.0,
           ratios=None, in_cache=False, decode=False, run="main"):
    return {"op": op, "case_op": op, "impl": impl, "dtype": dtype, "rows": rows, "dim": dim,
            "threads": threads, "in_cache": in_cache, "decode": decode, "run": run,
            "median_s": median_s, "pct_of_ceiling": pct, "ratios": ratios or {}}


def verdicts(records):
    """{(target name prefix, threads): (measured, met)}."""
    return {(name, threads): (measured, met)
            for name, threads, measured, met in targets.evaluate(records)}


def row(records, prefix, threads):
    matches = [v for (name, t), v in verdicts(records).items()
               if name.startswith(prefix) and t == threads]
    assert len(matches) == 1, (prefix, threads, verdicts(records))
    return matches[0]


def test_percent_of_ceiling_is_met_only_when_every_shape_meets_it():
    records = [record("layer_norm_fwd", "addnorm", 1e-3, dim=768, pct=91.0),
               record("layer_norm_fwd", "addnorm", 1e-3, dim=64, pct=89.5),
               record("layer_norm_fwd", "addnorm", 1e-3, dim=64, threads=1, pct=90.0)]
    measured, met = row(records, "LayerNorm fwd f32: % of copy ceiling", "2")
    assert met == "not met (1 of 2 shapes)"
    assert measured == "90%–91% (worst D=64: 90%)"  # 89.5 rounds to 90 in the text
    assert row(records, "LayerNorm fwd f32: % of copy ceiling", "1") == ("90%", "met")


def test_speedup_is_the_other_implementations_time_over_addnorms():
    # oneDNN's record holds its median / addnorm's: 1.25 and 1.35 over two shapes.
    records = [record("layer_norm_fwd", "onednn", 1.25e-3, dim=64, ratios={"addnorm": 1.25}),
               record("layer_norm_fwd", "onednn", 1.35e-3, dim=512, ratios={"addnorm": 1.35}),
               record("layer_norm_fwd", "onednn", 1e-4, dim=1024, rows=256, in_cache=True,
                      ratios={"addnorm": 1.6})]
    assert row(records, "LayerNorm fwd f32: x oneDNN", "2") == (
        "1.25x–1.35x (worst D=64: 1.25x)", "not met (1 of 2 shapes)")
    # The in-cache shape is its own target, not one of the out-of-cache shapes.
    assert row(records, "in cache (256 x 1024) LayerNorm fwd", "2") == ("1.60x", "met")


def test_batch_norm_is_compared_with_tuned_pytorch_when_the_run_has_it():
    as_installed = record("batch_norm_train_fwd", "torch", 9e-3, ratios={"addnorm": 3.0})
    tuned = record("batch_norm_train_fwd", "torch-tuned", 4e-3, ratios={"addnorm": 1.4},
                   run="torch-tuned")
    assert row([as_installed, tuned], "BatchNorm training fwd f32: x PyTorch", "2") == (
        "1.40x", "not met")
    assert row([as_installed], "BatchNorm training fwd f32: x PyTorch", "2") == ("3.00x", "met")


def test_bf16_rows_per_second_pairs_the_same_shape_in_the_same_run():
    records = [record("layer_norm_fwd", "addnorm", 2.0e-3, dim=1024),
               record("layer_norm_fwd", "addnorm", 1.0e-3, dim=1024, dtype="bf16"),   # 2.00x
               record("layer_norm_fwd", "addnorm", 2.0e-3, dim=4096, rows=1024),
               record("layer_norm_fwd", "addnorm", 1.25e-3, dim=4096, rows=1024, dtype="bf16"),
               # No float32 partner: not counted.
               record("layer_norm_fwd", "addnorm", 1e-9, dim=8192, rows=512, dtype="bf16")]
    measured, met = row(records, "LayerNorm fwd: bf16 rows/s", "2")
    assert measured == "1.60x–2.00x (worst D=4096: 1.60x)"  # 2.0 / 1.25 = 1.6
    assert met == "not met (1 of 2 shapes)"


def test_post_norm_target_takes_float32_records_only():
    # The bf16 post-norm case sits beside the float32 one in a run; the target is float32's.
    records = [record("add_norm_post_fwd", "addnorm", 1e-3, dim=768, pct=86.0),
               record("add_norm_post_fwd", "addnorm", 1e-3, dim=768, dtype="bf16", pct=20.0)]
    assert row(records, "post-norm (dropout 0.1) fwd f32", "2") == ("86%", "met")


def test_mask_cost_is_addnorms_time_over_its_time_without_dropout():
    # addnorm-p0's record holds its median / addnorm's (p = 0.1): 0.8 means the mask costs 25%.
    records = [record("add_norm_post_fwd", "addnorm-p0", 0.8e-3, dim=64, ratios={"addnorm": 0.8}),
               record("add_norm_post_fwd", "addnorm-p0", 1e-3, dim=1024,
                      ratios={"addnorm": 1 / 1.05}),
               record("add_norm_post_fwd", "addnorm-p0", 1e-3, threads=1,
                      ratios={"addnorm": 1 / 1.08}),
               # The bf16 case and the backward are not this target's.
               record("add_norm_post_fwd", "addnorm-p0", 1e-3, dtype="bf16",
                      ratios={"addnorm": 0.5}),
               record("add_norm_post_bwd", "addnorm-p0", 1e-3, ratios={"addnorm": 0.5})]
    assert row(records, "post-norm fwd f32: time at dropout 0.1", "2") == (
        "1.05x–1.25x (worst D=64: 1.25x)", "not met (1 of 2 shapes)")
    assert row(records, "post-norm fwd f32: time at dropout 0.1", "1") == ("1.08x", "met")
    # A run of addnorm-p0 without addnorm has no ratio to report.
    alone = [record("add_norm_post_fwd", "addnorm-p0", 1e-3, ratios={})]
    assert row(alone, "post-norm fwd f32: time at dropout 0.1", "-") == (
        "not measured in this run", "-")


def test_decode_target_is_time_per_call_and_lower_is_better():
    fast = record("layer_norm_fwd", "addnorm", 0.85e-6, rows=1, dim=4096, threads=1,
                  in_cache=True, decode=True)
    slow = record("layer_norm_fwd", "addnorm", 0.95e-6, rows=1, dim=4096, threads=2,
                  in_cache=True, decode=True)
    other_shape = record("layer_norm_fwd", "addnorm", 5e-6, rows=16, dim=4096, threads=1,
                         in_cache=True, decode=True)
    assert row([fast, slow, other_shape], "decode, one row of 4096", "1") == ("0.85 us", "met")
    assert row([fast, slow, other_shape], "decode, one row of 4096", "2") == ("0.95 us", "not met")


def test_a_target_without_records_says_so():
    assert row([], "post-norm (dropout 0.1)", "-") == ("not measured in this run", "-")


def test_command_line_prints_the_table_and_rejects_other_json(tmp_path):
    result_file = tmp_path / "bench.json"
    result_file.write_text(json.dumps({
        "meta": {"cpu": "Test CPU", "cpu_family": "AMD", "cpus": 2, "simd_target": "AVX3",
                 "tensor_mib": 64, "fault_errors": 1, "load_average_at_start": "0.50",
                 "load_average_at_end": "2.50"},
        "records": [record("layer_norm_bwd", "addnorm", 1e-3, pct=86.0)]}))
    script = REPO_ROOT / "bench" / "targets.py"
    out = subprocess.run([sys.executable, str(script), str(result_file)], capture_output=True,
                         text=True, check=True).stdout
    assert "Test CPU (AMD)" in out and "SIMD target AVX3" in out
    assert "1 timed loop(s) in this run took page faults" in out
    assert "the load average reached 2.5 on 2 CPUs" in out  # 2.50 > 2 CPUs: a shared machine
    assert "| LayerNorm bwd f32: % of copy ceiling | 2 | 86% | met |" in out
    bad = tmp_path / "other.json"
    bad.write_text("{}")
    failed = subprocess.run([sys.executable, str(script), str(bad)], capture_output=True,
                            text=True)
    assert failed.returncode == 2
    assert "is not an addnorm-bench --json result" in failed.stderr


@pytest.mark.parametrize("threshold_side", [89.99, 90.0])
def test_threshold_is_inclusive(threshold_side):
    records = [record("layer_norm_fwd", "addnorm", 1e-3, pct=threshold_side)]
    _, met = row(records, "LayerNorm fwd f32: % of copy ceiling", "2")
    assert met == ("met" if threshold_side >= 90.0 else "not met")


def test_share_of_plain_is_plains_time_over_addnorms():
    # plain's records hold plain's median / each other implementation's.
    records = [record("layer_norm_fwd", "plain", 0.9e-3, dim=128, ratios={"addnorm": 0.95}),
               record("layer_norm_fwd", "plain", 0.8e-3, dim=8192, ratios={"addnorm": 0.85}),
               record("add_norm_post_fwd", "plain", 1e-3, ratios={"addnorm-p0": 0.9,
                                                                   "addnorm": 0.7})]
    assert row(records, "LayerNorm fwd f32: share of plain", "2") == (
        "0.85x–0.95x (worst D=8192: 0.85x)", "not met (1 of 2 shapes)")
    # Post-norm is judged without the mask: addnorm-p0, not addnorm at p = 0.1.
    assert row(records, "post-norm fwd f32 (p = 0): share of plain", "2") == ("0.90x", "met")


def test_batch_norm_share_of_its_byte_model_counts_x_read_twice():
    records = [record("batch_norm_train_fwd", "addnorm", 1e-3, pct=60.0)]
    assert row(records, "BatchNorm training fwd f32: share of its byte model", "2") == (
        "0.90x", "met")


def test_batch_norm_backward_share_of_its_byte_model_counts_dy_and_x_read_twice():
    # The ceiling counts dy, x and dx once (3 tensors); the backward moves 5: 51% of the
    # ceiling is 0.85 of what it can reach, 50% is not.
    records = [record("batch_norm_train_bwd", "addnorm", 1e-3, pct=51.0),
               record("batch_norm_train_bwd", "addnorm", 1e-3, threads=1, pct=50.0)]
    assert row(records, "BatchNorm training bwd f32: share of its byte model", "2") == (
        "0.85x", "met")
    assert row(records, "BatchNorm training bwd f32: share of its byte model", "1") == (
        "0.83x", "not met")

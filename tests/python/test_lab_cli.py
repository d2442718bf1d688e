"""`addnorm lab-run NAME`: every experiment's --quick run through the command line, its JSON and
CSV, the page's numbers in the gradient-flow text, and clear errors for bad arguments.

NumPy is the independent reference where one exists: the gradient-flow stack is recomputed here
from the weights NumPy's own default_rng(42) draws.
"""
import csv
import io
import json
import subprocess

import numpy as np
import pytest

EXPERIMENTS = ["gradient-flow", "activation-growth", "norm-steps", "batch-vs-layer",
               "init-gradients", "depth-training", "update-size"]


def lab_run(addnorm_bin, *args, check=True):
    result = subprocess.run([str(addnorm_bin), "lab-run", *map(str, args)], capture_output=True,
                            text=True, timeout=120)
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_quick_run_prints_text_json_and_csv(addnorm_bin, name):
    text = lab_run(addnorm_bin, name, "--quick").stdout
    assert text.startswith(name + ":")
    data = json.loads(lab_run(addnorm_bin, name, "--quick", "--json").stdout)
    assert data["experiment"] == name
    assert "params" in data
    rows = list(csv.reader(io.StringIO(lab_run(addnorm_bin, name, "--quick", "--csv").stdout)))
    assert len(rows) > 1 and all(len(row) == len(rows[0]) for row in rows)


def test_gradient_flow_matches_numpy(addnorm_bin):
    data = json.loads(lab_run(addnorm_bin, "gradient-flow", "--json").stdout)
    rng = np.random.default_rng(42)
    d = 8
    for stack, layers in zip(data["stacks"], (6, 24)):
        weights = [rng.normal(0, 0.1, (d, d)) for _ in range(layers)]
        g_plain, g_resid = np.ones(d), np.ones(d)
        for k, w in enumerate(reversed(weights), start=1):
            g_plain = w.T @ g_plain
            g_resid = (np.eye(d) + w).T @ g_resid
            assert stack["without_residual"][k] == pytest.approx(np.linalg.norm(g_plain), rel=1e-12)
            assert stack["with_residual"][k] == pytest.approx(np.linalg.norm(g_resid), rel=1e-12)
    text = lab_run(addnorm_bin, "gradient-flow").stdout
    assert "6 layers: gradient size without residual 8.62e-04, with residual 3.31" in text
    assert "24 layers: gradient size without residual 6.86e-14, with residual 2.79" in text


def test_seed_changes_the_run_and_repeats_exactly(addnorm_bin):
    first = lab_run(addnorm_bin, "activation-growth", "--seed", "7", "--json").stdout
    again = lab_run(addnorm_bin, "activation-growth", "--seed", "7", "--json").stdout
    other = lab_run(addnorm_bin, "activation-growth", "--seed", "8", "--json").stdout
    assert first == again
    assert first != other


def test_norm_steps_options(addnorm_bin):
    data = json.loads(lab_run(addnorm_bin, "norm-steps", "--x", "1,2,3", "--gamma", "2",
                              "--beta", "1", "--eps", "0", "--json").stdout)
    x = np.array([1.0, 2.0, 3.0])
    expected = 2 * (x - x.mean()) / x.std() + 1
    assert np.allclose(data["steps"][3]["values"], expected, atol=1e-6)


@pytest.mark.parametrize("args, message", [
    (["gradient-flow", "--depths", "0"], "depths[0] is 0, expected an integer in [1, 1000]"),
    (["gradient-flow", "--width", "-4"], "width is -4"),
    (["activation-growth", "--modes", "sideways"], "mode is \"sideways\""),
    (["init-gradients", "--placements", "middle"], "middle"),
    (["depth-training", "--quick", "--dropout", "1"], "dropout is 1"),
    (["update-size", "--quick", "--depths", "100000"], "depths[0] is 100000"),
    (["batch-vs-layer", "--width", "100000"], "width is 100000"),
    (["norm-steps", "--preset", "dog"], "preset is \"dog\""),
])
def test_bad_arguments_are_clear_errors(addnorm_bin, args, message):
    result = lab_run(addnorm_bin, *args, check=False)
    assert result.returncode == 1
    assert message in result.stderr
    assert result.stdout == ""


def test_unknown_experiment_is_a_usage_error(addnorm_bin):
    result = lab_run(addnorm_bin, "no-such-experiment", check=False)
    assert result.returncode == 2

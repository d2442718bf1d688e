"""`addnorm tour` against the seed pages' own NumPy programs, run here with NumPy.

Each page program below is the page's code as printed (page 000); its output, captured from
print(), must appear line for line in the tour's section. The JSON form must carry the same
numbers, and a bad section name must fail with the list of valid ones.
"""
import contextlib
import io
import json
import subprocess

import numpy as np
import pytest

SECTIONS = ["residual", "cat", "house", "gradient", "growth", "steps", "block", "rmsnorm"]


def run_tour(addnorm_bin, *options):
    assert addnorm_bin.exists(), f"{addnorm_bin} is missing: build it or set ADDNORM_BIN"
    return subprocess.run([str(addnorm_bin), "tour", *options], capture_output=True, text=True,
                          timeout=60)


def printed_by(program):
    """What `program` prints, run with NumPy's default print options."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        program()
    return output.getvalue()


def page_cat():
    cat = np.array([2.0, 4.0, 6.0, 8.0])
    gamma = np.ones(4)
    beta = np.zeros(4)
    eps = 1e-5
    mu = cat.mean()
    var = ((cat - mu) ** 2).mean()
    x_hat = (cat - mu) / np.sqrt(var + eps)
    y = gamma * x_hat + beta
    print("mean:", mu, " variance:", var, " sqrt(var + eps):", round(np.sqrt(var + eps), 5))
    print("x_hat:", np.round(x_hat, 4))
    print("y:    ", np.round(y, 4))
    print("mean of y:", round(y.mean(), 6) + 0.0, " variance of y:", round(y.var(), 6))
    y_back = np.sqrt(var + eps) * x_hat + mu
    print("gamma = sqrt(var + eps), beta = mean gives back:", np.round(y_back, 4))


def page_house():
    H = np.array([[1200, 2.0, 45], [1500, 3.0, 70], [2000, 3.5, 80]])
    bn = (H - H.mean(axis=0)) / H.std(axis=0)
    ln = (H - H.mean(axis=1, keepdims=True)) / H.std(axis=1, keepdims=True)
    print("batch norm (per column):\n", np.round(bn, 4))
    print("column means:", np.round(bn.mean(axis=0), 4) + 0.0, " column stds:",
          np.round(bn.std(axis=0), 4))
    print("layer norm (per row):\n", np.round(ln, 4))
    print("row means:", np.round(ln.mean(axis=1), 4) + 0.0, " row stds:",
          np.round(ln.std(axis=1), 4))


def page_gradient():
    rng = np.random.default_rng(42)
    d = 8
    g_top = np.ones(d)
    for n_layers in (6, 24):
        Ws = [rng.normal(0, 0.1, (d, d)) for _ in range(n_layers)]
        g_plain, g_resid = g_top.copy(), g_top.copy()
        for W in reversed(Ws):
            g_plain = W.T @ g_plain
            g_resid = (np.eye(d) + W).T @ g_resid
        print(f"{n_layers} layers: gradient size without residual {np.linalg.norm(g_plain):.2e}, "
              f"with residual {np.linalg.norm(g_resid):.2f}")


@pytest.mark.parametrize("section, program", [("cat", page_cat), ("house", page_house),
                                              ("gradient", page_gradient)])
def test_section_prints_what_the_pages_numpy_prints(addnorm_bin, section, program):
    result = run_tour(addnorm_bin, "--section", section)
    assert result.returncode == 0, result.stderr
    expected = printed_by(program)
    assert expected in result.stdout, f"expected\n{expected}\nin\n{result.stdout}"


def test_whole_tour_has_every_section_in_order(addnorm_bin):
    result = run_tour(addnorm_bin)
    assert result.returncode == 0, result.stderr
    positions = [result.stdout.find(f" {name}: ") for name in SECTIONS]
    assert all(p >= 0 for p in positions), positions
    assert positions == sorted(positions)
    assert printed_by(page_cat) in result.stdout


def test_json_carries_the_numbers(addnorm_bin):
    result = run_tour(addnorm_bin, "--json")
    assert result.returncode == 0, result.stderr
    tour = json.loads(result.stdout)
    assert sorted(tour) == sorted(SECTIONS)
    np.testing.assert_allclose(tour["residual"]["with_residual"], [1.1, 2.3], rtol=1e-7)
    cat = np.array([2.0, 4.0, 6.0, 8.0])
    np.testing.assert_allclose(tour["cat"]["y"], (cat - 5.0) / np.sqrt(5.0 + 1e-5), atol=1e-6)
    runs = tour["gradient"]["runs"]
    assert [run["layers"] for run in runs] == [6, 24]
    assert f"{runs[1]['without_residual']:.2e}" == "6.86e-14"
    growth = tour["growth"]
    assert growth["std_without_norm"][-1] > 100
    assert max(abs(s - 1) for s in growth["std_with_layer_norm"][1:]) < 1e-3


def test_one_section_as_json(addnorm_bin):
    result = run_tour(addnorm_bin, "--section", "steps", "--json")
    assert result.returncode == 0, result.stderr
    steps = json.loads(result.stdout)
    assert list(steps) == ["steps"]
    np.testing.assert_allclose(steps["steps"]["output"],
                               2 * (np.array([2, -3, 1, 4]) - 1) / np.sqrt(6.5) + 0.5, atol=1e-6)
    assert steps["steps"]["page_output"] == [1.28, -2.64, 0.5, 2.86]


def test_unknown_section_fails_with_the_valid_names(addnorm_bin):
    result = run_tour(addnorm_bin, "--section", "kitten")
    assert result.returncode != 0
    assert result.stdout == ""
    assert "kitten" in result.stderr
    assert ", ".join(SECTIONS) in result.stderr

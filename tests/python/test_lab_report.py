"""The lab's figures and generated report: `addnorm lab-run NAME --plot FILE` for every
experiment (through scripts/lab-report.sh --quick, which draws all of them), the report's tables
against the JSON they came from, and the options added with them (--warmups both, --sublayers,
--mode perturbation)."""
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FIGURES = ["gradient-flow", "activation-growth", "norm-steps", "batch-vs-layer", "init-gradients",
           "init-gradients-ffn", "update-size", "update-size-perturbation", "update-size-admin",
           "depth-training",
           "rank-collapse", "trainability-map"]


def lab_run(addnorm_bin, *args, check=True):
    result = subprocess.run([str(addnorm_bin), "lab-run", *map(str, args)], capture_output=True,
                            text=True, timeout=120)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_report_script_draws_every_experiment(addnorm_bin, tmp_path):
    environment = dict(os.environ, ADDNORM_BIN=str(addnorm_bin))
    subprocess.run(["bash", str(REPO_ROOT / "scripts" / "lab-report.sh"), "--quick", "--out",
                    str(tmp_path)], check=True, env=environment, timeout=300,
                   capture_output=True)
    report = (tmp_path / "lab-results.md").read_text()
    for label in FIGURES:
        figure = tmp_path / "figures" / f"{label}.svg"
        root = ElementTree.parse(figure).getroot()
        assert root.tag.endswith("svg"), label
        text = " ".join(t.strip() for t in root.itertext())
        name = label.replace("-ffn", "").replace("-perturbation", "").replace("-admin", "")
        assert f"addnorm lab-run {name}" in text, label  # the figure's title
        assert f"## {label}\n" in report
        assert f"(figures/{label}.svg)" in report
    # Every section names the command that repeats it.
    assert report.count("`addnorm lab-run ") == len(FIGURES)
    # The tables are the JSON's numbers: norm-steps' normalised values, and init-gradients'
    # median top-block gradient with its quartiles.
    steps = json.loads((tmp_path / "json" / "norm-steps.json").read_text())["steps"]
    assert ", ".join(f"{v:.5g}" for v in steps[-1]["values"]) in report
    stack = json.loads((tmp_path / "json" / "init-gradients.json").read_text())["stacks"][0]
    spread = stack["top_ffn_grad"]
    assert f"{spread['median']:.3g} [{spread['q25']:.3g}, {spread['q75']:.3g}]" in report
    # rank-collapse: the bare stack's last-block residual, median [IQR], as the JSON has it.
    curve = json.loads((tmp_path / "json" / "rank-collapse.json").read_text())["curves"][0]
    last = curve["residual"][-1]
    assert curve["placement"] == "bare"
    assert f"{last['median']:.3g} [{last['q25']:.3g}, {last['q75']:.3g}]" in report


def test_plot_png_and_bad_plot_names(addnorm_bin, tmp_path):
    png = tmp_path / "flow.png"
    lab_run(addnorm_bin, "gradient-flow", "--plot", png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = lab_run(addnorm_bin, "gradient-flow", "--plot", tmp_path / "flow.pdf", check=False)
    assert result.returncode != 0
    assert "expected a file name ending in .svg or .png" in result.stderr


def test_warmups_both_and_sublayers_and_perturbation(addnorm_bin):
    data = json.loads(lab_run(addnorm_bin, "depth-training", "--quick", "--depths", "1",
                              "--placements", "pre_norm", "--warmups", "both", "--seeds", "1",
                              "--json").stdout)
    assert data["params"]["warmups"] == [False, True]
    assert [s["warmup"] for s in data["summaries"]] == [False, True]
    data = json.loads(lab_run(addnorm_bin, "init-gradients", "--quick", "--sublayers", "ffn",
                              "--json").stdout)
    assert data["params"]["sublayers"] == "ffn"
    assert all(v == 0 for s in data["stacks"] for v in s["attention_grad_norm"])
    data = json.loads(lab_run(addnorm_bin, "update-size", "--quick", "--mode", "perturbation",
                              "--lrs", "1e-4", "--json").stdout)
    assert data["params"]["mode"] == "perturbation"
    assert {s["lr"] for s in data["stacks"]} == {1e-4}
    result = lab_run(addnorm_bin, "update-size", "--quick", "--mode", "sgd", check=False)
    assert "mode is \"sgd\", expected adam or perturbation" in result.stderr


def test_summaries_print_the_spread(addnorm_bin):
    text = lab_run(addnorm_bin, "init-gradients", "--quick").stdout
    # "post / pre" per depth, median [q25, q75] over the quick run's four seeds.
    assert re.search(r"post_norm / pre_norm.*\n.*depth.*post / pre\n\s+6\s+[\d.e+-]+ \[", text)
    data = json.loads(lab_run(addnorm_bin, "gradient-flow", "--json").stdout)
    n = data["params"]["spread_seeds"]
    text = lab_run(addnorm_bin, "gradient-flow").stdout
    assert "6 layers: gradient size without residual 8.62e-04, with residual 3.31" in text
    assert f"over {n} other seeds (43..{42 + n}), median [interquartile range]" in text


def test_tour_prints_the_page_and_the_spread_over_other_seeds(addnorm_bin):
    """The tour's gradient section: the page's seed-42 lines unchanged, and beside them the
    median [q25, q75] over seeds 43.., recomputed here with NumPy's own default_rng."""
    np = pytest.importorskip("numpy")
    text = subprocess.run([str(addnorm_bin), "tour", "--section", "gradient"], check=True,
                          capture_output=True, text=True, timeout=60).stdout
    assert "6 layers: gradient size without residual 8.62e-04, with residual 3.31\n" in text
    assert "24 layers: gradient size without residual 6.86e-14, with residual 2.79\n" in text
    n = int(re.search(r"the same over (\d+) other seeds \(43\.\.(\d+)\)", text).group(1))
    d, sizes = 8, {6: ([], []), 24: ([], [])}
    for seed in range(43, 43 + n):
        rng = np.random.default_rng(seed)  # one generator: 24 layers follow the 6
        for layers in (6, 24):
            g_plain = g_resid = np.ones(d)
            for w in reversed([rng.normal(0, 0.1, (d, d)) for _ in range(layers)]):
                g_plain, g_resid = w.T @ g_plain, (np.eye(d) + w).T @ g_resid
            sizes[layers][0].append(np.linalg.norm(g_plain))
            sizes[layers][1].append(np.linalg.norm(g_resid))
    for layers, (plain, resid) in sizes.items():
        q = [np.percentile(plain, p) for p in (50, 25, 75)]
        r = [np.percentile(resid, p) for p in (50, 25, 75)]
        line = (f"  {layers} layers: without residual {q[0]:.2e} [{q[1]:.2e}, {q[2]:.2e}], "
                f"with residual {r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}]\n")
        assert line in text


def load_stability():
    import importlib.util
    spec = importlib.util.spec_from_file_location("lab_stability",
                                                  REPO_ROOT / "scripts" / "lab_stability.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seed_stability_rule_on_two_quick_runs(addnorm_bin):
    """The rule's verdict for two real runs on disjoint seed sets equals the one computed here
    from the runs' per-seed values with NumPy (median of the per-seed post/pre ratios)."""
    np = pytest.importorskip("numpy")
    stability = load_stability()
    runs = [json.loads(lab_run(addnorm_bin, "init-gradients", "--quick", "--seed", seed,
                               "--json").stdout) for seed in (0, 4)]  # --quick has 4 seeds

    def post_over_pre(result, depth):
        top = {s["placement"]: np.array(s["top_ffn_grad_per_seed"])
               for s in result["stacks"] if s["depth"] == depth}
        return float(np.median(top["post_norm"] / top["pre_norm"]))

    verdict = stability.judge("init-gradients", runs[0], runs[1])
    expected = {}
    for depth in runs[0]["params"]["depths"]:
        a, b = post_over_pre(runs[0], depth), post_over_pre(runs[1], depth)
        expected[f"post/pre L={depth}"] = abs(a - b) / max(a, b)
    assert {m[1]: m[0] for m in verdict["claims"]} == pytest.approx(expected, rel=1e-12)
    assert verdict["holds"] == all(v < 0.10 for v in expected.values())
    # A threshold below the largest move fails the same pair of runs.
    largest = max(expected.values())
    assert not stability.judge("init-gradients", runs[0], runs[1], threshold=largest * 0.99)["holds"]


def test_seed_stability_rule_judges_the_claim_statistic():
    """Synthetic results: update-size's rule is on the share of seeds in which post > pre >
    DeepNorm (60/64 vs 50/64 moves by 10/60 = 16.7%, a failure although each lr-scaled median
    moved less), and depth-training's on the accuracies (losses near 0 may move by factors)."""
    stability = load_stability()

    def update_size(holds, post, pre):
        return {"orderings": [{"lr": 1e-3, "depth": 6, "holds": holds, "seeds": 64}],
                "stacks": [{"placement": "post_norm", "depth": 6, "lr": 1e-3, "output_change": post},
                           {"placement": "pre_norm", "depth": 6, "lr": 1e-3, "output_change": pre}]}

    verdict = stability.judge("update-size", update_size(60, 0.30, 0.10),
                              update_size(50, 0.33, 0.0917))
    assert verdict["claims"][0][1] == "post>pre>deep L=6 lr=0.001"
    assert verdict["claims"][0][2] == pytest.approx(60 / 64)
    assert verdict["claims"][0][0] == pytest.approx(10 / 60)
    assert not verdict["holds"]
    assert verdict["medians_within"] == 2  # 9.1% and 8.3%: each median alone passes
    assert stability.judge("update-size", update_size(60, 0.30, 0.10),
                           update_size(58, 0.30, 0.10))["holds"]  # 2/60 = 3.3%

    def depth_training(loss, accuracy):
        return {"summaries": [{"placement": "pre_norm", "depth": 2, "warmup": False,
                               "final_loss": loss, "accuracy": accuracy}]}

    verdict = stability.judge("depth-training", depth_training(0.04, 0.99),
                              depth_training(0.002, 1.0))
    assert verdict["holds"] and verdict["claims_within"] == 1
    assert verdict["medians_within"] == 1  # the loss moved by 95%
    assert verdict["medians"][0][0] == pytest.approx(0.038 / 0.04)
    assert not stability.judge("depth-training", depth_training(0.04, 0.99),
                               depth_training(0.04, 0.80))["holds"]


EXPERIMENTS = ["gradient-flow", "activation-growth", "norm-steps", "batch-vs-layer",
               "init-gradients", "update-size", "depth-training"]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_parameter_is_an_option_and_round_trips(addnorm_bin, name):
    """One table per experiment: each key the result echoes under "params" is a command-line
    option (--d-model for d_model), and typing every echoed value back as options reproduces
    the same params."""
    params = json.loads(lab_run(addnorm_bin, name, "--quick", "--json").stdout)["params"]
    help_text = lab_run(addnorm_bin, name, "--help").stdout
    args = []
    for key, value in params.items():
        option = "--" + key.replace("_", "-")
        assert re.search(rf"^\s+{re.escape(option)}\b", help_text, re.M), option
        if key == "warmups":  # typed as the schedules' names
            value = ["warmup" if v else "constant" for v in value]
        values = value if isinstance(value, list) else [value]
        args += [option, ",".join(repr(v) if isinstance(v, float) else str(v) for v in values)]
    again = json.loads(lab_run(addnorm_bin, name, *args, "--json").stdout)["params"]
    assert again == params


def test_depth_slope_recovers_a_power_law_and_matches_polyfit():
    """lab_report.depth_slope: per seed a least-squares slope of ln(value) on ln(depth). On exact
    power laws value = c L^a it returns a (and growth (L_max / L_min)^a); on noisy data each seed's
    slope is NumPy's polyfit's, and the summary is their median and quartiles."""
    import importlib.util
    import sys
    import numpy as np
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("lab_report", REPO_ROOT / "scripts" / "lab_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    depths = [6, 12, 24, 48]
    exponents = [0.5, 0.7, 1.1]
    per_seed = [[3.0 * (s + 1) * d ** a for s, a in enumerate(exponents)] for d in depths]
    slope, growth = report.depth_slope(depths, per_seed)
    assert slope["median"] == pytest.approx(0.7, abs=1e-12)
    assert slope["q25"] == pytest.approx(0.6, abs=1e-12)  # linear quantile between 0.5 and 0.7
    assert growth == pytest.approx(8.0 ** 0.7, rel=1e-12)
    noisy = np.random.default_rng(5).lognormal(0.0, 0.3, size=(4, 9)) * np.array(depths)[:, None]
    slope, _ = report.depth_slope(depths, noisy.tolist())
    fitted = [np.polyfit(np.log(depths), np.log(noisy[:, i]), 1)[0] for i in range(9)]
    assert slope["median"] == pytest.approx(float(np.median(fitted)), abs=1e-12)
    assert slope["seeds"] == 9


def test_seed_rule_treats_a_missing_median_as_a_full_move():
    """A diverged seed makes a median null in the JSON: the rule must count that as a move, not
    crash or pass it."""
    stability = load_stability()
    assert stability.relative_move(None, 0.5) == 1.0
    assert stability.relative_move(float("nan"), 0.5) == 1.0
    assert stability.relative_move(None, None) == 0.0
    assert stability.relative_move(0.4, 0.5) == pytest.approx(0.2)

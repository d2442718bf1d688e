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
           "init-gradients-ffn", "update-size", "update-size-perturbation", "depth-training"]


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
        name = label.replace("-ffn", "").replace("-perturbation", "")
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
    text = lab_run(addnorm_bin, "gradient-flow").stdout
    assert "6 layers: gradient size without residual 8.62e-04, with residual 3.31" in text
    assert "over 256 other seeds (43..298), median [interquartile range]" in text

"""scripts/lab_map_dask.py on a local two-worker Dask cluster (Debian's python3-distributed):
the map it assembles from one task per cell is the single-machine run's JSON, cell for cell, and
its option errors are clear."""
import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "lab_map_dask.py"


def test_two_worker_cluster_matches_the_single_machine_map(addnorm_bin, tmp_path):
    import distributed  # noqa: F401  (the test needs the package, not a skip: CI installs it)

    options = ["--quick", "--placements", "post_norm,pre_norm,admin", "--seeds", "2"]
    single = subprocess.run([str(addnorm_bin), "lab-run", "trainability-map", *options, "--json"],
                            capture_output=True, text=True, check=True, timeout=120)
    out = tmp_path / "map.json"
    subprocess.run([sys.executable, str(SCRIPT), "--local", "2", "--addnorm", str(addnorm_bin),
                    "--out", str(out), *options], capture_output=True, text=True, check=True,
                   timeout=300)
    expected, distributed_map = json.loads(single.stdout), json.loads(out.read_text())
    assert distributed_map["cell_count"] == 9 == len(distributed_map["cells"])
    assert distributed_map == expected
    # The merged JSON draws like the single-machine one.
    figure = tmp_path / "map.svg"
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "lab_plot.py"), str(out),
                    str(figure)], check=True, timeout=120)
    assert figure.read_text().lstrip().startswith("<?xml")


def test_options_it_sets_itself_are_refused(addnorm_bin):
    done = subprocess.run([sys.executable, str(SCRIPT), "--local", "2", "--addnorm",
                           str(addnorm_bin), "--cell", "3"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "--cell, --json, --csv and --plot are set here" in done.stderr
    done = subprocess.run([sys.executable, str(SCRIPT), "--local", "0"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--local is 0, expected 1..256 workers" in done.stderr


def test_a_failing_cell_names_itself(addnorm_bin):
    done = subprocess.run([sys.executable, str(SCRIPT), "--local", "1", "--addnorm",
                           str(addnorm_bin), "--quick", "--steps", "0"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    assert "cell 0:" in done.stderr and "steps" in done.stderr

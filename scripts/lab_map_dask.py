#!/usr/bin/python3
"""Runs `addnorm lab-run trainability-map` spread over a Dask cluster, one cell per task, and
prints the same JSON the single-machine run prints (cell for cell: each cell's runs depend only
on its own parameters and seeds, so where it runs cannot change a bit of it).

usage: lab_map_dask.py (--scheduler ADDRESS | --local WORKERS) [--addnorm BIN] [--out FILE]
                       [MAP OPTIONS ...]

  --scheduler ADDRESS  a running dask scheduler (e.g. tcp://10.0.0.5:8786); every worker must
                       have the addnorm binary at the same path (BIN) and Python 3 with dask
  --local WORKERS      start a local cluster of WORKERS processes (one thread each) instead
  --addnorm BIN        the addnorm binary (default: $ADDNORM_BIN, else build/addnorm)
  --out FILE           write the JSON there (default: standard output); draw it with
                       scripts/lab_plot.py FILE map.svg
  MAP OPTIONS          passed to every `addnorm lab-run trainability-map` (e.g. --seeds 4
                       --depths 2,6,12); --cell and --json are added here

Each task runs its cell with OMP_NUM_THREADS=1: a worker is one core's worth of runs.
"""
import argparse
import json
import os
import subprocess
import sys


def run_cell(binary, options, cell):
    """One cell's JSON, from the binary on the worker that runs this."""
    environment = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([binary, "lab-run", "trainability-map", *options, "--cell", str(cell),
                           "--json"], capture_output=True, text=True, env=environment, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"cell {cell}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def merge(parts):
    """The single-machine JSON from the cells' JSONs: the first part's header, every cell in index
    order, and params.cell back to -1 (the whole map)."""
    merged = dict(parts[0])
    merged["params"] = dict(parts[0]["params"], cell=-1)
    for part in parts:
        if dict(part["params"], cell=-1) != merged["params"]:
            raise RuntimeError(f"cell {part['params']['cell']} ran with other parameters")
    merged["cells"] = sorted((c for part in parts for c in part["cells"]),
                             key=lambda c: c["index"])
    indices = [c["index"] for c in merged["cells"]]
    if indices != list(range(merged["cell_count"])):
        raise RuntimeError(f"cells {indices} do not cover 0..{merged['cell_count'] - 1}")
    return merged


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--scheduler")
    where.add_argument("--local", type=int)
    parser.add_argument("--addnorm", default=os.environ.get("ADDNORM_BIN", "build/addnorm"))
    parser.add_argument("--out")
    args, options = parser.parse_known_args(argv)
    if any(o.split("=")[0] in ("--cell", "--json", "--csv", "--plot") for o in options):
        parser.error("--cell, --json, --csv and --plot are set here, one cell per task (draw the "
                     "JSON with scripts/lab_plot.py)")
    if args.local is not None and not 1 <= args.local <= 256:
        parser.error(f"--local is {args.local}, expected 1..256 workers")
    binary = os.path.abspath(args.addnorm)

    from dask.distributed import Client, LocalCluster  # imported late: --help needs no dask

    cluster = None
    if args.local is not None:
        cluster = LocalCluster(n_workers=args.local, threads_per_worker=1, processes=True,
                               dashboard_address=None)
    try:
        with Client(cluster if cluster is not None else args.scheduler) as client:
            # Cell 0 first: its answer says how many cells the map has (and checks the options).
            first = client.submit(run_cell, binary, options, 0, pure=False).result()
            futures = [client.submit(run_cell, binary, options, k, pure=False)
                       for k in range(1, first["cell_count"])]
            parts = [first] + client.gather(futures)
    finally:
        if cluster is not None:
            cluster.close()
    text = json.dumps(merge(parts), indent=2, sort_keys=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as target:
            target.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main(sys.argv[1:])

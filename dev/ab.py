#!/usr/bin/python3
"""A/B of the kernels' speed tunables: builds addnorm-bench with the default tunables and with a
variant (src/ops/cpu's `tuned()` values, through CMake's ADDNORM_TUNING), runs them in turn, and
prints for every case the variant's speed over the base's round by round, the same for a second
run of the base (the control: what the machine's noise alone does to the same code), and each
side's share of the plain loop measured in its own run.

    /usr/bin/python3 dev/ab.py kInterleaveShortRows=0
    /usr/bin/python3 dev/ab.py kShortRowMaxDim=512 --rounds 4 --check -- --dims 512,1024 --threads 1
    /usr/bin/python3 dev/ab.py kAddBlockBytes=16384 -- --ops add_norm_pre_fwd --dtypes bf16
    /usr/bin/python3 dev/ab.py --base-commit HEAD -- --tensor-mib 0.25 --dims 64,128,256 --threads 1

With --base-commit, the base is that commit (checked out once as a git worktree in
build-dev/src-<first 12 hex digits>/, built in build-dev/<those digits>-<tunables>/) and the
variant the working tree, each with its tunables: the A/B of a code change. On a shared
machine, tensors that stay in L2 (`--tensor-mib 0.25`) time a change to the per-row work to a
few percent, where 64 MiB tensors spread 0.6-1.3x between runs.
Otherwise each side is built in build-dev/<tunables>/. Builds are kept, so a second experiment
reuses the base; each is for this CPU's best SIMD target and the scalar one only, unless
--all-targets. --check also builds the variant's tests and runs the case table on it (the numerics contract must hold for any value).
A round runs base, variant, base again, in separate processes, pinned (OMP_PROC_BIND=close,
OMP_PLACES=cores); a ratio is taken between the runs of one round, so a drift of the shared
machine's speed between rounds does not enter it, and a difference inside the control's spread
is noise. Options after -- go to addnorm-bench, over the same-named ones of the default (float32
LayerNorm forward, D = 64 to 8192, 1 and 2 threads, addnorm and plain, out of cache). Each
experiment's bench records are kept in build-dev/<variant>/runs/ (runs-<commit>/ against a
commit) until the next one with the same sides. Building for this CPU's target only is quicker but does not compile SSE4: a value
that SSE4 refuses (kShortHalfRowMaxDim above 128, which must fit one block of float32 sums with 4
lanes) passes here and fails the release build; --all-targets finds it.
With --in-process, no bench runs: each side's libaddnorm.so (and a copy of the base's, the
control) is loaded into one process (dev/alternate.c, through dev/in_process.py) and called in
turn on the same data, --reps calls each, in an order that rotates; a ratio compares calls a few
milliseconds apart, so the shared machine's drift between runs does not enter it, and 64 MiB
tensors can be compared there. Each round is a process of its own, loading the libraries in
another order, and the report gives the rounds' medians: now and then one library runs slower
all through one process (seen once: 0.65x in one process, 1.00x in the next three), which
then shows as one round apart. It needs no bench dependencies.

    /usr/bin/python3 dev/ab.py --base-commit HEAD --in-process -- --dims 128,512,1024 --threads 1

What was measured this way, and the verdicts, go to docs/performance.md ("Tunables: what was
tried"); the bench itself is documented there too. Needs the bench's dependencies
(scripts/install-deps.sh libdnnl-dev ocl-icd-opencl-dev libtorch-dev).
"""

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import in_process

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BENCH_ARGS = [
    "--ops", "layer_norm_fwd", "--dims", "64,128,512,1024,4096,8192", "--threads", "1,2",
    "--dtypes", "f32", "--impls", "addnorm,plain", "--reps", "5", "--case-seconds", "1",
    "--no-decode", "--no-in-cache", "--quiet",
]
TUNING_SCRIPT = ROOT / "cmake" / "tuning.cmake"  # the one reader of the kernels' tunables


def tuning_script(*definitions):
    """Runs cmake/tuning.cmake in script mode with -D`definitions`: its output, or ValueError with
    its message (CMake's own check, the one the build runs)."""
    try:
        result = subprocess.run(
            ["cmake", *(f"-D{d}" for d in definitions), "-P", str(TUNING_SCRIPT)],
            capture_output=True, text=True)
    except FileNotFoundError as error:
        raise ValueError("tunables: cmake is not on PATH (scripts/install-deps.sh installs it)") \
            from error
    if result.returncode != 0:
        message = re.sub(r"\s+", " ", result.stderr)
        found = re.search(r"ADDNORM_TUNING: (.*?)(?: Call Stack|$)", message)
        raise ValueError(f"tunables: {found.group(1) if found else message.strip()}")
    return result.stdout + result.stderr


def tunables():
    """The tunables the kernels define (`= tuned("kName", default)` in src/ops/cpu), name ->
    (default as written there, the file that defines it)."""
    found = {}
    for line in tuning_script("ADDNORM_TUNING_LIST=ON").splitlines():
        listed = re.fullmatch(r"(k\w+) = (.+)  \((.+)\)", line)
        if listed:
            found[listed.group(1)] = (listed.group(2), listed.group(3))
    return found


def check_tuning(tuning):
    """Fails with ValueError before any build when CMake would refuse the tuning string."""
    if tuning != "":
        tuning_script(f"ADDNORM_TUNING={tuning}")


def merged_tuning(base, variant):
    """The variant's build: the base's tunables with the variant's over them."""
    values = dict(item.split("=") for item in base.split(",") if item)
    values.update(item.split("=") for item in variant.split(",") if item)
    return ",".join(f"{name}={value}" for name, value in values.items())


def options(args):
    """addnorm-bench arguments as [(option, value or None)], in order."""
    pairs, i = [], 0
    while i < len(args):
        if not args[i].startswith("--"):
            raise ValueError(f"bench arguments: expected an option at {args[i]!r}")
        takes_value = i + 1 < len(args) and not args[i + 1].startswith("--")
        pairs.append((args[i], args[i + 1] if takes_value else None))
        i += 2 if takes_value else 1
    return pairs


def bench_arguments(given):
    """DEFAULT_BENCH_ARGS with the options in `given` (addnorm-bench's) over the same-named ones,
    and the others added."""
    merged = dict(options(DEFAULT_BENCH_ARGS))
    merged.update(options(given))
    return [text for option, value in merged.items()
            for text in ([option] if value is None else [option, value])]


def build_dir(tuning, commit=None):
    """build-dev/<tunables>/ for the working tree, build-dev/<commit>-<tunables>/ for a commit."""
    name = tuning.replace("=", "-").replace(",", "_") or "default"
    return ROOT / "build-dev" / (f"{commit}-{name}" if commit else name)


def resolve_commit(revision):
    """The full hash of a revision of this repository (ValueError if git does not know it)."""
    result = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet",
                             f"{revision}^{{commit}}"], capture_output=True, text=True)
    if result.returncode != 0:
        raise ValueError(f"--base-commit: git knows no commit {revision!r}")
    return result.stdout.strip()


def commit_source(commit):
    """A checkout of `commit` to build the base from: a detached git worktree in
    build-dev/src-<first 12 digits>/, made once and kept (build-dev/ is ignored). One that does
    not hold the commit (a checkout cut short, a folder left by hand) is made again; ValueError
    with git's message if git cannot."""
    where = ROOT / "build-dev" / f"src-{commit[:12]}"
    # A folder in build-dev/ that is not a checkout of its own would report this repository's HEAD.
    head = subprocess.run(["git", "-C", str(where), "rev-parse", "--show-toplevel", "HEAD"],
                          capture_output=True, text=True) if where.exists() else None
    if head is not None and head.returncode == 0 and \
            head.stdout.split() == [str(where.resolve()), commit]:
        return where
    git = ["git", "-C", str(ROOT), "worktree"]
    subprocess.run([*git, "remove", "--force", str(where)], capture_output=True)
    shutil.rmtree(where, ignore_errors=True)  # what was not a worktree: ab.py's folder, not yours
    subprocess.run([*git, "prune"], capture_output=True)  # a folder deleted by hand
    added = subprocess.run([*git, "add", "--detach", str(where), commit], capture_output=True,
                           text=True)
    if added.returncode != 0:
        raise ValueError(f"--base-commit: git could not check out {commit[:12]} in {where}: "
                         f"{added.stderr.strip()}")
    return where


def disabled_targets(all_targets):
    """Highway targets left out: all but AVX-512 and scalar on an AVX-512 CPU, for a quicker build."""
    if all_targets:
        return "HWY_SSSE3"
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return "(HWY_SSSE3|HWY_SSE4|HWY_AVX2)" if "avx512f" in flags else "HWY_SSSE3"


def build(tuning, all_targets, targets, commit=None):
    """Builds `targets` with `tuning` from the working tree, or from `commit`'s checkout (the
    bench only where a target needs it: the shared library alone needs none of its
    dependencies)."""
    where = build_dir(tuning, commit[:12] if commit else None)
    source = commit_source(commit) if commit else ROOT
    bench = "ON" if "addnorm_bench" in targets else "OFF"
    subprocess.run(
        ["cmake", "-S", str(source), "-B", str(where), "-DCMAKE_BUILD_TYPE=Release",
         f"-DADDNORM_BUILD_BENCH={bench}", "-DADDNORM_BUILD_PYTHON=OFF",
         "-DADDNORM_BUILD_TORCH_OPS=OFF",
         f"-DADDNORM_BUILD_TESTS={'ON' if 'addnorm_tests' in targets else 'OFF'}",
         f"-DADDNORM_TUNING={tuning}",
         f"-DADDNORM_DISABLED_SIMD_TARGETS={disabled_targets(all_targets)}"],
        check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(where), f"-j{os.cpu_count()}", "--target", *targets],
                   check=True, stdout=subprocess.DEVNULL)
    return where


def run_bench(where, bench_args, out):
    env = dict(os.environ, OMP_PROC_BIND="close", OMP_PLACES="cores")
    subprocess.run([str(where / "bench" / "addnorm-bench"), *bench_args, "--json", str(out)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def case_key(record):
    regime = "decode" if record.get("decode") else ("in cache" if record["in_cache"] else "memory")
    return (record["op"], record["dtype"], record["rows"], record["dim"], record["threads"], regime)


def addnorm_records(run):
    return {case_key(r): r for r in run["records"] if r["impl"] == "addnorm"}


@dataclasses.dataclass
class CaseSummary:
    """One case's comparison: speed ratios by round (variant over base; the control's over the
    base, where the base ran twice a round: the machine's noise for the same code), and each
    side's share of plain (the median over a bench run's rounds, or each in-process round's)."""
    key: tuple
    ratios: list
    base_share: float = None
    variant_share: float = None
    noise: list = None


def summarise(base_runs, variant_runs, control_runs=None):
    """A CaseSummary per case that every run has: a ratio compares runs of one round; a share is
    addnorm's speed over plain's in the same run, its median over the rounds (the bench's
    `ratios` are of times measured interleaved: addnorm's median over plain's)."""
    control_runs = control_runs or []
    if len(base_runs) != len(variant_runs) or control_runs and len(control_runs) != len(base_runs):
        raise ValueError("summarise: the base, the variant and the control need the same number "
                         "of rounds")
    base_by_round = [addnorm_records(run) for run in base_runs]
    variant_by_round = [addnorm_records(run) for run in variant_runs]
    control_by_round = [addnorm_records(run) for run in control_runs]
    every = base_by_round + variant_by_round + control_by_round
    summaries = []
    for key in sorted(set.intersection(*(set(r) for r in every))):

        def speed_over_base(by_round):
            return [r[key]["gbps"] / b[key]["gbps"] for b, r in zip(base_by_round, by_round)]

        def share(by_round):
            shares = [1.0 / r[key]["ratios"]["plain"] for r in by_round
                      if "plain" in r[key]["ratios"]]
            return statistics.median(shares) if shares else None

        summaries.append(CaseSummary(key, speed_over_base(variant_by_round), share(base_by_round),
                                     share(variant_by_round),
                                     speed_over_base(control_by_round) or None))
    return summaries


def side_label(tuning, source=None):
    """How the report names a side: its source (where a commit is compared with the working
    tree) and its tunables."""
    return ", ".join(part for part in (source, tuning) if part) or "defaults"


def markdown(summaries, base, variant, cpu,
             control="the base run twice a round"):
    def fmt(value):
        """A share: one figure (a bench run's median), or rounds' figures as their median and
        range (--in-process)."""
        if value is None:
            return "–"
        if isinstance(value, list):
            return f"{statistics.median(value):.2f} ({min(value):.2f}–{max(value):.2f})"
        return f"{value:.2f}"

    def spread(ratios):
        if not ratios:
            return "–"
        return f"{min(ratios):.2f}, {statistics.median(ratios):.2f}, {max(ratios):.2f}"

    lines = [f"Variant `{variant}` against base `{base}` ({cpu}). A difference "
             f"inside the control's spread ({control}) is noise.", "",
             "| op | dtype | rows × D | threads | regime | variant / base (min, median, max) "
             "| control: base / base | base share of plain | variant share of plain |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case in summaries:
        op, dtype, rows, dim, threads, regime = case.key
        lines.append(f"| {op} | {dtype} | {rows} × {dim} | {threads} | {regime} | "
                     f"{spread(case.ratios)} | {spread(case.noise)} | {fmt(case.base_share)} | "
                     f"{fmt(case.variant_share)} |")
    return "\n".join(lines)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variant", nargs="?", help="tunables of the variant, kName=value,...")
    parser.add_argument("--base", default="",
                        help="tunables of the base (default: none); the variant is built with "
                             "them too, its own over them")
    parser.add_argument("--base-commit", metavar="REVISION",
                        help="build the base from this commit (a git worktree in build-dev/) and "
                             "the variant from the working tree: the A/B of a code change; the "
                             "variant's tunables are then optional")
    parser.add_argument("--rounds", type=int, default=3, help="base-variant pairs of runs")
    parser.add_argument("--all-targets", action="store_true", help="build every SIMD target")
    parser.add_argument("--check", action="store_true",
                        help="run the case table's, the 16-bit backward's and BatchNorm's tests "
                             "on the variant first")
    parser.add_argument("--list", action="store_true", help="list the tunables and exit")
    parser.add_argument("--in-process", action="store_true",
                        help="load both sides' libaddnorm.so into one process and call them in "
                             "turn (dev/alternate.c), a second copy of the base as the control, "
                             "one process a round; "
                             "options after -- are then --ops, --dims, --dtypes, --threads, "
                             "--tensor-mib and --reps (calls per library)")
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    if args.list:
        for name, (default, where) in sorted(tunables().items()):
            print(f"{name} = {default}  ({where})")
        return 0
    if args.variant is None and args.base_commit is None:
        parser.error("the variant's tunables are required (kName=value,...; --list names them), "
                     "or --base-commit")
    if args.rounds < 1:
        parser.error("--rounds: expected at least 1")
    variant_tuning = args.variant or ""
    try:
        commit = resolve_commit(args.base_commit) if args.base_commit else None
        if commit is None:  # a commit's build checks its own tunables, as that commit defines them
            check_tuning(args.base)
        check_tuning(merged_tuning(args.base, variant_tuning))  # what the working tree builds
        if args.in_process:
            grid, mib, reps = in_process.cases(options(argv[split + 1:]))
        else:
            bench_args = bench_arguments(argv[split + 1:])
        if commit:
            commit_source(commit)
    except ValueError as error:
        parser.error(str(error))
    if args.in_process:
        return run_in_process(args, commit, variant_tuning, grid, mib, reps)
    base, variant = build_sides(args, commit, variant_tuning, "addnorm_bench")
    # A variant's runs, per base: the same working tree against another commit keeps its own.
    runs = variant / (f"runs-{commit[:12]}" if commit else "runs")
    runs.mkdir(exist_ok=True)
    base_runs, variant_runs, control_runs = [], [], []
    for round_ in range(args.rounds):
        base_runs.append(run_bench(base, bench_args, runs / f"base-{round_}.json"))
        variant_runs.append(run_bench(variant, bench_args, runs / f"variant-{round_}.json"))
        control_runs.append(run_bench(base, bench_args, runs / f"control-{round_}.json"))
        print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr)
    cpu = base_runs[0]["meta"].get("cpu", "unknown CPU")
    print(markdown(summarise(base_runs, variant_runs, control_runs),
                   *side_labels(args, commit, variant_tuning), cpu))
    return 0


def build_sides(args, commit, variant_tuning, target):
    """Builds `target` for the base (from `commit`, or this tree with --base's tunables) and for
    the variant (this tree, its tunables over --base's); with --check, runs the contract's tests
    on the variant first: the case table, the 16-bit backward's block sums and BatchNorm's. Returns the two
    build directories."""
    base = build(args.base, args.all_targets, [target], commit)
    variant = build(merged_tuning(args.base, variant_tuning), args.all_targets,
                    [target] + (["addnorm_tests"] if args.check else []))
    if args.check:
        subprocess.run([str(variant / "tests" / "addnorm_tests"),
                        "--gtest_filter=*CaseTable*:*NarrowBackward*:*BatchNorm*"], check=True)
    return base, variant


def side_labels(args, commit, variant_tuning):
    """What the report calls the base and the variant."""
    return (side_label(args.base, f"commit {commit[:12]}" if commit else None),
            side_label(merged_tuning(args.base, variant_tuning),
                       "the working tree" if commit else None))


def cpu_name():
    """This machine's CPU model, as /proc/cpuinfo names it."""
    info = Path("/proc/cpuinfo")
    for line in info.read_text().splitlines() if info.exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def run_in_process(args, commit, variant_tuning, grid, mib, reps):
    """--in-process: the shared libraries of both sides (and a copy of the base's) called in turn
    in one process per case."""
    base, variant = build_sides(args, commit, variant_tuning, "addnorm_shared")
    binary = in_process.driver(ROOT / "build-dev", ROOT)
    plain = in_process.plain_library(ROOT / "build-dev", ROOT)
    base_library = in_process.shared_library(base)
    libraries = [base_library, in_process.shared_library(variant),
                 in_process.control_copy(base_library, base)]
    summaries = []
    for case in grid:
        op, dtype, dim, threads = case
        called = libraries + ([plain] if op in in_process.PLAIN_OPS else [])
        rounds = []
        for round_ in range(args.rounds):  # each round a process, loading in another order
            rows, times = in_process.measure(binary, called, case, mib, reps, first=round_)
            rounds.append(times)
        ratios, noise = in_process.round_medians(rounds)
        base_share, variant_share = in_process.plain_shares(rounds)
        key = (op, dtype, rows, dim, threads, f"in process, {mib:g} MiB")
        summaries.append(CaseSummary(key, ratios, base_share, variant_share, noise=noise))
        print(f"{' '.join(map(str, case))} done", file=sys.stderr)
    print(markdown(summaries, *side_labels(args, commit, variant_tuning), cpu_name(),
                   control="a second copy of the base, called in the same turns"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

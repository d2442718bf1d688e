"""ab.py --in-process: the base's and the variant's libaddnorm.so loaded into one process
(dev/alternate.c) and called in turn on the same data, with a second copy of the base as the
control. A ratio then compares calls milliseconds apart, not runs minutes apart: on this shared
machine separate processes see 64 MiB tensors move 0.6-1.3x between runs, which hides the 10-20%
a memory-access change makes (docs/performance.md, "Tunables: what was tried")."""

import os
import shutil
import statistics
import subprocess
from pathlib import Path

# addnorm-bench's op names (add_norm_post_fwd with its dropout 0.1), the RMSNorm pre-norm and
# the post-norm at p = 0 (which the bench times as its implementation addnorm-p0), and BatchNorm
# in training mode (the bench's forward and backward), each
# in f32 and bf16.
OPS = ("layer_norm_fwd", "rms_norm_fwd", "add_norm_pre_fwd", "add_norm_pre_rms_fwd",
       "add_norm_post_fwd", "add_norm_post_p0_fwd", "layer_norm_bwd", "rms_norm_bwd",
       "batch_norm_train_fwd", "batch_norm_train_bwd")
# The ops the plain loop has (dev/plain_abi.cpp): its share of each side is measured there too.
PLAIN_OPS = ("layer_norm_fwd", "rms_norm_fwd", "add_norm_pre_fwd", "add_norm_pre_rms_fwd",
             "add_norm_post_p0_fwd", "layer_norm_bwd", "rms_norm_bwd")
DEFAULTS = {"--ops": "layer_norm_fwd,rms_norm_fwd", "--dims": "64,128,512,1024,4096,8192",
            "--dtypes": "f32", "--threads": "1,2", "--tensor-mib": "64", "--reps": "15"}


def cases(pairs):
    """The grid an in-process run measures, from addnorm-bench-style options ([(option, value)],
    ab.options()): [(op, dtype, dim, threads)], the tensor size in MiB and the calls per library.
    ValueError for an option the driver does not take or a value it cannot."""
    given = dict(pairs)
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"--in-process takes {', '.join(DEFAULTS)} only, not {', '.join(unknown)}")
    merged = {**DEFAULTS, **{k: v for k, v in given.items() if v is not None}}

    def listed(option, convert):
        try:
            return [convert(item) for item in merged[option].split(",")]
        except ValueError:
            raise ValueError(f"{option}: expected a comma-separated list, got {merged[option]!r}")

    ops = listed("--ops", str)
    for op in ops:
        if op not in OPS:
            raise ValueError(f"--ops: {op!r} is not one of {', '.join(OPS)}")
    dtypes = listed("--dtypes", str)
    for dtype in dtypes:
        if dtype not in ("f32", "bf16"):
            raise ValueError(f"--dtypes: {dtype!r} is not f32 or bf16")
    dims, threads = listed("--dims", int), listed("--threads", int)
    if min(dims) < 1 or min(threads) < 1:
        raise ValueError("--dims and --threads must be positive")
    try:
        mib, reps = float(merged["--tensor-mib"]), int(merged["--reps"])
    except ValueError:
        raise ValueError("--tensor-mib and --reps: expected numbers")
    if mib <= 0 or reps < 1:
        raise ValueError("--tensor-mib and --reps must be positive")
    grid = [(op, dtype, dim, t) for op in ops for dtype in dtypes for dim in dims for t in threads]
    return grid, mib, reps


def parse(output, libraries):
    """alternate's output: (rows, [[seconds of each call] per library]), calls in order of
    repetition. ValueError if a library is missing a repetition."""
    rows, samples = None, [dict() for _ in range(libraries)]
    for line in output.splitlines():
        words = line.split()
        if words[:1] == ["rows"]:
            rows = int(words[1])
        elif words[:1] == ["sample"]:
            samples[int(words[1])][int(words[2])] = float(words[3])
    reps = set(samples[0])
    if rows is None or not reps or any(set(s) != reps for s in samples):
        raise ValueError("alternate: every library needs a sample for every repetition")
    return rows, [[s[rep] for rep in sorted(reps)] for s in samples]


def speed_ratios(base, other):
    """Per repetition, the other library's speed over the base's (base time over its time)."""
    return [b / o for b, o in zip(base, other)]


def driver(build_dev, root):
    """dev/alternate.c compiled into build-dev/ (again when the source is newer)."""
    source, binary = root / "dev" / "alternate.c", build_dev / "alternate"
    if not binary.exists() or binary.stat().st_mtime < source.stat().st_mtime:
        build_dev.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-O2", "-std=c11", f"-I{root / 'include'}", "-o", str(binary),
                        str(source), "-ldl"], check=True)
    return binary


def plain_library(build_dev, root):
    """The benchmark's plain loop behind the C ABI (dev/plain_abi.cpp, bench/plain_kernels.cpp),
    compiled into build-dev/ (again when a source is newer): a library alternate.c calls beside
    addnorm's, so that each side's share of plain is measured in the same process."""
    sources = [root / "dev" / "plain_abi.cpp", root / "bench" / "plain_kernels.cpp",
               root / "bench" / "plain_kernels.hpp"]
    library = build_dev / "libaddnorm-plain.so"
    if not library.exists() or library.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        build_dev.mkdir(parents=True, exist_ok=True)
        subprocess.run(["c++", "-O2", "-std=c++20", "-fPIC", "-shared", "-fopenmp",
                        f"-I{root / 'include'}", f"-I{root / 'bench'}", "-o", str(library),
                        *(str(p) for p in sources[:2]), "-lhwy"], check=True)
    return library


def control_copy(library, where):
    """A second file of the base's library: dlopen loads a path it has loaded once only."""
    copy = where / "libaddnorm-control.so"
    shutil.copyfile(library, copy)
    return copy


def measure(binary, libraries, case, mib, reps, first=0):
    """One case in one process on `libraries` (base, variant, control[, plain]), loaded in an
    order that starts at library `first`: (rows, times per library, in the order given)."""
    op, dtype, dim, threads = case
    order = [(first + i) % len(libraries) for i in range(len(libraries))]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="close",
               OMP_PLACES="cores")
    result = subprocess.run([str(binary), op, dtype, str(dim), str(mib), str(reps),
                             *(str(libraries[i]) for i in order)], check=True, env=env,
                            capture_output=True, text=True)
    rows, times = parse(result.stdout, len(libraries))
    by_library = [None] * len(libraries)
    for position, library in enumerate(order):
        by_library[library] = times[position]
    return rows, by_library


def round_medians(rounds):
    """[(times of base, variant, control[, plain])] per round, each from a process of its own:
    the medians, round by round, of the variant's and the control's speed over the base's. A
    process that was unlucky as a whole (it happens: one library slower all through one
    process, and not in the next) then shows as one round apart from the others."""
    variant = [statistics.median(speed_ratios(times[0], times[1])) for times in rounds]
    control = [statistics.median(speed_ratios(times[0], times[2])) for times in rounds]
    return variant, control


def plain_shares(rounds):
    """The base's and the variant's share of plain (plain's time over theirs, call by call in
    the same process), each round's median: a list a side; (None, None) where no round timed
    plain (a fourth library). Unlike a ratio of two builds of addnorm, a share compares
    different code, which one process can favour more than another: the rounds' spread shows
    by how much."""
    if any(len(times) < 4 for times in rounds):
        return None, None

    def share(side):
        return [statistics.median(speed_ratios(times[3], times[side])) for times in rounds]

    return share(0), share(1)


def shared_library(build):
    """The shared library a build made (build-dev/<side>/libaddnorm.so)."""
    return Path(build) / "libaddnorm.so"

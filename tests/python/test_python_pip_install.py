"""The source distribution (`python3 setup.py sdist`) holds everything the build needs, `pip
wheel` makes a wheel of it offline, and that wheel `pip install`s into a fresh `python3 -m venv
--system-site-packages`; `import addnorm`
and `python -m addnorm` then work from outside the repository, with the type information.

The sdist is built from the checkout into a temporary folder (the checkout is left untouched)
and installed with --no-index (nothing may be downloaded). Compiling the extension from scratch
takes minutes on 2 cores, so by default the test hands setup.py the modules the CMake build
already made (ADDNORM_PREBUILT_EXTENSION=<build>/python/addnorm, the documented shortcut);
everything else — the sdist, the venv, pip's build through setup.py without build isolation,
the wheel, the import — is real, and the sdist's contents are checked file by file against the
sources the CMake build reads. Set ADDNORM_PIP_TEST_COMPILE=1 to compile through CMake from the
sdist as a user's install does.
"""
import os
import re
import subprocess
import tarfile
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the CMake build of the package reads: the top CMakeLists.txt includes cmake/, configures
# src/ (with its folders' CMakeLists.txt), include/, python/ and embeds web/ into the server.
BUILD_INPUTS = ["CMakeLists.txt", "setup.py", "cmake", "include", "src", "python", "web"]


def build_folder():
    return Path(os.environ.get("ADDNORM_BUILD_DIR", REPO_ROOT / "build")).resolve()


def prebuilt_modules():
    """The folder of the CMake build's extension modules, unless the test should compile."""
    if os.environ.get("ADDNORM_PIP_TEST_COMPILE") == "1":
        return None
    folder = build_folder() / "python" / "addnorm"
    return folder if any(folder.glob("_addnorm*.so")) else None


def source_files():
    """Every file of BUILD_INPUTS, relative to the repository, without caches."""
    files = set()
    for name in BUILD_INPUTS:
        path = REPO_ROOT / name
        candidates = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        files |= {str(p.relative_to(REPO_ROOT)) for p in candidates
                  if "__pycache__" not in p.parts and p.suffix not in (".pyc", ".so")}
    return files


def test_sdist_builds_a_wheel_that_installs_offline_into_a_fresh_venv(tmp_path):
    hidden = ("PYTHONPATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")
    environment = {k: v for k, v in os.environ.items() if k not in hidden}
    environment["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    dist = tmp_path / "dist"
    sdist = subprocess.run(["/usr/bin/python3", "setup.py", "-q", "sdist", "--dist-dir",
                            str(dist)], cwd=REPO_ROOT, env=environment, capture_output=True,
                           text=True, timeout=120)
    assert sdist.returncode == 0, sdist.stderr[-3000:]
    version = re.search(r"project\(addnorm VERSION ([0-9.]+)",
                        (REPO_ROOT / "CMakeLists.txt").read_text())[1]
    tarball = dist / f"addnorm-{version}.tar.gz"
    with tarfile.open(tarball) as archive:
        prefix = f"addnorm-{version}/"
        packed = {m.name[len(prefix):] for m in archive.getmembers() if m.isfile()}
    missing = source_files() - packed
    assert not missing, f"the sdist lacks {sorted(missing)[:20]}"
    assert {"MANIFEST.in", "PKG-INFO", "python/addnorm/py.typed"} <= packed

    venv = tmp_path / "venv"
    # --without-pip: the venv's `python -m pip` is then Debian's pip, seen through
    # --system-site-packages, and installs into the venv all the same. Seeding the venv with its
    # own pip (ensurepip) only adds 5-30 s; the README's `.venv/bin/pip install .` is that path.
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, timeout=120)
    modules = prebuilt_modules()
    if modules is not None:
        environment["ADDNORM_PREBUILT_EXTENSION"] = str(modules)
    # `pip wheel` of the sdist, offline, then `pip install` of that wheel: the two steps a user
    # or a packager takes, each checked.
    wheels = tmp_path / "wheels"
    wheel = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "wheel", "--no-index",
                            "--no-deps", "--no-build-isolation", "-w", str(wheels), str(tarball)],
                           cwd=tmp_path, env=environment, capture_output=True, text=True,
                           timeout=1800)
    assert wheel.returncode == 0, wheel.stdout[-3000:] + wheel.stderr[-3000:]
    built = sorted(wheels.glob(f"addnorm-{version}-*.whl"))
    assert len(built) == 1, f"expected one addnorm wheel in {sorted(wheels.iterdir())}"
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index",
                              str(built[0])], cwd=tmp_path, env=environment,
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    assert f"Successfully installed addnorm-{version}" in install.stdout

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    check = ("import addnorm, addnorm.torch, numpy as np, torch\n"
             "print(addnorm.__file__)\n"
             "y = addnorm.layer_norm(np.array([2, 4, 6, 8], np.float32), 4)\n"
             "print(' '.join(f'{v:.4f}' for v in y))\n"
             "print(type(addnorm.torch.patch(torch.nn.LayerNorm(4))).__name__)\n")
    result = subprocess.run([str(venv / "bin" / "python"), "-c", check], cwd=outside,
                            env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    location, values, patched = result.stdout.split("\n")[:3]
    assert Path(location).is_relative_to(venv), location
    assert values == "-1.3416 -0.4472 0.4472 1.3416"
    assert patched == "LayerNorm"

    installed = Path(location).parent
    assert {"py.typed", "__init__.pyi", "torch.pyi"} <= {p.name for p in installed.iterdir()}
    if modules is not None:  # every extension module of the build went into the package
        assert {p.name for p in modules.glob("*.so")} == {p.name for p in installed.glob("*.so")}

    report = subprocess.run([str(venv / "bin" / "python"), "-m", "addnorm"], cwd=outside,
                            env=environment, capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    lines = report.stdout.splitlines()
    assert lines[0] == f"addnorm {version} ({installed})"
    # The report's other lines are checked in detail by test_packaging.py.
    assert lines[1].startswith("SIMD target: ") and f"PyTorch: {torch.__version__}" in lines

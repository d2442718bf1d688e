"""`pip install .` into a fresh `python3 -m venv --system-site-packages` works offline, and
`import addnorm` then works from outside the repository.

The install runs from a copy of the sources pip needs (so the checkout is left untouched) with
--no-index (nothing may be downloaded; plain `pip install .` behaves the same, it just never
needs the index). Compiling the extension from scratch takes about half a minute on 2 cores, so
by default the test hands setup.py the module the CMake build already made
(ADDNORM_PREBUILT_EXTENSION, the documented shortcut); everything else — the venv, pip's build
through setup.py without build isolation, the wheel, the import — is real. Set
ADDNORM_PIP_TEST_COMPILE=1 to make it compile through CMake as a user's install does.
"""
import os
import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["setup.py", "CMakeLists.txt", "include", "src", "python"]


def prebuilt_module():
    if os.environ.get("ADDNORM_PIP_TEST_COMPILE") == "1":
        return None
    build = Path(os.environ.get("ADDNORM_BUILD_DIR", REPO_ROOT / "build")).resolve()
    modules = sorted((build / "python" / "addnorm").glob("_addnorm*.so"))
    return modules[0] if modules else None


def test_pip_install_into_a_fresh_venv(tmp_path):
    source = tmp_path / "addnorm-source"
    source.mkdir()
    for name in SOURCES:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, source / name)
    venv = tmp_path / "venv"
    # --without-pip: the venv's `python -m pip` is then Debian's pip, seen through
    # --system-site-packages, and installs into the venv all the same. Seeding the venv with its
    # own pip (ensurepip) only adds 5-30 s; the README's `.venv/bin/pip install .` is that path.
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, timeout=120)
    # Nothing but the venv and Debian's packages: no PYTHONPATH, no extra wheel sources.
    hidden = ("PYTHONPATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")
    environment = {k: v for k, v in os.environ.items() if k not in hidden}
    environment["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    module = prebuilt_module()
    if module is not None:
        environment["ADDNORM_PREBUILT_EXTENSION"] = str(module)
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index",
                              "."],
                             cwd=source, env=environment, capture_output=True, text=True,
                             timeout=600)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    assert "Successfully installed addnorm" in install.stdout

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

"""`pip install .`: the addnorm Python package, its compiled module built by the project's CMake.

Works offline with Debian's pip, setuptools and wheel: there is deliberately no pyproject.toml
with build requirements, so pip builds in the current environment (no isolated build
environment that would try to download setuptools). In a virtual environment, create it with
--system-site-packages so that Debian's NumPy, PyTorch, setuptools and wheel are visible:

    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install .

The extension is compiled by CMake (the same python/CMakeLists.txt as the main build) into
build-pip/, which is kept, so a second install only relinks what changed. To skip the compile,
point ADDNORM_PREBUILT_EXTENSION at an _addnorm*.so already built for the same Python (for
example <build>/python/addnorm/_addnorm.cpython-311-x86_64-linux-gnu.so); it is copied as is.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PIP_BUILD = ROOT / "build-pip"


class CMakeExtension(Extension):
    """The compiled module, whose sources CMake knows (python/CMakeLists.txt)."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        prebuilt = os.environ.get("ADDNORM_PREBUILT_EXTENSION")
        built = Path(prebuilt) if prebuilt else self._cmake_build()
        if not built.is_file():
            raise RuntimeError(f"ADDNORM_PREBUILT_EXTENSION is {built}, expected a built "
                               "_addnorm module file")
        shutil.copyfile(built, target)

    def _cmake_build(self):
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("cmake was not found, expected Debian's cmake on PATH "
                               "(bash scripts/install-deps.sh installs it)")
        build_dir = PIP_BUILD / "cmake"
        configure = [cmake, "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                     "-DADDNORM_BUILD_TESTS=OFF", "-DADDNORM_BUILD_PYTHON=ON",
                     "-DADDNORM_BUILD_BENCH=OFF", f"-DPYTHON_EXECUTABLE={sys.executable}"]
        jobs = str(max(1, os.cpu_count() or 1))
        subprocess.run(configure, check=True)
        subprocess.run([cmake, "--build", str(build_dir), "--target", "addnorm_python",
                        "-j", jobs], check=True)
        modules = sorted((build_dir / "python" / "addnorm").glob("_addnorm*.so"))
        if not modules:
            raise RuntimeError(f"CMake built no _addnorm module under {build_dir}")
        return modules[0]


PIP_BUILD.mkdir(exist_ok=True)
setup(
    name="addnorm",
    version="0.1.0",
    description="The transformer's Add & Norm box: LayerNorm, RMSNorm, BatchNorm, residual "
                "add and dropout, forward and backward, for NumPy and PyTorch",
    python_requires=">=3.9",
    install_requires=["numpy"],
    package_dir={"": "python"},
    packages=["addnorm"],
    ext_modules=[CMakeExtension("addnorm._addnorm")],
    cmdclass={"build_ext": CMakeBuild},
    # Keep setuptools' own build output out of the CMake build folder build/.
    options={"build": {"build_base": str(PIP_BUILD)},
             "egg_info": {"egg_base": str(PIP_BUILD)}},
    zip_safe=False,
)

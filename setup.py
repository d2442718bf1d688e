"""`pip install .`: the addnorm Python package, its compiled module built by the project's CMake.

Works offline with Debian's pip, setuptools and wheel: there is deliberately no pyproject.toml
with build requirements, so pip builds in the current environment (no isolated build
environment that would try to download setuptools). In a virtual environment, create it with
--system-site-packages so that Debian's NumPy, PyTorch, setuptools and wheel are visible:

    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install .

The extension modules are compiled by CMake (the same python/CMakeLists.txt as the main build)
into build-pip/, which is kept, so a second install only relinks what changed. Every extension
module that build puts in python/addnorm/ (addnorm._addnorm, and any other *.so built there, such
as a PyTorch operator library) goes into the package. To skip the compile, point
ADDNORM_PREBUILT_EXTENSION at modules already built for the same Python: a folder (for example
<build>/python/addnorm), whose every *.so is copied, or one _addnorm*.so file.

The source distribution (`python3 setup.py sdist`, or `python3 -m build --sdist --no-isolation`)
holds what that build needs; MANIFEST.in lists it.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PIP_BUILD = ROOT / "build-pip"


def project_version():
    """The version in CMakeLists.txt's project() call: the one definition, which the compiled
    module also reports as addnorm.__version__."""
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(addnorm\s+VERSION\s+([0-9.]+)", text)
    if match is None:
        raise RuntimeError("CMakeLists.txt has no project(addnorm VERSION x.y.z), expected one")
    return match.group(1)


class CMakeExtension(Extension):
    """The compiled module, whose sources CMake knows (python/CMakeLists.txt)."""

    def __init__(self, name):
        super().__init__(name, sources=[])


def extension_modules(folder):
    """The compiled modules in a package folder: every *.so (addnorm._addnorm and the rest)."""
    return sorted(Path(folder).glob("*.so"))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        prebuilt = os.environ.get("ADDNORM_PREBUILT_EXTENSION")
        built = self._prebuilt(Path(prebuilt)) if prebuilt else self._cmake_build()
        main = [path for path in built if path.name.startswith("_addnorm.")]
        if len(main) != 1:
            raise RuntimeError(f"expected one _addnorm module among {[str(p) for p in built]}")
        for path in built:
            shutil.copyfile(path, target if path in main else target.parent / path.name)

    @staticmethod
    def _prebuilt(path):
        if path.is_dir():
            return extension_modules(path)
        if not path.is_file():
            raise RuntimeError(f"ADDNORM_PREBUILT_EXTENSION is {path}, expected a built "
                               "_addnorm module file or the folder holding it")
        return [path]

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
        # addnorm_python_package: every extension module of the package (python/CMakeLists.txt).
        subprocess.run([cmake, "--build", str(build_dir), "--target", "addnorm_python_package",
                        "-j", jobs], check=True)
        modules = extension_modules(build_dir / "python" / "addnorm")
        if not modules:
            raise RuntimeError(f"CMake built no extension module under {build_dir}")
        return modules


PIP_BUILD.mkdir(exist_ok=True)
setup(
    name="addnorm",
    version=project_version(),
    description="The transformer's Add & Norm box: LayerNorm, RMSNorm, BatchNorm, residual "
                "add and dropout, forward and backward, for NumPy and PyTorch",
    python_requires=">=3.9",
    install_requires=["numpy"],
    package_dir={"": "python"},
    packages=["addnorm"],
    # Type information: the .pyi stubs and the PEP 561 marker beside the modules.
    package_data={"addnorm": ["py.typed", "*.pyi"]},
    ext_modules=[CMakeExtension("addnorm._addnorm")],
    cmdclass={"build_ext": CMakeBuild},
    # Keep setuptools' own build output out of the CMake build folder build/.
    options={"build": {"build_base": str(PIP_BUILD)},
             "egg_info": {"egg_base": str(PIP_BUILD)}},
    zip_safe=False,
)

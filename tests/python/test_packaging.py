"""What the package says about itself: the type stubs describe the functions that exist, with
their parameters, and `python -m addnorm` reports the version, the SIMD target and what is
available truthfully (checked against CMakeLists.txt, /proc/cpuinfo and torch itself)."""
import ast
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import addnorm
import addnorm.torch
from addnorm._torch_dtypes import SUPPORTED_DTYPES

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(addnorm.__file__).parent


def stub_functions(module):
    """{name: [ast.FunctionDef, ...]} for the top-level functions and class methods of the
    module's .pyi (an overloaded function has several), and the set of every name it defines."""
    tree = ast.parse(Path(module.__file__).with_suffix(".pyi").read_text())
    functions, names = {}, set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    functions.setdefault(f"{node.name}.{item.name}", []).append(item)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            names.add(target.id)
            continue
        else:
            continue
        names.add(node.name)
    return functions, names


def stub_parameters(definitions):
    """{parameter name: has a default} over every overload of one function, in order."""
    parameters = {}
    for definition in definitions:
        arguments = definition.args
        positional = arguments.posonlyargs + arguments.args
        defaults = [None] * (len(positional) - len(arguments.defaults)) + arguments.defaults
        pairs = list(zip(positional, defaults)) + list(zip(arguments.kwonlyargs,
                                                           arguments.kw_defaults))
        for argument, default in pairs:
            parameters[argument.arg] = parameters.get(argument.arg, False) or default is not None
    return parameters


def runtime_parameters(function):
    return {name: parameter.default is not inspect.Parameter.empty
            for name, parameter in inspect.signature(function).parameters.items()}


def lookup(module, dotted):
    value = module
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("module", [addnorm, addnorm.torch], ids=lambda m: m.__name__)
def test_stubs_match_the_runtime(module):
    functions, names = stub_functions(module)
    # Every public name has a stub; the stub invents none.
    assert set(module.__all__) <= names
    for name in functions:
        lookup(module, name)  # AttributeError if the stub describes something missing
    for name, definitions in functions.items():
        runtime = lookup(module, name)
        if inspect.isbuiltin(runtime):  # a pybind11 function: no signature to compare
            continue
        assert list(stub_parameters(definitions).items()) == \
            list(runtime_parameters(runtime).items()), name
    assert (PACKAGE / "py.typed").is_file()


def test_version_is_the_projects():
    cmake = (REPO_ROOT / "CMakeLists.txt").read_text()
    assert addnorm.__version__ == re.search(r"project\(addnorm VERSION ([0-9.]+)", cmake)[1]


def expected_target_family():
    """The Highway target family this CPU should get, from its flags in /proc/cpuinfo."""
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "AVX3"
    if {"avx2", "fma", "bmi2"} <= flags:
        return "AVX2"
    return None


def run_report():
    """`python -m addnorm`'s lines, for the package these tests import."""
    environment = dict(os.environ, PYTHONPATH=str(PACKAGE.parent))
    result = subprocess.run([sys.executable, "-m", "addnorm"], capture_output=True, text=True,
                            timeout=120, env=environment, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="needs Linux's /proc/cpuinfo")
def test_python_m_addnorm_reports_what_is_installed():
    first, *rest = run_report()
    lines = dict(line.split(": ", 1) for line in rest)
    assert first == f"addnorm {addnorm.__version__} ({PACKAGE})"
    target = lines["SIMD target"].split(" (")[0]
    supported = lines["SIMD target"].split("supported here: ")[1].rstrip(")").split(", ")
    assert target == supported[0] == addnorm.simd_target()
    family = expected_target_family()
    if family is not None:
        assert target.startswith(family), (target, family)
    assert lines["NumPy dtypes"] == "float32, float64"
    assert lines["PyTorch"] == torch.__version__
    assert lines["addnorm.torch dtypes"] == ", ".join(
        str(d).replace("torch.", "") for d in SUPPORTED_DTYPES)
    sixteen = [n for n in ("bfloat16", "float16") if getattr(torch, n) in SUPPORTED_DTYPES]
    assert lines["16-bit tensors"] == (", ".join(sixteen) if sixteen else "no")
    operators = lines["torch.ops.addnorm"]
    if operators == "none registered":
        assert not hasattr(torch.ops.addnorm, "layer_norm")
    else:
        for name in operators.split(", "):
            assert callable(getattr(torch.ops.addnorm, name))


def test_python_m_addnorm_without_pytorch():
    # sys.modules["torch"] = None makes `import torch` raise ImportError, as on a machine
    # without PyTorch; the NumPy half still reports.
    script = ("import runpy, sys\n"
              "sys.modules['torch'] = None\n"
              "runpy.run_module('addnorm', run_name='__main__')\n")
    environment = dict(os.environ, PYTHONPATH=str(PACKAGE.parent))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, env=environment, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"addnorm {addnorm.__version__} ")
    assert lines[-1] == "PyTorch: not installed (addnorm.torch needs it)"


def test_a_saved_model_loads_without_addnorm_from_the_reported_library(tmp_path):
    lines = dict(line.split(": ", 1) for line in run_report()[1:])
    library = lines["torch.ops library"].split(" (")[0]
    assert Path(library).is_file()
    import addnorm.torch as an
    model = torch.jit.script(torch.nn.Sequential(an.LayerNorm(8), an.GroupNorm(2, 4)))
    path = tmp_path / "model.pt"
    model.save(str(path))
    x = torch.randn(3, 4, 8)
    expected = model(x)
    torch.save(x, str(tmp_path / "x.pt"))
    # A fresh process that never imports addnorm: PyTorch alone cannot run the model...
    load = ("import sys, torch\n"
            "x = torch.load(sys.argv[2])\n"
            "if len(sys.argv) > 3: torch.ops.load_library(sys.argv[3])\n"
            "y = torch.jit.load(sys.argv[1])(x)\n"
            "torch.save(y, sys.argv[2] + '.out')\n")
    without = subprocess.run([sys.executable, "-c", load, str(path), str(tmp_path / "x.pt")],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert without.returncode != 0 and "addnorm::" in without.stderr
    # ...and runs it, with the same result, once the reported library is loaded.
    loaded = subprocess.run([sys.executable, "-c", load, str(path), str(tmp_path / "x.pt"),
                             library], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    assert torch.equal(torch.load(str(tmp_path / "x.pt.out")), expected)

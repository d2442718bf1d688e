"""`python -m addnorm`: what is installed — the version, the SIMD target the kernels run on,
and what is available (dtypes of the NumPy functions, PyTorch, torch.ops.addnorm, 16-bit).
`python -m addnorm diagnose module:factory`: the lab's measurements on a user's model
(_diagnose_cli.py)."""
import sys
from pathlib import Path

import addnorm

from . import _checks

SIXTEEN_BIT = ("bfloat16", "float16")


def _dtype_names(dtypes):
    return ", ".join(str(dtype).replace("torch.", "") for dtype in dtypes)


def _torch_lines():
    """The PyTorch part of the report: addnorm.torch's dtypes and the registered operators."""
    try:
        import torch
    except ImportError:
        return ["PyTorch: not installed (addnorm.torch needs it)"]
    lines = [f"PyTorch: {torch.__version__}"]
    try:
        import addnorm.torch  # noqa: F401 - loads the torch operators, when built
        from ._torch_dtypes import SUPPORTED_DTYPES
        from ._torch_library import LIBRARY
    except Exception as error:  # noqa: BLE001 - report why addnorm.torch does not import
        return lines + [f"addnorm.torch: fails to import ({type(error).__name__}: {error})"]
    operators = sorted(schema.name.split("::", 1)[1] for schema in torch._C._jit_get_all_schemas()
                       if schema.name.startswith("addnorm::"))
    names = {str(dtype).replace("torch.", "") for dtype in SUPPORTED_DTYPES}
    sixteen = [name for name in SIXTEEN_BIT if name in names]
    lines += [f"addnorm.torch dtypes: {_dtype_names(SUPPORTED_DTYPES)}",
              "torch.ops.addnorm: " + (", ".join(operators) if operators else "none registered"),
              "16-bit tensors: " + (", ".join(sixteen) if sixteen else "no"),
              # A saved TorchScript model that uses the operators loads in a process without
              # addnorm once this library is loaded.
              f"torch.ops library: {LIBRARY} (to load saved models without addnorm: "
              "torch.ops.load_library(path))"]
    return lines


def report():
    """The report's lines."""
    targets = addnorm.simd_targets()
    return [f"addnorm {addnorm.__version__} ({Path(addnorm.__file__).parent})",
            f"SIMD target: {addnorm.simd_target()} (supported here: {', '.join(targets)})",
            f"NumPy dtypes: {_dtype_names(_checks.FLOAT_DTYPES)}"] + _torch_lines()


if __name__ == "__main__":
    if sys.argv[1:2] == ["diagnose"]:
        from ._diagnose_cli import main
        sys.exit(main(sys.argv[2:]))
    print("\n".join(report()))

"""Loads addnorm's PyTorch operators (torch.ops.addnorm.*) from _addnorm_torch_ops.so, the C++
extension beside this file, and registers their ONNX symbolics. Imported by addnorm.torch."""
from pathlib import Path

import torch

LIBRARY = Path(__file__).with_name("_addnorm_torch_ops.so")


def _load():
    if not LIBRARY.is_file():
        raise ImportError(
            f"{LIBRARY} is missing, expected addnorm's PyTorch operators there: build addnorm "
            "with libtorch installed (Debian's libtorch-dev; CMake option "
            "ADDNORM_BUILD_TORCH_OPS=ON)")
    torch.ops.load_library(str(LIBRARY))


_load()

from . import _torch_onnx  # noqa: E402  (the symbolics name the operators just loaded)

_torch_onnx.register()

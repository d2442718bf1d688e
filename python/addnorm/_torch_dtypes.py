"""The torch dtypes addnorm.torch's functions and modules compute in: the one list that patch()
checks a model against before it changes anything, and that `python -m addnorm` reports.

Every one of them runs through the torch.ops.addnorm operators (python/torch_ext/): float32 and
the 16-bit types on the library's kernels, float64 on its reference kernels.
"""
import torch

SUPPORTED_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def describe(dtypes=SUPPORTED_DTYPES):
    """'torch.float32 or torch.float64': the dtypes as an error message names them."""
    names = [str(dtype) for dtype in dtypes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]

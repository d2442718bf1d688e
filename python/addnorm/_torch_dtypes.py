"""The torch dtypes addnorm.torch's functions and modules compute in: the one list that patch()
checks a model against before it changes anything, and that `python -m addnorm` reports.

Adding a dtype here (bfloat16, float16) is the single change that lets patch() accept models of
that dtype, so add one only together with the ops that run it.
"""
import torch

SUPPORTED_DTYPES = (torch.float32, torch.float64)


def describe(dtypes=SUPPORTED_DTYPES):
    """'torch.float32 or torch.float64': the dtypes as an error message names them."""
    names = [str(dtype) for dtype in dtypes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]

"""addnorm for PyTorch, without compiling against libtorch: autograd functions, drop-in
nn.Modules and patch().

    import addnorm.torch
    model = addnorm.torch.patch(model)       # every nn.LayerNorm (and RMSNorm) -> addnorm's
    model = addnorm.torch.unpatch(model)     # and back to torch's, same parameter objects

Modules: LayerNorm, BatchNorm1d, BatchNorm2d (subclasses of torch.nn's, so the same constructor
arguments, parameters, buffers and state_dict keys), RMSNorm (torch.nn.RMSNorm's interface),
AddNorm (fused residual add + norm, pre-norm or post-norm, with dropout). Functions: layer_norm,
rms_norm, batch_norm, dropout, add_norm_pre, add_norm_post (differentiable,
torch.nn.functional's arguments), and the torch.autograd.Function classes behind them.

Tensors must be CPU float32 or float64 (float64 lets torch.autograd.gradcheck run); they go to
the kernels without a copy when contiguous, and are made contiguous (copied) otherwise.
"""
from ._torch_functions import (AddNormPostFunction, AddNormPreFunction, BatchNormFunction,
                               DropoutFunction, LayerNormFunction, RMSNormFunction, add_norm_post,
                               add_norm_pre, batch_norm, dropout, layer_norm, rms_norm)
from ._torch_batch_norm2d import BatchNorm2d
from ._torch_modules import AddNorm, BatchNorm1d, LayerNorm, RMSNorm
from ._torch_patch import patch, unpatch

__all__ = [
    "AddNorm", "AddNormPostFunction", "AddNormPreFunction", "BatchNorm1d", "BatchNorm2d",
    "BatchNormFunction", "DropoutFunction", "LayerNorm", "LayerNormFunction", "RMSNorm",
    "RMSNormFunction", "add_norm_post", "add_norm_pre", "batch_norm", "dropout", "layer_norm",
    "patch", "rms_norm", "unpatch",
]

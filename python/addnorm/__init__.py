"""addnorm: the transformer's Add & Norm box (residual add, LayerNorm, RMSNorm, BatchNorm,
GroupNorm, dropout, fused pre-/post-norm Add & Norm), forward and backward, within a few ulp of
float64.

Functions take NumPy arrays and mirror torch.nn.functional's names and arguments:

    layer_norm, layer_norm_backward, rms_norm, rms_norm_backward, batch_norm,
    batch_norm_backward, group_norm, group_norm_backward, instance_norm, add, dropout, dropout_backward, dropout_mask, add_norm_pre,
    add_norm_pre_backward, add_norm_post, add_norm_post_backward

Arrays: float32 (addnorm's kernels) or float64 (its reference kernels, e.g. for gradient
checks); every array of one call has x's dtype. Arrays must be C-contiguous and are used in
place, without a copy: a strided array raises ValueError (numpy.ascontiguousarray makes a
contiguous copy when you want one). Results are new arrays; batch_norm in training updates
running_mean and running_var in place, as PyTorch does. The GIL is released while a kernel runs.
A wrong type or dtype raises TypeError, a wrong shape, layout or value ValueError; the message
names the argument and what was expected.

PyTorch modules and autograd functions are in addnorm.torch (imported on demand).
simd_target() names the SIMD instruction set the kernels run on (simd_targets(): every one this
CPU supports, best first); `python -m addnorm` prints it with the version and what is available.

>>> import numpy as np, addnorm
>>> print(addnorm.layer_norm(np.array([2, 4, 6, 8], np.float32), 4).round(4))
[-1.3416 -0.4472  0.4472  1.3416]
"""
from ._addnorm import __version__, simd_target, simd_targets  # noqa: F401 (__version__)
from ._batch_norm import batch_norm, batch_norm_backward
from ._group_norm import group_norm, group_norm_backward, instance_norm
from ._norms import layer_norm, layer_norm_backward, rms_norm, rms_norm_backward
from ._residual import (add, add_norm_post, add_norm_post_backward, add_norm_pre,
                        add_norm_pre_backward, dropout, dropout_backward, dropout_mask)

__all__ = [
    "add", "add_norm_post", "add_norm_post_backward", "add_norm_pre", "add_norm_pre_backward",
    "batch_norm", "batch_norm_backward", "dropout", "dropout_backward", "dropout_mask",
    "group_norm", "group_norm_backward", "instance_norm",
    "layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward", "simd_target",
    "simd_targets",
]

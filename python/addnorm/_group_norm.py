"""GroupNorm and InstanceNorm on NumPy arrays, forward and backward (torch.nn.functional's
names and semantics)."""
import numbers

import numpy as np

from . import _addnorm
from . import _checks as check


def _check(x, num_groups, weight, bias, eps):
    """The checks the forward and the backward share: the arrays, num_groups and eps."""
    x = check.tensor("x", x)
    if x.ndim < 2:
        raise ValueError(f"x has shape {check.format_shape(x.shape)}, expected (N, C, *) with "
                         "channels on axis 1")
    if isinstance(num_groups, bool) or not isinstance(num_groups, numbers.Integral):
        raise TypeError(f"num_groups is a {type(num_groups).__name__}, expected an int")
    if num_groups < 1 or x.shape[1] % num_groups:
        raise ValueError(f"num_groups is {num_groups}, expected a divisor of the {x.shape[1]} "
                         f"channels of x (axis 1 of {check.format_shape(x.shape)})")
    weight = check.optional_tensor("weight", weight, x)
    bias = check.optional_tensor("bias", bias, x)
    check.same_shape("weight", weight, (x.shape[1],))
    check.same_shape("bias", bias, (x.shape[1],))
    return x, int(num_groups), weight, bias, check.eps(eps, "group_norm")


def group_norm(x, num_groups, weight=None, bias=None, eps=None, return_stats=False):
    """GroupNorm over x shaped (N, C, *), like torch.nn.functional.group_norm: the C channels
    form num_groups groups of consecutive channels, each sample's group is normalised over its
    channels and positions (population variance, eps inside the root), then weight and bias,
    shape (C,), scale and shift each channel. eps=None is GroupNorm's default, 1e-5 (PyTorch's
    and ONNX's).

    Returns y, or (y, mean, rstd) with return_stats=True, mean and rstd shaped (N, num_groups).

    >>> import numpy as np, addnorm
    >>> x = np.array([[[1, 3], [10, 30]]], np.float32)
    >>> print(addnorm.group_norm(x, 2).round(4))
    [[[-1.  1.]
      [-1.  1.]]]
    """
    x, num_groups, weight, bias, eps = _check(x, num_groups, weight, bias, eps)
    y = np.empty_like(x)
    stats = (x.shape[0], num_groups)
    return_stats = check.flag("return_stats", return_stats)
    mean = np.empty(stats, x.dtype) if return_stats else None
    rstd = np.empty(stats, x.dtype) if return_stats else None
    _addnorm.group_norm(x, num_groups, weight, bias, y, mean, rstd, eps)
    return (y, mean, rstd) if return_stats else y


def group_norm_backward(dy, x, num_groups, weight=None, bias=None, eps=None):
    """Gradients of group_norm: (dx, dweight, dbias); dweight (dbias) is None when weight
    (bias) is. dweight and dbias are summed over samples in a fixed order, so they are the same
    bits for any thread count."""
    x, num_groups, weight, bias, eps = _check(x, num_groups, weight, bias, eps)
    dy = check.tensor("dy", dy, x)
    check.same_shape("dy", dy, x.shape)
    dx = np.empty_like(x)
    dweight = None if weight is None else np.empty_like(weight)
    dbias = None if bias is None else np.empty_like(bias)
    _addnorm.group_norm_backward(dy, x, num_groups, weight, bias, dx, dweight, dbias, eps)
    return dx, dweight, dbias


def instance_norm(x, weight=None, bias=None, eps=None):
    """InstanceNorm without running statistics, like torch.nn.functional.instance_norm with
    use_input_stats=True: GroupNorm with one channel per group."""
    x = check.tensor("x", x)
    return group_norm(x, x.shape[1] if x.ndim >= 2 else 1, weight, bias, eps)

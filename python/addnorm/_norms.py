"""LayerNorm and RMSNorm on NumPy arrays, forward and backward (torch.nn.functional's names)."""
import numpy as np

from . import _addnorm
from . import _checks as check


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=None, return_stats=False):
    """LayerNorm over the trailing dims named by normalized_shape, like
    torch.nn.functional.layer_norm.

    y = (x - mean) / sqrt(var + eps) * weight + bias, with the population variance (divided by
    D = prod(normalized_shape), never D - 1) and eps inside the root. weight and bias (called
    gamma and beta in the C++ API) are optional and have shape normalized_shape.

    x: float32 or float64 C-contiguous ndarray; weight and bias must have x's dtype. float32
    runs addnorm's kernels (float64 accumulation, one rounding); float64 runs the reference
    kernels (long double accumulation). The GIL is released while the kernel runs.

    Returns y (a new array of x's dtype), or (y, mean, rstd) with return_stats=True, where mean
    and rstd = 1 / sqrt(var + eps) have shape x.shape[:-len(normalized_shape)].

    Raises TypeError for a non-ndarray or a wrong dtype, ValueError for a wrong shape, a strided
    (non-C-contiguous) array (it is rejected, not copied) or an eps that is not finite (a
    negative one is taken, as PyTorch takes it; rows whose variance + eps < 0 come out NaN).

    >>> import numpy as np, addnorm
    >>> x = np.array([[2, 4, 6, 8]], dtype=np.float32)
    >>> print(addnorm.layer_norm(x, 4).round(4))
    [[-1.3416 -0.4472  0.4472  1.3416]]
    >>> y, mean, rstd = addnorm.layer_norm(x, (4,), weight=np.full(4, 2, np.float32),
    ...                                    bias=np.ones(4, np.float32), return_stats=True)
    >>> print(y.round(4), mean, rstd.round(6))
    [[-1.6833  0.1056  1.8944  3.6833]] [5.] [0.447213]
    """
    x = check.tensor("x", x)
    dims = check.normalized_shape(normalized_shape)
    rows = check.trailing(x, dims)
    weight = check.optional_tensor("weight", weight, x)
    bias = check.optional_tensor("bias", bias, x)
    check.same_shape("weight", weight, dims)
    check.same_shape("bias", bias, dims)
    eps = check.eps(eps)
    y = np.empty_like(x)
    return_stats = check.flag("return_stats", return_stats)
    mean = np.empty(rows, x.dtype) if return_stats else None
    rstd = np.empty(rows, x.dtype) if return_stats else None
    _addnorm.layer_norm(x, list(dims), weight, bias, y, mean, rstd, eps)
    return (y, mean, rstd) if return_stats else y


def layer_norm_backward(dy, x, normalized_shape, weight=None, bias=None, eps=None):
    """Gradients of layer_norm: returns (dx, dweight, dbias).

    dy is the gradient of the loss with respect to layer_norm's output y; x, normalized_shape,
    weight, bias and eps are the forward's arguments. dweight (dbias) is None when weight
    (bias) is None. The statistics are recomputed from x in float64, centred values first:

        dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)),  g = dy * weight
        dweight = sum over rows of dy * x_hat,  dbias = sum over rows of dy

    >>> import numpy as np, addnorm
    >>> x = np.array([[2, 4, 6, 8]], dtype=np.float64)
    >>> dx, dweight, dbias = addnorm.layer_norm_backward(
    ...     np.array([[1.0, 0, 0, 0]]), x, 4, weight=np.ones(4), bias=np.zeros(4))
    >>> print(dx.round(4), dweight.round(4), dbias)
    [[ 0.1342 -0.1789 -0.0447  0.0894]] [-1.3416  0.      0.      0.    ] [1. 0. 0. 0.]
    """
    x = check.tensor("x", x)
    dy = check.tensor("dy", dy, x)
    check.same_shape("dy", dy, x.shape)
    dims = check.normalized_shape(normalized_shape)
    check.trailing(x, dims)
    weight = check.optional_tensor("weight", weight, x)
    bias = check.optional_tensor("bias", bias, x)
    check.same_shape("weight", weight, dims)
    check.same_shape("bias", bias, dims)
    eps = check.eps(eps)
    dx = np.empty_like(x)
    dweight = None if weight is None else np.empty_like(weight)
    dbias = None if bias is None else np.empty_like(bias)
    _addnorm.layer_norm_backward(dy, x, list(dims), weight, bias, dx, dweight, dbias, eps)
    return dx, dweight, dbias


def rms_norm(x, normalized_shape, weight=None, eps=None, zero_centered_weight=False,
             return_stats=False):
    """RMSNorm over the trailing dims named by normalized_shape (torch.nn.functional.rms_norm's
    argument order, PyTorch >= 2.4).

    y = x / sqrt(mean(x**2) + eps) * weight, or * (1 + weight) with zero_centered_weight (so a
    zero weight is the identity). No mean is subtracted and there is no bias. eps=None is
    RMSNorm's default, 1e-6, the same for every RMSNorm of this module (rms_norm,
    add_norm_pre and add_norm_post with norm="rms_norm"); addnorm.torch follows PyTorch instead
    (the dtype's machine epsilon).

    Returns y, or (y, rstd) with return_stats=True; rstd = 1 / sqrt(mean(x**2) + eps) has shape
    x.shape[:-len(normalized_shape)]. Dtypes, layout and errors as for layer_norm.

    >>> import numpy as np, addnorm
    >>> x = np.array([[2, -3, 1, 4]], dtype=np.float32)
    >>> print(addnorm.rms_norm(x, 4, eps=0.0).round(4))
    [[ 0.7303 -1.0954  0.3651  1.4606]]
    """
    x = check.tensor("x", x)
    dims = check.normalized_shape(normalized_shape)
    rows = check.trailing(x, dims)
    weight = check.optional_tensor("weight", weight, x)
    check.same_shape("weight", weight, dims)
    eps = check.eps(eps, "rms_norm")
    y = np.empty_like(x)
    return_stats = check.flag("return_stats", return_stats)
    rstd = np.empty(rows, x.dtype) if return_stats else None
    _addnorm.rms_norm(x, list(dims), weight, check.flag("zero_centered_weight", zero_centered_weight), y, rstd, eps)
    return (y, rstd) if return_stats else y


def rms_norm_backward(dy, x, normalized_shape, weight=None, eps=None,
                      zero_centered_weight=False):
    """Gradients of rms_norm: returns (dx, dweight); dweight is None when weight is None.

        dx = rstd * (g - x_hat * mean(g * x_hat)),  g = dy * scale,  x_hat = x * rstd
        dweight = sum over rows of dy * x_hat   (the same with zero_centered_weight)

    >>> import numpy as np, addnorm
    >>> dx, dweight = addnorm.rms_norm_backward(np.ones((1, 2)), np.array([[3.0, 4.0]]), 2,
    ...                                         eps=0.0)
    >>> print(dx.round(6), dweight)
    [[ 0.045255 -0.033941]] None
    """
    x = check.tensor("x", x)
    dy = check.tensor("dy", dy, x)
    check.same_shape("dy", dy, x.shape)
    dims = check.normalized_shape(normalized_shape)
    check.trailing(x, dims)
    weight = check.optional_tensor("weight", weight, x)
    check.same_shape("weight", weight, dims)
    eps = check.eps(eps, "rms_norm")
    dx = np.empty_like(x)
    dweight = None if weight is None else np.empty_like(weight)
    _addnorm.rms_norm_backward(dy, x, list(dims), weight, check.flag("zero_centered_weight", zero_centered_weight), dx,
                               dweight, eps)
    return dx, dweight

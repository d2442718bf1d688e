"""BatchNorm on NumPy arrays, forward (running statistics updated in place) and backward."""
import numpy as np

from . import _addnorm
from . import _checks as check

CONVENTIONS = ("pytorch", "onnx")


def _check(x, running_mean, running_var, weight, bias, training, eps):
    """The checks the forward and the backward share; returns the arrays, checked."""
    x = check.tensor("x", x)
    if not 2 <= x.ndim <= 5:
        raise ValueError(f"x has shape {check.format_shape(x.shape)}, expected rank 2 to 5: "
                         "(N, C, *) with channels on axis 1")
    channels = (x.shape[1],)
    running_mean = check.optional_tensor("running_mean", running_mean, x)
    running_var = check.optional_tensor("running_var", running_var, x)
    weight = check.optional_tensor("weight", weight, x)
    bias = check.optional_tensor("bias", bias, x)
    for name, value in (("running_mean", running_mean), ("running_var", running_var),
                        ("weight", weight), ("bias", bias)):
        check.same_shape(name, value, channels)
    if (running_mean is None) != (running_var is None):
        raise ValueError("only one of running_mean and running_var was given, expected both "
                         "or neither")
    if not training and running_mean is None:
        raise ValueError("running_mean and running_var are None, expected both in inference "
                         "mode (training=False)")
    return x, running_mean, running_var, weight, bias, check.eps(eps, "batch_norm")


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=None, convention="pytorch", return_stats=False):
    """BatchNorm over channel axis 1 of x shaped (N, C, *), rank 2 to 5, like
    torch.nn.functional.batch_norm.

    training=True normalises each channel with its batch mean and biased variance and, when
    running_mean and running_var are given (shape (C,), x's dtype), updates them IN PLACE:
      convention="pytorch": running = (1 - momentum) * running + momentum * batch, with the
        unbiased batch variance (n / (n - 1)) for running_var;
      convention="onnx": running = momentum * running + (1 - momentum) * batch, biased.
    training=False normalises with the running statistics and changes nothing.

    eps=None is BatchNorm's default, 1e-5 (PyTorch's and ONNX's).

    Returns y, or with return_stats=True in training (y, batch_mean, batch_rstd), each (C,).
    Raises ValueError for a momentum or eps that is not finite (any finite value is taken, as
    PyTorch takes it), a channel with a single value in training, or missing running statistics in inference; dtype and layout errors as in
    layer_norm.

    >>> import numpy as np, addnorm
    >>> x = np.array([[1, 10], [3, 30]], dtype=np.float32)
    >>> mean, var = np.zeros(2, np.float32), np.ones(2, np.float32)
    >>> print(addnorm.batch_norm(x, mean, var, training=True, eps=0.0))
    [[-1. -1.]
     [ 1.  1.]]
    >>> print(mean, var)
    [0.2 2. ] [ 1.1 20.9]
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention is {convention!r}, expected 'pytorch' or 'onnx'")
    training = check.flag("training", training)
    x, running_mean, running_var, weight, bias, eps = _check(x, running_mean, running_var,
                                                             weight, bias, training, eps)
    momentum = check.momentum(momentum)
    return_stats = check.flag("return_stats", return_stats)
    if return_stats and not training:
        raise ValueError("return_stats was set in inference mode, expected it only with "
                         "training=True (inference uses the running statistics)")
    if training and running_mean is not None:
        for name, value in (("running_mean", running_mean), ("running_var", running_var)):
            check.writable(name, value)
    # Overlaps (running_mean sharing memory with running_var, x, weight or bias) are refused by
    # the library's own checks, for float32 and float64 alike.
    y = np.empty_like(x)
    channels = x.shape[1]
    mean = np.empty(channels, x.dtype) if return_stats else None
    rstd = np.empty(channels, x.dtype) if return_stats else None
    _addnorm.batch_norm(x, y, weight, bias, running_mean, running_var, training, momentum, eps,
                        convention == "onnx", mean, rstd)
    return (y, mean, rstd) if return_stats else y


def batch_norm_backward(dy, x, running_mean, running_var, weight=None, bias=None,
                        training=False, eps=None):
    """Gradients of batch_norm: returns (dx, dweight, dbias), None for an absent parameter.

    training=True: the gradient through the batch statistics (recomputed from x; the running
    statistics are not needed and not touched). training=False: the running statistics are
    constants, so dx = dy * weight / sqrt(running_var + eps).

    >>> import numpy as np, addnorm
    >>> x = np.array([[1.0], [3.0]])
    >>> dx, dweight, dbias = addnorm.batch_norm_backward(np.array([[1.0], [0.0]]), x, None,
    ...                                                  None, weight=np.ones(1), training=True,
    ...                                                  eps=0.0)
    >>> print(dx, dweight, dbias)
    [[0.]
     [0.]] [-1.] None
    """
    training = check.flag("training", training)
    x, running_mean, running_var, weight, bias, eps = _check(x, running_mean, running_var,
                                                             weight, bias, training, eps)
    dy = check.tensor("dy", dy, x)
    check.same_shape("dy", dy, x.shape)
    dx = np.empty_like(x)
    dweight = None if weight is None else np.empty_like(weight)
    dbias = None if bias is None else np.empty_like(bias)
    _addnorm.batch_norm_backward(dy, x, dx, dweight, dbias, weight, bias, running_mean,
                                 running_var, training, eps)
    return dx, dweight, dbias

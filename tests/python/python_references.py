"""float64 NumPy references for the Python module's tests: the definitions, written out.

Not a test file; imported by tests/python/test_python_*.py.
"""
import numpy as np


def axes_of(x, dims):
    return tuple(range(x.ndim - len(dims), x.ndim))


def layer_norm(x, dims, weight=None, bias=None, eps=1e-5):
    axes = axes_of(x, dims)
    centred = x - x.mean(axes, keepdims=True)
    rstd = 1.0 / np.sqrt((centred * centred).mean(axes, keepdims=True) + eps)
    y = centred * rstd
    y = y if weight is None else y * weight
    return y if bias is None else y + bias


def layer_norm_backward(dy, x, dims, weight=None, eps=1e-5):
    """dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)); dweight, dbias summed over rows."""
    axes = axes_of(x, dims)
    centred = x - x.mean(axes, keepdims=True)
    rstd = 1.0 / np.sqrt((centred * centred).mean(axes, keepdims=True) + eps)
    x_hat = centred * rstd
    g = dy if weight is None else dy * weight
    dx = rstd * (g - g.mean(axes, keepdims=True) - x_hat * (g * x_hat).mean(axes, keepdims=True))
    rows = tuple(range(x.ndim - len(dims)))
    return dx, (dy * x_hat).sum(rows), dy.sum(rows)


def rms_norm(x, dims, weight=None, eps=1e-6, zero_centered=False):
    axes = axes_of(x, dims)
    y = x / np.sqrt((x * x).mean(axes, keepdims=True) + eps)
    if weight is None:
        return y
    return y * (1.0 + weight if zero_centered else weight)


def rms_norm_backward(dy, x, dims, weight=None, eps=1e-6, zero_centered=False):
    axes = axes_of(x, dims)
    rstd = 1.0 / np.sqrt((x * x).mean(axes, keepdims=True) + eps)
    x_hat = x * rstd
    scale = 1.0 if weight is None else (1.0 + weight if zero_centered else weight)
    g = dy * scale
    dx = rstd * (g - x_hat * (g * x_hat).mean(axes, keepdims=True))
    return dx, (dy * x_hat).sum(tuple(range(x.ndim - len(dims))))


def channel_axes(x):
    return (0,) if x.ndim == 2 else (0, 2)


def channel_shape(x):
    return (1, -1) if x.ndim == 2 else (1, -1, 1)


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5, convention="pytorch"):
    """Returns (y, new_running_mean, new_running_var)."""
    axes, shape = channel_axes(x), channel_shape(x)
    new_mean, new_var = running_mean, running_var
    if training:
        mean = x.mean(axes)
        var = ((x - mean.reshape(shape)) ** 2).mean(axes)
        if running_mean is not None:
            n = x.size // x.shape[1]
            if convention == "pytorch":
                new_mean = (1 - momentum) * running_mean + momentum * mean
                new_var = (1 - momentum) * running_var + momentum * var * n / (n - 1)
            else:
                new_mean = momentum * running_mean + (1 - momentum) * mean
                new_var = momentum * running_var + (1 - momentum) * var
    else:
        mean, var = running_mean, running_var
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y, new_mean, new_var


def dropout(x, mask, p):
    return np.where(mask, x / (1.0 - p), 0.0)

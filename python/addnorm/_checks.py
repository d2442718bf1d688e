"""Argument checks for the NumPy functions: each raises TypeError (wrong type or dtype) or
ValueError (wrong shape, layout or value) with a message naming the argument and what was
expected, before anything is computed or written. The library checks every argument again, for
float32 and float64 alike (so that nothing reaches a kernel unchecked, and memory overlaps are
left to it); these come first because they use the Python names (weight, bias) and see scalars
before they are rounded to float32.
"""
import math
import numbers

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
MAX_RANK = 8
NORMS = ("layer_norm", "rms_norm")


def format_shape(shape):
    """[2, 3, 4], the library's way of writing a shape."""
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def tensor(name, value, like=None):
    """value as a float32/float64 C-contiguous ndarray with no empty dimension.

    like: the array whose dtype value must share (x, usually). No copy is ever made: a strided
    array is rejected rather than silently copied.
    """
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{name} is a {type(value).__name__}, expected a numpy.ndarray "
                        "of float32 or float64")
    if like is None:
        if value.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{name} has dtype {value.dtype}, expected float32 or float64")
    elif value.dtype != like.dtype:
        raise TypeError(f"{name} has dtype {value.dtype}, expected {like.dtype} like the "
                        "input x")
    if value.ndim > MAX_RANK:
        raise ValueError(f"{name} has {value.ndim} dimensions, expected at most {MAX_RANK}")
    if not value.flags.c_contiguous:
        raise ValueError(f"{name} is not C-contiguous (strides {value.strides}), expected a "
                         f"C-contiguous array; addnorm never copies silently: pass "
                         f"numpy.ascontiguousarray({name})")
    if any(d == 0 for d in value.shape):
        raise ValueError(f"{name} has shape {format_shape(value.shape)}, expected every "
                         "dimension to be at least 1")
    return value


def optional_tensor(name, value, like):
    return None if value is None else tensor(name, value, like)


def writable(name, value):
    if not value.flags.writeable:
        raise ValueError(f"{name} is read-only, expected a writable array (it is updated in "
                         "place)")
    return value


def same_shape(name, value, expected):
    if value is not None and tuple(value.shape) != tuple(expected):
        raise ValueError(f"{name} has shape {format_shape(value.shape)}, expected "
                         f"{format_shape(expected)}")


def normalized_shape(value):
    """normalized_shape as a tuple of positive ints (an int means a 1-tuple, as in PyTorch)."""
    if isinstance(value, numbers.Integral):
        dims = (int(value),)
    else:
        try:
            dims = tuple(value)
        except TypeError:
            raise TypeError(f"normalized_shape is a {type(value).__name__}, expected an int or "
                            "a sequence of ints") from None
        if not all(isinstance(d, numbers.Integral) for d in dims):
            raise TypeError(f"normalized_shape is {value!r}, expected an int or a sequence of "
                            "ints")
        dims = tuple(int(d) for d in dims)
    if not dims:
        raise ValueError("normalized_shape is empty, expected at least one dimension")
    if any(d < 1 for d in dims):
        raise ValueError(f"normalized_shape is {format_shape(dims)}, expected every dimension "
                         "to be at least 1")
    return dims


def trailing(x, dims, x_name="x"):
    """The leading (row) dims of x, after checking that its trailing dims are `dims`."""
    if len(dims) > x.ndim or tuple(x.shape[x.ndim - len(dims):]) != dims:
        raise ValueError(f"normalized_shape {format_shape(dims)} does not match the trailing "
                         f"dims of {x_name} {format_shape(x.shape)}")
    return tuple(x.shape[:x.ndim - len(dims)])


def _real(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} is a {type(value).__name__}, expected a float")
    return float(value)


def eps(value, norm="layer_norm"):
    """eps as a float; None is the norm kind's default, defined once in the C++ library
    (norm_traits in addnorm/ops.hpp) for every face and every entry point of that kind."""
    if value is None:
        from . import _addnorm
        return _addnorm.default_eps(norm)
    value = _real("eps", value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"eps is {value!r}, expected a finite value >= 0")
    return value


def momentum(value):
    value = _real("momentum", value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"momentum is {value!r}, expected a value in [0, 1]")
    return value


def probability(value):
    value = _real("p", value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"p is {value!r}, expected a dropout probability in [0, 1)")
    return value


def uint64(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} is a {type(value).__name__}, expected an int")
    if not 0 <= int(value) < 2**64:
        raise ValueError(f"{name} is {value}, expected an int in [0, 2**64)")
    return int(value)


def norm_kind(norm, bias, zero_centered_weight):
    """True for rms_norm, after checking the options that only one norm accepts."""
    if norm not in NORMS:
        raise ValueError(f"norm is {norm!r}, expected 'layer_norm' or 'rms_norm'")
    if norm == "rms_norm" and bias is not None:
        raise ValueError("bias was given for rms_norm, expected no bias (RMSNorm has no shift)")
    if norm == "layer_norm" and zero_centered_weight:
        raise ValueError("zero_centered_weight was set for layer_norm, expected it only with "
                         "rms_norm")
    return norm == "rms_norm"


"""Argument checks for the NumPy functions: each raises TypeError (wrong type or dtype) or
ValueError (wrong shape, layout or value) with a message naming the argument and what was
expected, before anything is computed or written: what the outputs' allocation needs (the arrays,
their dtypes and shapes) and the Python types. The values of the scalar options, the norm's name
and what it accepts, and memory overlaps are the library's to check (its addnorm::Error becomes
TypeError or ValueError, with the Python names, in python/src/module.cpp).
"""
import numbers

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
MAX_RANK = 8


def format_shape(shape):
    """[2, 3, 4], the library's way of writing a shape."""
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def tensor(name, value, like=None):
    """value as a float32/float64 C-contiguous ndarray. It may have no elements (an empty
    batch); what each op then returns is the C++ library's rule (addnorm/ops.hpp).

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


def normalized_shape(value, name="normalized_shape"):
    """normalized_shape (or another shape argument, `name` in errors) as a tuple of ints >= 0
    (an int means a 1-tuple, as in PyTorch)."""
    if isinstance(value, numbers.Integral):
        dims = (int(value),)
    else:
        try:
            dims = tuple(value)
        except TypeError:
            raise TypeError(f"{name} is a {type(value).__name__}, expected an int or "
                            "a sequence of ints") from None
        if not all(isinstance(d, numbers.Integral) for d in dims):
            raise TypeError(f"{name} is {value!r}, expected an int or a sequence of ints")
        dims = tuple(int(d) for d in dims)
    if not dims:
        raise ValueError(f"{name} is empty, expected at least one dimension")
    if any(d < 0 for d in dims):
        raise ValueError(f"{name} is {format_shape(dims)}, expected non-negative dimensions")
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


# The values of eps, momentum and p, and the norm's name, are the library's to check (one rule for
# every face, applied to the double before it is rounded to float32): these only take the Python
# types apart.
def eps(value, norm="layer_norm"):
    """eps as a float; None is the norm op's default, defined once in the C++ library
    (addnorm/norm_kind.hpp: norm_traits for the row norms, then GroupNorm's and BatchNorm's) for
    every face and every entry point of that norm."""
    if value is None:
        from . import _addnorm
        return _addnorm.default_eps(norm_name(norm))
    return _real("eps", value)


def momentum(value):
    return _real("momentum", value)


def probability(value):
    return _real("p", value)


def flag(name, value):
    """A bool argument as a bool: a Python or NumPy bool, not a value that Python would read as
    one ('no' is true), as the other arguments' types are not coerced either."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} is a {type(value).__name__}, expected a bool")
    return bool(value)


def uint64(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} is a {type(value).__name__}, expected an int")
    if not 0 <= int(value) < 2**64:
        raise ValueError(f"{name} is {value}, expected an int in [0, 2**64)")
    return int(value)


def norm_name(norm):
    """The norm's name as a str (which names exist is the library's to say)."""
    if not isinstance(norm, str):
        raise TypeError(f"norm is a {type(norm).__name__}, expected a str such as 'layer_norm'")
    return norm

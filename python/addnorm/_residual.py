"""The residual side on NumPy arrays: add, dropout, and the fused pre-/post-norm Add & Norm."""
import numpy as np

from . import _addnorm
from . import _checks as check


def add(x, r):
    """The residual add, out = x + r (same shape and dtype), one rounding per element.

    >>> import numpy as np, addnorm
    >>> print(addnorm.add(np.ones(3, np.float32), np.arange(3, dtype=np.float32)))
    [1. 2. 3.]
    """
    x = check.tensor("x", x)
    r = check.tensor("r", r, x)
    check.same_shape("r", r, x.shape)
    out = np.empty_like(x)
    _addnorm.add(x, r, out)
    return out


def _dropout_args(p, seed, offset):
    return check.probability(p), check.uint64("seed", seed), check.uint64("offset", offset)


def dropout(x, p=0.5, seed=0, offset=0):
    """Inverted dropout with a counter-based mask: element i is dropped when the Philox4x32-10
    stream keyed by seed, at element offset + i, falls below p; kept values are scaled by
    1 / (1 - p). The same (seed, offset) always gives the same mask, for any thread count, so
    the backward regenerates it instead of storing it.

    >>> import numpy as np, addnorm
    >>> y = addnorm.dropout(np.ones(8, np.float32), p=0.5, seed=7)
    >>> sorted(set(y.tolist()))
    [0.0, 2.0]
    >>> bool((y == 2).sum() == addnorm.dropout_mask((8,), p=0.5, seed=7).sum())
    True
    """
    x = check.tensor("x", x)
    p, seed, offset = _dropout_args(p, seed, offset)
    y = np.empty_like(x)
    _addnorm.dropout(x, y, p, seed, offset)
    return y


def dropout_backward(dy, p=0.5, seed=0, offset=0):
    """Gradient of dropout: dy through the same mask and scale (the forward's p, seed, offset)."""
    dy = check.tensor("dy", dy)
    p, seed, offset = _dropout_args(p, seed, offset)
    dx = np.empty_like(dy)
    _addnorm.dropout(dy, dx, p, seed, offset)
    return dx


def dropout_mask(shape, p=0.5, seed=0, offset=0):
    """The keep mask (a bool array of the given shape) that dropout uses for (p, seed, offset).

    >>> import addnorm
    >>> addnorm.dropout_mask((2, 3), p=0.0).all()
    True
    """
    dims = check.normalized_shape(shape, "shape")
    p, seed, offset = _dropout_args(p, seed, offset)
    _addnorm.element_count(dims, "shape")  # the library's limits, before anything is allocated
    mask = np.empty(dims, np.uint8)
    _addnorm.dropout_mask(mask, p, seed, offset)
    return mask.view(np.bool_)


def _norm_args(x, normalized_shape, weight, bias, eps, norm, zero_centered_weight, x_name="x"):
    """The norm's arguments as the library takes them. The norm's name, and which options it
    accepts (bias only for a norm with a shift, zero_centered_weight only for rms_norm), are the
    library's to check (norm_traits, one rule for every face); eps=None is the kind's default."""
    dims = check.normalized_shape(normalized_shape)
    rows = check.trailing(x, dims, x_name)
    eps = check.eps(eps, norm)
    weight = check.optional_tensor("weight", weight, x)
    bias = check.optional_tensor("bias", bias, x)
    check.same_shape("weight", weight, dims)
    check.same_shape("bias", bias, dims)
    return dims, rows, _addnorm.norm_centres(check.norm_name(norm)), weight, bias, eps


def _stats(rows, centres, dtype, wanted):
    if not wanted:
        return None, None
    return (np.empty(rows, dtype) if centres else None), np.empty(rows, dtype)


def add_norm_pre(x, r, normalized_shape, weight=None, bias=None, eps=None, norm="layer_norm",
                 zero_centered_weight=False, return_stats=False):
    """Pre-norm Add & Norm (GPT-2) in one pass: h = x + r and y = Norm(h).

    h is the residual stream the next block adds to; y is what the next sub-layer reads. norm
    is "layer_norm" (weight, bias) or "rms_norm" (weight only, optionally zero-centred). h is
    rounded to x's dtype before it is normalised, so the result equals add() then the norm
    exactly.

    Returns (h, y), or (h, y, mean, rstd) with return_stats=True (mean is None for rms_norm).

    >>> import numpy as np, addnorm
    >>> x = np.array([[1, 2, 3, 4]], np.float32)
    >>> h, y = addnorm.add_norm_pre(x, x, 4)
    >>> print(h, y.round(4))
    [[2. 4. 6. 8.]] [[-1.3416 -0.4472  0.4472  1.3416]]
    """
    x = check.tensor("x", x)
    r = check.tensor("r", r, x)
    check.same_shape("r", r, x.shape)
    dims, rows, centres, weight, bias, eps = _norm_args(x, normalized_shape, weight, bias, eps, norm,
                                                    zero_centered_weight)
    h, y = np.empty_like(x), np.empty_like(x)
    return_stats = check.flag("return_stats", return_stats)
    mean, rstd = _stats(rows, centres, x.dtype, return_stats)
    _addnorm.add_norm_pre(x, r, list(dims), h, y, norm, weight, bias, check.flag("zero_centered_weight", zero_centered_weight),
                          eps, mean, rstd)
    return (h, y, mean, rstd) if return_stats else (h, y)


def add_norm_pre_backward(dy, dh_next, h, normalized_shape, weight=None, bias=None, eps=None,
                          norm="layer_norm", zero_centered_weight=False):
    """Gradients of add_norm_pre: returns (dh, dweight, dbias).

    h's gradient arrives from two places: dh_next from the next residual (None means zero) and
    dy through the norm. Since h = x + r, dh is both dx and dr: dh = dh_next + Norm'(dy).
    dbias is None for rms_norm or without bias.

    >>> import numpy as np, addnorm
    >>> h = np.array([[2.0, 4, 6, 8]])
    >>> dh, _, _ = addnorm.add_norm_pre_backward(np.zeros((1, 4)), np.ones((1, 4)), h, 4)
    >>> print(dh)
    [[1. 1. 1. 1.]]
    """
    h = check.tensor("h", h)
    dy = check.tensor("dy", dy, h)
    check.same_shape("dy", dy, h.shape)
    dh_next = check.optional_tensor("dh_next", dh_next, h)
    check.same_shape("dh_next", dh_next, h.shape)
    dims, _, _, weight, bias, eps = _norm_args(h, normalized_shape, weight, bias, eps, norm,
                                                 zero_centered_weight, "h")
    dh = np.empty_like(h)
    dweight = None if weight is None else np.empty_like(weight)
    dbias = None if bias is None else np.empty_like(bias)
    _addnorm.add_norm_pre_backward(dy, dh_next, h, list(dims), dh, dweight, dbias, norm, weight,
                                   bias, check.flag("zero_centered_weight", zero_centered_weight), eps)
    return dh, dweight, dbias


def add_norm_post(x, s, normalized_shape, weight=None, bias=None, eps=None, norm="layer_norm",
                  zero_centered_weight=False, p=0.0, seed=0, offset=0, return_stats=False):
    """Post-norm Add & Norm (the 2017 paper): y = Norm(x + Dropout(s)).

    s is the sub-layer's output; dropout with probability p uses the mask of
    dropout(s, p, seed, offset). The dropout output and the sum are each rounded to x's dtype,
    so the result equals dropout() -> add() -> the norm exactly.

    Returns y, or (y, mean, rstd) with return_stats=True (mean is None for rms_norm).

    >>> import numpy as np, addnorm
    >>> x = np.array([[1, 2, 3, 4]], np.float32)
    >>> print(addnorm.add_norm_post(x, x, 4).round(4))
    [[-1.3416 -0.4472  0.4472  1.3416]]
    """
    x = check.tensor("x", x)
    s = check.tensor("s", s, x)
    check.same_shape("s", s, x.shape)
    dims, rows, centres, weight, bias, eps = _norm_args(x, normalized_shape, weight, bias, eps, norm,
                                                    zero_centered_weight)
    p, seed, offset = _dropout_args(p, seed, offset)
    y = np.empty_like(x)
    return_stats = check.flag("return_stats", return_stats)
    mean, rstd = _stats(rows, centres, x.dtype, return_stats)
    _addnorm.add_norm_post(x, s, list(dims), y, norm, weight, bias, check.flag("zero_centered_weight", zero_centered_weight),
                           eps, p, seed, offset, mean, rstd)
    return (y, mean, rstd) if return_stats else y


def add_norm_post_backward(dy, x, s, normalized_shape, weight=None, bias=None, eps=None,
                           norm="layer_norm", zero_centered_weight=False, p=0.0, seed=0,
                           offset=0):
    """Gradients of add_norm_post: returns (dx, ds, dweight, dbias).

    dx = Norm'(dy) at h = x + Dropout(s), and ds = dropout_backward(dx) with the same mask
    (regenerated from p, seed, offset, not stored). x and s are the forward's inputs.

    >>> import numpy as np, addnorm
    >>> x = np.array([[1.0, 2, 3, 4]])
    >>> dx, ds, _, _ = addnorm.add_norm_post_backward(np.ones((1, 4)), x, x, 4)
    >>> print(np.abs(dx).max() < 1e-15, bool((dx == ds).all()))
    True True
    """
    x = check.tensor("x", x)
    dy = check.tensor("dy", dy, x)
    s = check.tensor("s", s, x)
    check.same_shape("dy", dy, x.shape)
    check.same_shape("s", s, x.shape)
    dims, _, _, weight, bias, eps = _norm_args(x, normalized_shape, weight, bias, eps, norm,
                                                 zero_centered_weight)
    p, seed, offset = _dropout_args(p, seed, offset)
    dx, ds = np.empty_like(x), np.empty_like(x)
    dweight = None if weight is None else np.empty_like(weight)
    dbias = None if bias is None else np.empty_like(bias)
    _addnorm.add_norm_post_backward(dy, x, s, list(dims), dx, ds, dweight, dbias, norm, weight,
                                    bias, check.flag("zero_centered_weight", zero_centered_weight), eps, p, seed, offset)
    return dx, ds, dweight, dbias

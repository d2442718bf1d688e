"""Bad arguments to the Python functions raise the documented exception with a message that
names the argument and what was expected: TypeError for a wrong type or dtype, ValueError for a
wrong shape, layout (non-contiguous arrays are rejected, never silently copied) or value. The
compiled module checks again when called directly, and a rejected call writes nothing."""
import numpy as np
import pytest

import addnorm
from addnorm import _addnorm

X32 = np.ones((2, 4), np.float32)


def test_wrong_dtype_is_a_type_error():
    with pytest.raises(TypeError, match=r"x has dtype int64, expected float32 or float64"):
        addnorm.layer_norm(np.ones((2, 4), np.int64), 4)
    with pytest.raises(TypeError, match=r"weight has dtype float64, expected float32 like"):
        addnorm.layer_norm(X32, 4, weight=np.ones(4))
    with pytest.raises(TypeError, match=r"x is a list, expected a numpy.ndarray"):
        addnorm.rms_norm([[1.0, 2.0]], 2)
    with pytest.raises(TypeError, match=r"running_mean has dtype float64, expected float32"):
        addnorm.batch_norm(X32, np.zeros(4), np.ones(4, np.float32))
    with pytest.raises(TypeError, match=r"r has dtype float16"):
        addnorm.add(X32, X32.astype(np.float16))


def test_shape_mismatch_is_a_value_error():
    with pytest.raises(ValueError, match=r"normalized_shape \[3\] does not match the trailing "
                                         r"dims of x \[2, 4\]"):
        addnorm.layer_norm(X32, 3)
    with pytest.raises(ValueError, match=r"weight has shape \[5\], expected \[4\]"):
        addnorm.layer_norm(X32, 4, weight=np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"dy has shape \[2, 3\], expected \[2, 4\]"):
        addnorm.layer_norm_backward(np.ones((2, 3), np.float32), X32, 4)
    with pytest.raises(ValueError, match=r"r has shape \[4\], expected \[2, 4\]"):
        addnorm.add_norm_pre(X32, np.ones(4, np.float32), 4)
    with pytest.raises(ValueError, match=r"x has shape \[2\], expected rank 2 to 5: \(N, C, \*\)"):
        addnorm.batch_norm(np.ones(2, np.float32), None, None, training=True)
    with pytest.raises(ValueError, match=r"running_var has shape \[3\], expected \[4\]"):
        addnorm.batch_norm(X32, np.zeros(4, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"normalized_shape is \[-1\], expected non-negative"):
        addnorm.layer_norm(np.ones((2, 0), np.float32), -1)
    # One value per channel is refused in training (PyTorch's rule); none, an empty batch, is not.
    with pytest.raises(ValueError, match=r"x has shape \[1, 4\] with 1 value per channel"):
        addnorm.batch_norm(np.ones((1, 4), np.float32), None, None, training=True)


def test_non_contiguous_is_rejected_not_copied():
    strided = np.ones((4, 8), np.float32)[:, ::2]
    with pytest.raises(ValueError, match=r"x is not C-contiguous .*numpy.ascontiguousarray"):
        addnorm.layer_norm(strided, 4)
    with pytest.raises(ValueError, match=r"dy is not C-contiguous"):
        addnorm.rms_norm_backward(np.ones((4, 8), np.float64).T, np.ones((8, 4)), 4)
    with pytest.raises(ValueError, match=r"weight is not C-contiguous"):
        addnorm.layer_norm(X32, 4, weight=np.ones(8, np.float32)[::2])
    # The documented way out works and gives the same result as a contiguous original.
    np.testing.assert_array_equal(addnorm.layer_norm(np.ascontiguousarray(strided), 4),
                                  addnorm.layer_norm(np.ones((4, 4), np.float32), 4))


@pytest.mark.parametrize("eps", [float("nan"), float("inf"), float("-inf")])
def test_bad_eps(eps):
    with pytest.raises(ValueError, match=r"eps is .*, expected a finite value$"):
        addnorm.layer_norm(X32, 4, eps=eps)
    with pytest.raises(ValueError, match=r"eps is .*, expected a finite value$"):
        addnorm.add_norm_post(X32, X32, 4, eps=eps)


@pytest.mark.parametrize("momentum", [float("inf"), float("nan")])
def test_bad_momentum_leaves_running_stats_untouched(momentum):
    mean, var = np.zeros(4, np.float32), np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"momentum is .*, expected a finite value$"):
        addnorm.batch_norm(np.arange(8, dtype=np.float32).reshape(2, 4), mean, var,
                           training=True, momentum=momentum)
    np.testing.assert_array_equal(mean, 0)
    np.testing.assert_array_equal(var, 1)


def test_other_bad_values():
    with pytest.raises(ValueError, match=r"p is 1, expected a dropout probability in \[0, 1\)"):
        addnorm.dropout(X32, p=1.0)
    with pytest.raises(ValueError, match=r"seed is -1, expected an int in \[0, 2\*\*64\)"):
        addnorm.dropout(X32, p=0.5, seed=-1)
    with pytest.raises(ValueError, match=r"norm is 'batch', expected 'layer_norm' or"):
        addnorm.add_norm_pre(X32, X32, 4, norm="batch")
    with pytest.raises(ValueError, match=r"bias was given for rms_norm"):
        addnorm.add_norm_post(X32, X32, 4, bias=np.ones(4, np.float32), norm="rms_norm")
    with pytest.raises(ValueError, match=r"1 value per channel, expected more than 1"):
        addnorm.batch_norm(np.ones((1, 3), np.float32), None, None, training=True)
    with pytest.raises(ValueError, match=r"running_mean and running_var are None, expected both"):
        addnorm.batch_norm(X32, None, None, training=False)
    with pytest.raises(ValueError, match=r"convention is 'keras'"):
        addnorm.batch_norm(X32, None, None, training=True, convention="keras")
    with pytest.raises(ValueError, match=r"running_mean is read-only"):
        frozen = np.zeros(4, np.float32)
        frozen.flags.writeable = False
        addnorm.batch_norm(X32, frozen, np.ones(4, np.float32), training=True)
    with pytest.raises(TypeError, match=r"normalized_shape is a float"):
        addnorm.layer_norm(X32, 4.0)


def test_the_library_checks_scalars_and_norm_names_for_this_face():
    """The values of eps, momentum and p, the norm's name and the options one norm only takes are
    checked once, by the library, for every face: its messages arrive with the Python names, as
    ValueError, and the double is checked before it is rounded to float32."""
    # 1e39 is beyond float32's range: refused for what it is, where float64 takes it.
    with pytest.raises(ValueError, match=r"^eps is 1e\+39, beyond float32's range"):
        addnorm.layer_norm(X32, 4, eps=1e39)
    addnorm.layer_norm(X32.astype(np.float64), 4, eps=1e39)
    for x in (X32, X32.astype(np.float64)):
        with pytest.raises(ValueError, match=r"^eps is nan, expected a finite value$"):
            addnorm.add_norm_pre(x, x, 4, eps=float("nan"), norm="rms_norm")
    with pytest.raises(ValueError, match=r"^zero_centered_weight was set for layer_norm, "
                                         r"expected it only with rms_norm$"):
        addnorm.add_norm_pre(X32, X32, 4, zero_centered_weight=True)
    with pytest.raises(ValueError, match=r"^bias was given for rms_norm, expected none"):
        addnorm.add_norm_pre(X32, X32, 4, bias=np.ones(4, np.float32), norm="rms_norm")
    with pytest.raises(ValueError, match=r"^norm is 'RMSNorm', expected 'layer_norm' or "
                                         r"'rms_norm'$"):
        addnorm.add_norm_post(X32, X32, 4, eps=1e-5, norm="RMSNorm")
    with pytest.raises(TypeError, match=r"^norm is a int, expected a str"):
        addnorm.add_norm_pre(X32, X32, 4, norm=3)


def test_compiled_module_checks_on_its_own():
    """Called directly, _addnorm still refuses what would be unsafe, and maps the library's
    addnorm::Error to ValueError."""
    y = np.zeros((2, 4), np.float32)
    with pytest.raises(TypeError, match=r"y has dtype float64, expected float32"):
        _addnorm.layer_norm(X32, [4], None, None, np.zeros((2, 4)), None, None, 1e-5)
    with pytest.raises(ValueError, match=r"y is not C-contiguous"):
        _addnorm.layer_norm(X32, [4], None, None, np.zeros((4, 8), np.float32)[::2, ::2], None,
                            None, 1e-5)
    # The library's own message, with the argument named as this face names it (weight).
    with pytest.raises(ValueError, match=r"^weight has shape \[3\], expected \[4\]$"):
        _addnorm.layer_norm(X32, [4], np.ones(3, np.float32), None, y, None, None, 1e-5)
    with pytest.raises(ValueError, match=r"eps is inf, expected a finite value"):
        _addnorm.layer_norm(X32, [4], None, None, y, None, None, float("inf"))
    np.testing.assert_array_equal(y, 0)  # nothing written by a rejected call
    with pytest.raises(ValueError, match=r"y has shape \[4\], expected \[2, 4\]"):
        _addnorm.layer_norm(X32.astype(np.float64), [4], None, None, np.zeros(4), None, None,
                            1e-5)


# float64 arrays go through the library's float64 ops, which share the float32 ops' checks: each
# bad argument below was once accepted by the compiled module on float64 (issue 14, item 10) and
# returned NaN, inf or garbage. Each is refused with a ValueError naming the argument, and the
# outputs (including running statistics) are left exactly as they were.
X64 = np.arange(8, dtype=np.float64).reshape(2, 4)


def _untouched(*arrays):
    """Copies to compare with after a rejected call."""
    return [a.copy() for a in arrays]


def _assert_untouched(arrays, before):
    for array, copy in zip(arrays, before):
        np.testing.assert_array_equal(array, copy)


@pytest.mark.parametrize("eps", [float("-inf"), float("nan"), float("inf")])
def test_float64_bad_eps_is_refused(eps):
    y, mean, rstd = np.full((2, 4), 7.0), np.full(2, 7.0), np.full(2, 7.0)
    before = _untouched(y, mean, rstd)
    with pytest.raises(ValueError, match=r"eps is .*, expected a finite value"):
        _addnorm.layer_norm(X64, [4], None, None, y, mean, rstd, eps)
    with pytest.raises(ValueError, match=r"eps is .*, expected a finite value"):
        _addnorm.rms_norm(X64, [4], None, False, y, rstd, eps)
    with pytest.raises(ValueError, match=r"eps is .*, expected a finite value"):
        _addnorm.add_norm_post(X64, X64, [4], y, "layer_norm", None, None, False, eps, 0.1, 0, 0, mean,
                               rstd)
    _assert_untouched([y, mean, rstd], before)


@pytest.mark.parametrize("p", [1.0, 1.5, -0.1, float("nan")])
def test_float64_bad_dropout_p_is_refused(p):
    y = np.full((2, 4), 7.0)
    with pytest.raises(ValueError, match=r"p is .*, expected a dropout probability in \[0, 1\)"):
        _addnorm.dropout(X64, y, p, 0, 0)
    with pytest.raises(ValueError, match=r"p is .*, expected a dropout probability in \[0, 1\)"):
        _addnorm.add_norm_post(X64, X64, [4], y, "layer_norm", None, None, False, 1e-5, p, 0, 0, None,
                               None)
    np.testing.assert_array_equal(y, 7.0)


def test_dropout_p_near_one_follows_one_rule_in_float32_and_float64():
    """The mask is drawn at float32's precision for every dtype: p = 1 - 1e-11, below 1 in float64
    but 1 in float32, is refused by both (float64 once dropped every element); the largest
    float32 below 1 is accepted by both, with the same mask."""
    for x in (np.ones((64, 64)), np.ones((64, 64), np.float32)):
        y = np.full_like(x, 7.0)
        with pytest.raises(ValueError, match=r"p is 0\.99999999999, which rounds to 1 in float32"):
            _addnorm.dropout(x, y, 1 - 1e-11, 3, 0)
        np.testing.assert_array_equal(y, 7.0)
    p = float(np.nextafter(np.float32(1), np.float32(0)))
    kept = []
    for x in (np.ones((256, 256)), np.ones((256, 256), np.float32)):
        y = np.zeros_like(x)
        _addnorm.dropout(x, y, p, 3, 0)
        assert np.all(np.isfinite(y))
        kept.append(y != 0)
    np.testing.assert_array_equal(kept[0], kept[1])


def test_float64_dropout_offset_overflow_is_refused():
    y = np.full((2, 4), 7.0)
    with pytest.raises(ValueError, match=r"offset is 18446744073709551615 for 8 elements, "
                                         r"expected offset \+ element count to fit in 64 bits"):
        _addnorm.dropout(X64, y, 0.5, 0, 2**64 - 1)
    with pytest.raises(ValueError, match=r"offset is 18446744073709551610 .* fit in 64 bits"):
        _addnorm.add_norm_post_backward(X64, X64, X64, [4], np.zeros((2, 4)), y, None, None,
                                        "layer_norm", None, None, False, 1e-5, 0.5, 0, 2**64 - 6)
    np.testing.assert_array_equal(y, 7.0)


def test_float64_batch_norm_bad_arguments_are_refused():
    y = np.full((2, 4), 7.0)
    mean, var = np.zeros(4), np.ones(4)
    before = _untouched(y, mean, var)
    with pytest.raises(ValueError, match=r"momentum is nan, expected a finite value$"):
        _addnorm.batch_norm(X64, y, None, None, mean, var, True, float("nan"), 1e-5, False, None,
                            None)
    with pytest.raises(ValueError, match=r"1 value per channel, expected more than 1 in training"):
        _addnorm.batch_norm(X64[:1], y[:1], None, None, mean, var, True, 0.1, 1e-5, False, None,
                            None)
    with pytest.raises(ValueError, match=r"running_mean overlaps running_var, expected separate"):
        _addnorm.batch_norm(X64, y, None, None, mean, mean, True, 0.1, 1e-5, False, None, None)
    with pytest.raises(ValueError, match=r"running_var overlaps x, expected separate memory"):
        shared = np.arange(8, dtype=np.float64)
        _addnorm.batch_norm(shared.reshape(2, 4), y, None, None, mean, shared[4:], True, 0.1,
                            1e-5, False, None, None)
    with pytest.raises(ValueError, match=r"running_mean and running_var are absent"):
        _addnorm.batch_norm(X64, y, None, None, None, None, False, 0.1, 1e-5, False, None, None)
    _assert_untouched([y, mean, var], before)


def test_float64_outputs_overlapping_inputs_are_refused():
    weights = np.arange(8, dtype=np.float64)
    dx = np.full((2, 4), 7.0)
    before = _untouched(weights, dx)
    # dweight shares memory with weight (half of it).
    with pytest.raises(ValueError, match=r"dweight overlaps weight, expected separate memory"):
        _addnorm.layer_norm_backward(X64, X64, [4], weights[:4], None, dx, weights[2:6], None,
                                     1e-5)
    # y overlaps x partially (not exactly the same memory, which is allowed).
    buffer = np.arange(12, dtype=np.float64)
    with pytest.raises(ValueError, match=r"y overlaps x, expected exactly the same memory"):
        _addnorm.layer_norm(buffer[:8].reshape(2, 4), [4], None, None, buffer[4:].reshape(2, 4),
                            None, None, 1e-5)
    # dh (output) overlaps gamma of the fused pre-norm backward.
    with pytest.raises(ValueError, match=r"dh overlaps weight, expected separate memory"):
        row = X64.reshape(1, 8)
        _addnorm.add_norm_pre_backward(row, None, row, [8], weights.reshape(1, 8), None, None,
                                       "layer_norm", weights, None, False, 1e-5)
    _assert_untouched([weights, dx], before)
    np.testing.assert_array_equal(buffer, np.arange(12))


def test_float64_shapes_are_checked_by_the_library():
    # The library's own message, with the argument named as this face names it (weight).
    with pytest.raises(ValueError, match=r"^weight has shape \[3\], expected \[4\]$"):
        _addnorm.layer_norm(X64, [4], np.ones(3), None, np.zeros((2, 4)), None, None, 1e-5)
    with pytest.raises(ValueError, match=r"rstd has 3 elements \(shape \[3\]\), expected 2"):
        _addnorm.rms_norm(X64, [4], None, False, np.zeros((2, 4)), np.zeros(3), 1e-5)
    with pytest.raises(ValueError, match=r"dbias was requested but bias is absent"):
        _addnorm.layer_norm_backward(X64, X64, [4], None, None, np.zeros((2, 4)), None,
                                     np.zeros(4), 1e-5)
    with pytest.raises(ValueError, match=r"^bias was given for rms_norm"):
        _addnorm.add_norm_pre(X64, X64, [4], np.zeros((2, 4)), np.zeros((2, 4)), "rms_norm", None,
                              np.zeros(4), False, 1e-5, None, None)


def test_float64_and_float32_are_refused_alike():
    """The same bad call on either dtype gives the same message: one set of checks."""
    for dtype in (np.float32, np.float64):
        x = X64.astype(dtype)
        with pytest.raises(ValueError) as error:
            _addnorm.batch_norm(x, np.zeros_like(x), None, None, np.zeros(4, dtype),
                                np.ones(4, dtype), True, float("inf"), 1e-5, False, None, None)
        assert str(error.value) == "momentum is inf, expected a finite value"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_running_statistics_sharing_memory_are_refused(dtype):
    """The library (not the Python layer) refuses running_mean is running_var, for both dtypes,
    and updates nothing."""
    x = np.arange(8, dtype=dtype).reshape(2, 4)
    stats = np.ones(4, dtype)
    with pytest.raises(ValueError, match=r"running_mean overlaps running_var, expected separate"):
        addnorm.batch_norm(x, stats, stats, training=True)
    np.testing.assert_array_equal(stats, 1)
    with pytest.raises(ValueError, match=r"running_mean overlaps x, expected separate memory"):
        addnorm.batch_norm(x, x[0], np.ones(4, dtype), training=True)
    np.testing.assert_array_equal(x, np.arange(8).reshape(2, 4))


def test_numbers_beyond_float32_are_refused_before_conversion():
    # A float32 call cannot hold eps = 1e50: converting it would be undefined behaviour (it used
    # to surface as "eps is inf"). Refused by value; the same number is a fine float64 eps.
    y = np.full((2, 4), 7.0, np.float32)
    with pytest.raises(ValueError, match=r"eps is 1e\+50, beyond float32's range"):
        _addnorm.layer_norm(X32, [4], None, None, y, None, None, 1e50)
    np.testing.assert_array_equal(y, np.full((2, 4), 7.0, np.float32))
    with pytest.raises(ValueError, match=r"eps is 1e\+50, beyond float32's range"):
        addnorm.layer_norm(X32, 4, eps=1e50)
    with pytest.raises(ValueError, match=r"eps is 1e\+50, beyond float32's range"):
        addnorm.add_norm_pre(X32, X32, 4, eps=1e50)
    wide = addnorm.layer_norm(X64, 4, eps=1e50)
    assert np.all(np.abs(wide) < 1e-20)  # (x - mean) / sqrt(var + 1e50): all but zero


def test_dropout_mask_names_its_shape_and_refuses_a_huge_one_before_allocating():
    with pytest.raises(ValueError, match=r"^shape is \[-1, 3\], expected non-negative"):
        addnorm.dropout_mask((-1, 3))
    with pytest.raises(ValueError, match=r"^shape is empty"):
        addnorm.dropout_mask(())
    # The library's element limit (Shape::numel), not NumPy's allocation error.
    for huge in ((2**61, 8), (2**62,), (2**40, 2**30)):
        with pytest.raises(ValueError, match=r"expected at most 1152921504606846975 elements"):
            addnorm.dropout_mask(huge)


@pytest.mark.parametrize("call", [
    lambda: addnorm.rms_norm(X32, 4, np.ones(4, np.float32), zero_centered_weight="no"),
    lambda: addnorm.rms_norm_backward(X32, X32, 4, np.ones(4, np.float32),
                                      zero_centered_weight=1),
    lambda: addnorm.add_norm_pre(X32, X32, 4, norm="rms_norm", zero_centered_weight="False"),
    lambda: addnorm.batch_norm(X32, None, None, training="no"),
    lambda: addnorm.batch_norm_backward(X32, X32, None, None, training=None),
])
def test_a_flag_that_is_not_a_bool_is_a_type_error(call):
    """'no' would read as true: a flag takes a Python or NumPy bool, as the other arguments take
    their own types, uncoerced."""
    with pytest.raises(TypeError, match=r"(zero_centered_weight|training) is a \w+, expected a bool"):
        call()

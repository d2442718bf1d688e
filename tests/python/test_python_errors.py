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
    with pytest.raises(ValueError, match=r"x has shape \[2\], expected \(N, C\) or \(N, C, L\)"):
        addnorm.batch_norm(np.ones(2, np.float32), None, None, training=True)
    with pytest.raises(ValueError, match=r"running_var has shape \[3\], expected \[4\]"):
        addnorm.batch_norm(X32, np.zeros(4, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"x has shape \[2, 0\], expected every dimension"):
        addnorm.layer_norm(np.ones((2, 0), np.float32), 0 + 1)


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


@pytest.mark.parametrize("eps", [-1e-5, float("nan"), float("inf")])
def test_bad_eps(eps):
    with pytest.raises(ValueError, match=r"eps is .*, expected a finite value >= 0"):
        addnorm.layer_norm(X32, 4, eps=eps)
    with pytest.raises(ValueError, match=r"eps is .*, expected a finite value >= 0"):
        addnorm.add_norm_post(X32, X32, 4, eps=eps)


@pytest.mark.parametrize("momentum", [-0.1, 1.5, float("nan")])
def test_bad_momentum_leaves_running_stats_untouched(momentum):
    mean, var = np.zeros(4, np.float32), np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"momentum is .*, expected a value in \[0, 1\]"):
        addnorm.batch_norm(np.arange(8, dtype=np.float32).reshape(2, 4), mean, var,
                           training=True, momentum=momentum)
    np.testing.assert_array_equal(mean, 0)
    np.testing.assert_array_equal(var, 1)


def test_other_bad_values():
    with pytest.raises(ValueError, match=r"p is 1.0, expected a dropout probability in \[0, 1\)"):
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


def test_compiled_module_checks_on_its_own():
    """Called directly, _addnorm still refuses what would be unsafe, and maps the library's
    addnorm::Error to ValueError."""
    y = np.zeros((2, 4), np.float32)
    with pytest.raises(TypeError, match=r"y has dtype float64, expected float32"):
        _addnorm.layer_norm(X32, [4], None, None, np.zeros((2, 4)), None, None, 1e-5)
    with pytest.raises(ValueError, match=r"y is not C-contiguous"):
        _addnorm.layer_norm(X32, [4], None, None, np.zeros((4, 8), np.float32)[::2, ::2], None,
                            None, 1e-5)
    with pytest.raises(ValueError, match=r"gamma has shape \[3\], expected \[4\]"):
        _addnorm.layer_norm(X32, [4], np.ones(3, np.float32), None, y, None, None, 1e-5)
    with pytest.raises(ValueError, match=r"eps is -1, expected a finite value >= 0"):
        _addnorm.layer_norm(X32, [4], None, None, y, None, None, -1.0)
    np.testing.assert_array_equal(y, 0)  # nothing written by a rejected call
    with pytest.raises(ValueError, match=r"y has 4 elements, expected 8"):
        _addnorm.layer_norm(X32.astype(np.float64), [4], None, None, np.zeros(4), None, None,
                            1e-5)

"""`addnorm run OP` against PyTorch 1.13 (CPU, float64 on the same float32 inputs).

Every op, forward and backward, on random data of several shapes: the outputs must be within a
few float32 ulp of PyTorch's float64 result (autograd gives the reference gradients). Dropout is
checked by its structure, and the command's error handling by what it prints and leaves behind.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from run_cli import run_fails, run_ok

RTOL = 1e-5
ATOL = 1e-6


def assert_close(actual, expected, rtol=RTOL, atol=ATOL):
    """float32 closeness to a float64 reference: rtol, plus atol scaled by the data's magnitude."""
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else expected
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.dtype == np.float32
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = max(1.0, float(np.abs(expected).max())) if expected.size else 1.0
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=rtol, atol=atol * scale)


def randn(rng, *shape, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32)


def leaf(array):
    """A float64 torch leaf holding exactly the float32 values, with gradients."""
    return torch.tensor(np.asarray(array, dtype=np.float64), requires_grad=True)


def maybe_leaf(array):
    return None if array is None else leaf(array)


def backward_of(outputs_and_grads, leaves):
    """Gradients of sum(output * grad) over the pairs, for each leaf (None for absent leaves)."""
    loss = sum((output * torch.tensor(np.asarray(grad, dtype=np.float64))).sum()
               for output, grad in outputs_and_grads)
    loss.backward()
    return [None if t is None else t.grad for t in leaves]


def norm_options(x_shape, normalized_shape, form):
    """--normalized_shape 3,4 (PyTorch) or the equivalent --axis (ONNX, negative or not)."""
    if form == "shape":
        return ["--normalized_shape", ",".join(map(str, normalized_shape))]
    axis = len(x_shape) - len(normalized_shape)
    return ["--axis", str(axis if form == "axis" else axis - len(x_shape))]


def expected_files(*names, **optional):
    return set(names) | {name for name, present in optional.items() if present}


# --- LayerNorm -----------------------------------------------------------------------------------

LAYER_NORM_CASES = [
    # x shape, normalized_shape, weight, bias, normalized_shape form, eps (None: default 1e-5)
    ((4, 8), (8,), True, True, "shape", None),
    ((2, 3, 5), (5,), False, False, "shape", None),
    ((2, 3, 5), (3, 5), True, False, "shape", 1e-3),
    ((3, 4, 6), (4, 6), True, True, "axis", None),
    ((6, 7), (7,), False, True, "negative_axis", None),
    ((2, 2, 3, 4), (2, 3, 4), True, True, "negative_axis", 1e-2),
]


@pytest.mark.parametrize("x_shape, normalized_shape, has_weight, has_bias, form, eps",
                         LAYER_NORM_CASES)
def test_layer_norm_matches_torch(addnorm_bin, tmp_path, x_shape, normalized_shape, has_weight,
                                  has_bias, form, eps):
    rng = np.random.default_rng(len(x_shape) * 100 + len(normalized_shape))
    x = randn(rng, *x_shape, scale=2.0, shift=0.5)
    weight = randn(rng, *normalized_shape, shift=1.0) if has_weight else None
    bias = randn(rng, *normalized_shape) if has_bias else None
    dy = randn(rng, *x_shape)
    inputs = {"x": x}
    if has_weight:
        inputs["weight"] = weight
    if has_bias:
        inputs["bias"] = bias
    options = norm_options(x_shape, normalized_shape, form)
    if eps is not None:
        options += ["--eps", repr(eps)]
    eps = 1e-5 if eps is None else eps

    forward = run_ok(addnorm_bin, tmp_path, "layer_norm", inputs, options)
    backward = run_ok(addnorm_bin, tmp_path, "layer_norm", {**inputs, "dy": dy},
                      options + ["--backward"])

    xt, wt, bt = leaf(x), maybe_leaf(weight), maybe_leaf(bias)
    y = F.layer_norm(xt, normalized_shape, wt, bt, eps)
    dims = tuple(range(-len(normalized_shape), 0))
    mean = xt.mean(dim=dims)
    rstd = 1.0 / torch.sqrt(xt.var(dim=dims, unbiased=False) + eps)
    dx, dweight, dbias = backward_of([(y, dy)], [xt, wt, bt])

    assert set(forward) == {"y", "mean", "rstd"}
    assert_close(forward["y"], y)
    assert_close(forward["mean"], mean)
    assert_close(forward["rstd"], rstd)
    assert set(backward) == expected_files("dx", dweight=has_weight, dbias=has_bias)
    assert_close(backward["dx"], dx)
    if has_weight:
        assert_close(backward["dweight"], dweight)
    if has_bias:
        assert_close(backward["dbias"], dbias)


def test_layer_norm_gamma_and_beta_aliases(addnorm_bin, tmp_path):
    rng = np.random.default_rng(7)
    x, weight, bias = randn(rng, 3, 4), randn(rng, 4), randn(rng, 4)
    by_pytorch_names = run_ok(addnorm_bin, tmp_path, "layer_norm",
                              {"x": x, "weight": weight, "bias": bias},
                              ["--normalized_shape", "4"])
    by_onnx_names = run_ok(addnorm_bin, tmp_path, "layer_norm",
                           {"x": x, "gamma": weight, "beta": bias}, ["--axis", "-1"])
    np.testing.assert_array_equal(by_pytorch_names["y"], by_onnx_names["y"])
    assert_close(by_onnx_names["y"], F.layer_norm(leaf(x), (4,), leaf(weight), leaf(bias)))


# --- RMSNorm -------------------------------------------------------------------------------------

def rms_norm_reference(x, normalized_shape, weight, eps, zero_centered):
    """The composite definition: x * rsqrt(mean(x^2) + eps) * w, or * (1 + w) zero-centred."""
    dims = tuple(range(-len(normalized_shape), 0))
    rstd = torch.rsqrt((x * x).mean(dim=dims, keepdim=True) + eps)
    y = x * rstd
    if weight is not None:
        y = y * ((1.0 + weight) if zero_centered else weight)
    return y, rstd.reshape(rstd.shape[:x.dim() - len(normalized_shape)])


RMS_NORM_CASES = [
    # x shape, normalized_shape, weight, zero-centred, form, eps (None: default 1e-6)
    ((4, 8), (8,), True, False, "shape", None),
    ((2, 3, 5), (3, 5), True, True, "shape", 1e-5),
    ((3, 6), (6,), False, False, "axis", None),
    ((2, 4, 3), (3,), True, True, "negative_axis", 1e-3),
]


@pytest.mark.parametrize("x_shape, normalized_shape, has_weight, zero_centered, form, eps",
                         RMS_NORM_CASES)
def test_rms_norm_matches_torch_composite(addnorm_bin, tmp_path, x_shape, normalized_shape,
                                          has_weight, zero_centered, form, eps):
    rng = np.random.default_rng(11 + len(x_shape))
    x = randn(rng, *x_shape, scale=1.5, shift=0.3)
    weight = randn(rng, *normalized_shape, scale=0.5) if has_weight else None
    dy = randn(rng, *x_shape)
    inputs = {"x": x} if weight is None else {"x": x, "weight": weight}
    options = norm_options(x_shape, normalized_shape, form)
    if zero_centered:
        options.append("--zero_centered_weight")
    if eps is not None:
        options += ["--eps", repr(eps)]
    eps = 1e-6 if eps is None else eps

    forward = run_ok(addnorm_bin, tmp_path, "rms_norm", inputs, options)
    backward = run_ok(addnorm_bin, tmp_path, "rms_norm", {**inputs, "dy": dy},
                      options + ["--backward"])

    xt, wt = leaf(x), maybe_leaf(weight)
    y, rstd = rms_norm_reference(xt, normalized_shape, wt, eps, zero_centered)
    dx, dweight = backward_of([(y, dy)], [xt, wt])

    assert set(forward) == {"y", "rstd"}
    assert_close(forward["y"], y)
    assert_close(forward["rstd"], rstd)
    assert set(backward) == expected_files("dx", dweight=has_weight)
    assert_close(backward["dx"], dx)
    if has_weight:
        assert_close(backward["dweight"], dweight)


# --- BatchNorm -----------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape", [(8, 3), (4, 3, 5)])
@pytest.mark.parametrize("momentum", [None, 0.3])
def test_batch_norm_training_matches_torch(addnorm_bin, tmp_path, x_shape, momentum):
    rng = np.random.default_rng(21 + len(x_shape))
    channels = x_shape[1]
    x = randn(rng, *x_shape, scale=3.0, shift=1.0)
    weight, bias = randn(rng, channels, shift=1.0), randn(rng, channels)
    running_mean, running_var = randn(rng, channels), np.abs(randn(rng, channels)) + 0.5
    dy = randn(rng, *x_shape)
    inputs = {"x": x, "weight": weight, "bias": bias, "running_mean": running_mean,
              "running_var": running_var}
    options = ["--training"] if momentum is None else ["--momentum", repr(momentum)]

    forward = run_ok(addnorm_bin, tmp_path, "batch_norm", inputs, options)
    backward = run_ok(addnorm_bin, tmp_path, "batch_norm", {**inputs, "dy": dy},
                      options + ["--backward"])

    # F.batch_norm updates the running statistics in place, with PyTorch's momentum convention.
    torch_mean = torch.tensor(running_mean, dtype=torch.float64)
    torch_var = torch.tensor(running_var, dtype=torch.float64)
    xt, wt, bt = leaf(x), leaf(weight), leaf(bias)
    y = F.batch_norm(xt, torch_mean, torch_var, wt, bt, training=True,
                     momentum=0.1 if momentum is None else momentum, eps=1e-5)
    reduce_dims = (0,) if len(x_shape) == 2 else (0, 2)
    batch_mean = xt.mean(dim=reduce_dims)
    batch_rstd = 1.0 / torch.sqrt(xt.var(dim=reduce_dims, unbiased=False) + 1e-5)
    dx, dweight, dbias = backward_of([(y, dy)], [xt, wt, bt])

    assert set(forward) == {"y", "mean", "rstd", "running_mean", "running_var"}
    assert_close(forward["y"], y)
    assert_close(forward["mean"], batch_mean)
    assert_close(forward["rstd"], batch_rstd)
    assert_close(forward["running_mean"], torch_mean)
    assert_close(forward["running_var"], torch_var)
    assert set(backward) == {"dx", "dweight", "dbias"}
    assert_close(backward["dx"], dx)
    assert_close(backward["dweight"], dweight)
    assert_close(backward["dbias"], dbias)


def test_batch_norm_does_not_modify_its_input_files(addnorm_bin, tmp_path):
    rng = np.random.default_rng(5)
    mean_path, var_path = tmp_path / "rm.npy", tmp_path / "rv.npy"
    np.save(mean_path, np.zeros(2, np.float32))
    np.save(var_path, np.ones(2, np.float32))
    before = mean_path.read_bytes(), var_path.read_bytes()
    out = run_ok(addnorm_bin, tmp_path, "batch_norm",
                 {"x": randn(rng, 6, 2, shift=4.0), "running_mean": mean_path,
                  "running_var": var_path})
    assert (mean_path.read_bytes(), var_path.read_bytes()) == before
    assert np.all(out["running_mean"] > 0.1)  # moved towards the batch mean of about 4


def test_batch_norm_training_without_running_statistics(addnorm_bin, tmp_path):
    rng = np.random.default_rng(6)
    x = randn(rng, 5, 4, 3)
    out = run_ok(addnorm_bin, tmp_path, "batch_norm", {"x": x})
    assert set(out) == {"y", "mean", "rstd"}
    assert_close(out["y"], F.batch_norm(leaf(x), None, None, training=True))


@pytest.mark.parametrize("x_shape", [(8, 3), (4, 3, 5)])
def test_batch_norm_eval_matches_torch(addnorm_bin, tmp_path, x_shape):
    rng = np.random.default_rng(31 + len(x_shape))
    channels = x_shape[1]
    x = randn(rng, *x_shape, scale=2.0)
    weight, bias = randn(rng, channels, shift=1.0), randn(rng, channels)
    running_mean, running_var = randn(rng, channels), np.abs(randn(rng, channels)) + 0.5
    dy = randn(rng, *x_shape)
    inputs = {"x": x, "gamma": weight, "beta": bias, "running_mean": running_mean,
              "running_var": running_var}

    forward = run_ok(addnorm_bin, tmp_path, "batch_norm", inputs, ["--eval", "--eps", "1e-3"])
    backward = run_ok(addnorm_bin, tmp_path, "batch_norm", {**inputs, "dy": dy},
                      ["--eval", "--eps", "1e-3", "--backward"])

    xt, wt, bt = leaf(x), leaf(weight), leaf(bias)
    y = F.batch_norm(xt, torch.tensor(running_mean, dtype=torch.float64),
                     torch.tensor(running_var, dtype=torch.float64), wt, bt, training=False,
                     eps=1e-3)
    dx, dweight, dbias = backward_of([(y, dy)], [xt, wt, bt])

    assert set(forward) == {"y"}  # inference changes no statistics
    assert_close(forward["y"], y)
    assert set(backward) == {"dx", "dweight", "dbias"}
    assert_close(backward["dx"], dx)
    assert_close(backward["dweight"], dweight)
    assert_close(backward["dbias"], dbias)


@pytest.mark.parametrize("momentum", [None, 0.75])
def test_batch_norm_onnx_convention(addnorm_bin, tmp_path, momentum):
    rng = np.random.default_rng(41)
    x = randn(rng, 6, 3, 4, scale=2.0, shift=-1.0)
    running_mean, running_var = randn(rng, 3), np.abs(randn(rng, 3)) + 0.5
    options = ["--convention", "onnx"]
    if momentum is not None:
        options += ["--momentum", repr(momentum)]
    out = run_ok(addnorm_bin, tmp_path, "batch_norm",
                 {"x": x, "running_mean": running_mean, "running_var": running_var}, options)

    # ONNX BatchNormalization: momentum (default 0.9) weights the old value, variance biased.
    m = 0.9 if momentum is None else momentum
    x64 = x.astype(np.float64)
    batch_mean = x64.mean(axis=(0, 2))
    batch_var = x64.var(axis=(0, 2))
    assert_close(out["running_mean"], m * running_mean + (1 - m) * batch_mean)
    assert_close(out["running_var"], m * running_var + (1 - m) * batch_var)
    expected_y = (x64 - batch_mean[None, :, None]) / np.sqrt(batch_var[None, :, None] + 1e-5)
    assert_close(out["y"], expected_y)


# --- Residual add and dropout --------------------------------------------------------------------

def test_add_forward_and_backward(addnorm_bin, tmp_path):
    rng = np.random.default_rng(51)
    x, residual, dy = randn(rng, 3, 4, 5), randn(rng, 3, 4, 5), randn(rng, 3, 4, 5)
    forward = run_ok(addnorm_bin, tmp_path, "add", {"x": x, "residual": residual})
    backward = run_ok(addnorm_bin, tmp_path, "add", {"x": x, "r": residual, "dy": dy},
                      ["--backward"])
    assert set(forward) == {"y"}
    np.testing.assert_array_equal(forward["y"], x + residual)  # one float32 rounding, as NumPy
    assert set(backward) == {"dx", "dresidual"}
    np.testing.assert_array_equal(backward["dx"], dy)
    np.testing.assert_array_equal(backward["dresidual"], dy)


def test_dropout_forward_and_backward_share_the_mask(addnorm_bin, tmp_path):
    rng = np.random.default_rng(61)
    p = 0.3
    x, dy = randn(rng, 40, 50), randn(rng, 40, 50)
    options = ["--p", repr(p), "--seed", "1234", "--offset", "7"]
    y = run_ok(addnorm_bin, tmp_path, "dropout", {"x": x}, options)["y"]
    dx = run_ok(addnorm_bin, tmp_path, "dropout", {"x": x, "dy": dy},
                options + ["--backward"])["dx"]
    kept_forward, kept_backward = y != 0, dx != 0
    np.testing.assert_array_equal(kept_forward, kept_backward)
    assert abs(kept_forward.mean() - (1 - p)) < 4 * np.sqrt(p * (1 - p) / x.size)
    scale = np.float32(1 / (1 - p))
    np.testing.assert_allclose(y[kept_forward], x[kept_forward] * scale, rtol=1e-6)
    np.testing.assert_allclose(dx[kept_backward], dy[kept_backward] * scale, rtol=1e-6)


def test_dropout_offset_shifts_the_seed_stream(addnorm_bin, tmp_path):
    ones = np.ones(500, np.float32)
    keep = {offset: run_ok(addnorm_bin, tmp_path, "dropout", {"x": ones},
                           ["--p", "0.5", "--seed", "99", "--offset", str(offset)])["y"] != 0
            for offset in (0, 5)}
    # Element i with offset 5 is element i + 5 of the seed's stream.
    np.testing.assert_array_equal(keep[5][:-5], keep[0][5:])
    other_seed = run_ok(addnorm_bin, tmp_path, "dropout", {"x": ones},
                        ["--p", "0.5", "--seed", "100"])["y"] != 0
    assert (other_seed != keep[0]).mean() > 0.3


# --- Fused pre-norm Add & Norm -------------------------------------------------------------------

ADD_NORM_PRE_CASES = [
    # x shape, normalized_shape, weight, bias, dh_next
    ((4, 8), (8,), True, True, True),
    ((4, 8), (8,), True, True, False),
    ((2, 3, 6), (3, 6), False, False, True),
    ((2, 3, 6), (6,), True, False, False),
]


@pytest.mark.parametrize("x_shape, normalized_shape, has_weight, has_bias, has_dh_next",
                         ADD_NORM_PRE_CASES)
def test_add_norm_pre_matches_torch(addnorm_bin, tmp_path, x_shape, normalized_shape, has_weight,
                                    has_bias, has_dh_next):
    rng = np.random.default_rng(71 + len(x_shape))
    x, residual = randn(rng, *x_shape), randn(rng, *x_shape, scale=0.5, shift=0.2)
    weight = randn(rng, *normalized_shape, shift=1.0) if has_weight else None
    bias = randn(rng, *normalized_shape) if has_bias else None
    dy = randn(rng, *x_shape)
    dh_next = randn(rng, *x_shape) if has_dh_next else None
    inputs = {"x": x, "residual": residual}
    if has_weight:
        inputs["weight"] = weight
    if has_bias:
        inputs["bias"] = bias
    options = norm_options(x_shape, normalized_shape, "shape")
    backward_inputs = {**inputs, "dy": dy}
    if has_dh_next:
        backward_inputs["dh_next"] = dh_next

    forward = run_ok(addnorm_bin, tmp_path, "add_norm_pre", inputs, options)
    backward = run_ok(addnorm_bin, tmp_path, "add_norm_pre", backward_inputs,
                      options + ["--backward"])

    xt, rt, wt, bt = leaf(x), leaf(residual), maybe_leaf(weight), maybe_leaf(bias)
    h = xt + rt
    y = F.layer_norm(h, normalized_shape, wt, bt, 1e-5)
    pairs = [(y, dy)] + ([(h, dh_next)] if has_dh_next else [])
    dx, dr, dweight, dbias = backward_of(pairs, [xt, rt, wt, bt])

    assert set(forward) == {"h", "y", "mean", "rstd"}
    np.testing.assert_array_equal(forward["h"], x + residual)
    assert_close(forward["y"], y)
    dims = tuple(range(-len(normalized_shape), 0))
    assert_close(forward["mean"], h.mean(dim=dims))
    assert_close(forward["rstd"], 1.0 / torch.sqrt(h.var(dim=dims, unbiased=False) + 1e-5))
    assert set(backward) == expected_files("dh", dweight=has_weight, dbias=has_bias)
    assert torch.equal(dx, dr)  # h = x + r: both receive dh
    assert_close(backward["dh"], dx)
    if has_weight:
        assert_close(backward["dweight"], dweight)
    if has_bias:
        assert_close(backward["dbias"], dbias)


def test_add_norm_pre_with_rms_norm(addnorm_bin, tmp_path):
    rng = np.random.default_rng(81)
    x, residual, weight = randn(rng, 5, 6), randn(rng, 5, 6), randn(rng, 6, scale=0.3)
    dy, dh_next = randn(rng, 5, 6), randn(rng, 5, 6)
    inputs = {"x": x, "r": residual, "weight": weight}
    options = ["--axis", "-1", "--norm", "rms_norm", "--zero_centered_gamma", "--eps", "1e-6"]
    forward = run_ok(addnorm_bin, tmp_path, "add_norm_pre", inputs, options)
    backward = run_ok(addnorm_bin, tmp_path, "add_norm_pre",
                      {**inputs, "dy": dy, "dh_next": dh_next}, options + ["--backward"])

    xt, rt, wt = leaf(x), leaf(residual), leaf(weight)
    h = xt + rt
    y, rstd = rms_norm_reference(h, (6,), wt, 1e-6, zero_centered=True)
    dx, dweight = backward_of([(y, dy), (h, dh_next)], [xt, wt])

    assert set(forward) == {"h", "y", "rstd"}  # RMSNorm has no mean
    assert_close(forward["y"], y)
    assert_close(forward["rstd"], rstd)
    assert set(backward) == {"dh", "dweight"}
    assert_close(backward["dh"], dx)
    assert_close(backward["dweight"], dweight)


# --- Fused post-norm Add & Norm ------------------------------------------------------------------

@pytest.mark.parametrize("x_shape, normalized_shape", [((4, 8), (8,)), ((2, 3, 4), (3, 4))])
def test_add_norm_post_without_dropout_matches_torch(addnorm_bin, tmp_path, x_shape,
                                                     normalized_shape):
    rng = np.random.default_rng(91 + len(x_shape))
    x, s = randn(rng, *x_shape), randn(rng, *x_shape, scale=0.7)
    weight, bias = randn(rng, *normalized_shape, shift=1.0), randn(rng, *normalized_shape)
    dy = randn(rng, *x_shape)
    inputs = {"x": x, "s": s, "weight": weight, "bias": bias}
    options = norm_options(x_shape, normalized_shape, "shape") + ["--p", "0"]
    forward = run_ok(addnorm_bin, tmp_path, "add_norm_post", inputs, options)
    backward = run_ok(addnorm_bin, tmp_path, "add_norm_post", {**inputs, "dy": dy},
                      options + ["--backward"])

    xt, st, wt, bt = leaf(x), leaf(s), leaf(weight), leaf(bias)
    y = F.layer_norm(xt + st, normalized_shape, wt, bt, 1e-5)
    dx, ds, dweight, dbias = backward_of([(y, dy)], [xt, st, wt, bt])

    assert set(forward) == {"y", "mean", "rstd"}
    assert_close(forward["y"], y)
    assert set(backward) == {"dx", "ds", "dweight", "dbias"}
    assert_close(backward["dx"], dx)
    assert_close(backward["ds"], ds)
    assert_close(backward["dweight"], dweight)
    assert_close(backward["dbias"], dbias)


def test_add_norm_post_dropout_structure(addnorm_bin, tmp_path):
    rng = np.random.default_rng(101)
    p = 0.25
    x, s = randn(rng, 64, 32), randn(rng, 64, 32)
    weight, bias = randn(rng, 32, shift=1.0), randn(rng, 32)
    dy = randn(rng, 64, 32)
    inputs = {"x": x, "s": s, "weight": weight, "bias": bias}
    options = ["--normalized_shape", "32", "--p", repr(p), "--seed", "2024", "--offset", "3"]
    forward = run_ok(addnorm_bin, tmp_path, "add_norm_post", inputs, options)
    backward = run_ok(addnorm_bin, tmp_path, "add_norm_post", {**inputs, "dy": dy},
                      options + ["--backward"])
    dx, ds = backward["dx"], backward["ds"]

    # With a nonzero dx, ds is zero exactly where s was dropped.
    assert np.all(dx != 0)
    kept = ds != 0
    assert abs(kept.mean() - (1 - p)) < 4 * np.sqrt(p * (1 - p) / kept.size)
    np.testing.assert_allclose(ds[kept], dx[kept] / np.float32(1 - p), rtol=1e-6)

    # The forward used that same mask: y = LayerNorm(x + s * mask / (1 - p)), and dx is the
    # LayerNorm gradient at that point.
    xt, wt, bt = leaf(x), leaf(weight), leaf(bias)
    dropped_s = torch.tensor(s.astype(np.float64) * kept / (1 - p))
    y = F.layer_norm(xt + dropped_s, (32,), wt, bt, 1e-5)
    (reference_dx,) = backward_of([(y, dy)], [xt])
    assert_close(forward["y"], y)
    assert_close(dx, reference_dx)

    # A different seed drops different elements.
    other = run_ok(addnorm_bin, tmp_path, "add_norm_post", {**inputs, "dy": dy},
                   ["--normalized_shape", "32", "--p", repr(p), "--seed", "2025", "--backward"])
    assert (other["ds"] != 0).tolist() != kept.tolist()


# --- Float64 inputs ------------------------------------------------------------------------------

def torch64(array, grad=True):
    return torch.tensor(np.asarray(array, dtype=np.float64), requires_grad=grad)


def test_float64_inputs_compute_in_float64_as_pytorch_does(addnorm_bin, tmp_path):
    # x in float64 (not float32 values), weight stored as float32: the whole op runs in float64
    # and writes float64, to PyTorch's float64 result within a few float64 ulp, forward and
    # backward; a float32 x gives float32 outputs that differ from them.
    rng = np.random.default_rng(111)
    x64 = rng.standard_normal((3, 5)) * 1e3 + 1e5
    weight = randn(rng, 5)
    dy = rng.standard_normal((3, 5))
    got = run_ok(addnorm_bin, tmp_path, "layer_norm", {"x": x64, "weight": weight},
                 ["--axis", "1"])
    xt, wt = torch64(x64), torch64(weight)
    y = F.layer_norm(xt, (5,), wt, None, 1e-5)
    for name in ("y", "mean", "rstd"):
        assert got[name].dtype == np.float64
    np.testing.assert_allclose(got["y"], y.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["mean"], x64.mean(axis=1), rtol=1e-14)
    np.testing.assert_allclose(got["rstd"], 1 / np.sqrt(x64.var(axis=1) + 1e-5), rtol=1e-12)
    y.backward(torch.tensor(dy))
    grads = run_ok(addnorm_bin, tmp_path, "layer_norm", {"x": x64, "weight": weight, "dy": dy},
                   ["--axis", "1", "--backward"])
    np.testing.assert_allclose(grads["dx"], xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grads["dweight"], wt.grad.numpy(), rtol=1e-12, atol=1e-12)
    as_float32 = run_ok(addnorm_bin, tmp_path, "layer_norm",
                        {"x": x64.astype(np.float32), "weight": weight}, ["--axis", "1"])
    assert as_float32["y"].dtype == np.float32
    assert np.abs(as_float32["y"] - got["y"]).max() > 1e-9


def test_a_float64_input_after_float32_ones_runs_the_whole_op_in_float64(addnorm_bin, tmp_path):
    # x (loaded first) is float32 and weight float64: the run starts in float32, meets weight,
    # and starts again in float64, with x widened exactly, so it equals a run on x in float64.
    rng = np.random.default_rng(113)
    x = randn(rng, 4, 6)
    weight = rng.standard_normal(6)
    mixed = run_ok(addnorm_bin, tmp_path, "layer_norm", {"x": x, "weight": weight},
                   ["--normalized_shape", "6"])
    wide = run_ok(addnorm_bin, tmp_path, "layer_norm",
                  {"x": x.astype(np.float64), "weight": weight}, ["--normalized_shape", "6"])
    for name in ("y", "mean", "rstd"):
        assert mixed[name].dtype == np.float64
        np.testing.assert_array_equal(mixed[name], wide[name])


@pytest.mark.parametrize("op", ["group_norm", "batch_norm", "add_norm_post"])
def test_float64_inputs_of_the_other_ops_match_pytorch_float64(addnorm_bin, tmp_path, op):
    rng = np.random.default_rng(112)
    x = rng.standard_normal((4, 6, 5)) + 3.0
    weight, bias = rng.standard_normal(6), rng.standard_normal(6)
    xt = torch64(x, grad=False)
    if op == "group_norm":
        got = run_ok(addnorm_bin, tmp_path, op, {"x": x, "weight": weight, "bias": bias},
                     ["--num_groups", "3", "--eps", "0.001"])
        want = F.group_norm(xt, 3, torch64(weight), torch64(bias), 1e-3)
    elif op == "batch_norm":
        running_mean, running_var = np.zeros(6, np.float32), np.ones(6, np.float32)
        got = run_ok(addnorm_bin, tmp_path, op,
                     {"x": x, "weight": weight, "bias": bias, "running_mean": running_mean,
                      "running_var": running_var}, ["--momentum", "0.3"])
        rm, rv = torch.zeros(6, dtype=torch.float64), torch.ones(6, dtype=torch.float64)
        want = F.batch_norm(xt, rm, rv, torch64(weight), torch64(bias), training=True,
                            momentum=0.3, eps=1e-5)
        np.testing.assert_allclose(got["running_mean"], rm.numpy(), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(got["running_var"], rv.numpy(), rtol=1e-13)
    else:
        s = rng.standard_normal((4, 6, 5))
        got = run_ok(addnorm_bin, tmp_path, op, {"x": x, "s": s}, ["--normalized_shape", "5"])
        want = F.layer_norm(xt + torch64(s, grad=False), (5,), eps=1e-5)
    assert got["y"].dtype == np.float64
    np.testing.assert_allclose(got["y"], want.detach().numpy(), rtol=1e-12, atol=1e-12)


# --- Errors --------------------------------------------------------------------------------------

def assert_one_line_error(message, *fragments):
    assert len(message.splitlines()) == 1, message
    assert message.startswith("addnorm: error: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.fixture
def small(tmp_path):
    rng = np.random.default_rng(121)
    return {"x": randn(rng, 3, 4), "w4": randn(rng, 4), "w5": randn(rng, 5),
            "dy": randn(rng, 3, 4), "c4": randn(rng, 4)}


def test_missing_x_names_it(addnorm_bin, tmp_path, small):
    message = run_fails(addnorm_bin, tmp_path, "layer_norm", {"weight": small["w4"]},
                        ["--normalized_shape", "4"])
    assert "--x is required" in message.splitlines()[0]


def test_weight_shape_mismatch_names_the_weight(addnorm_bin, tmp_path, small):
    message = run_fails(addnorm_bin, tmp_path, "layer_norm",
                        {"x": small["x"], "weight": small["w5"]}, ["--normalized_shape", "4"])
    # The library names it gamma; the command line, as its option: weight.
    assert_one_line_error(message, "weight has shape [5], expected [4]")


def test_residual_shape_mismatch_names_it(addnorm_bin, tmp_path, small):
    message = run_fails(addnorm_bin, tmp_path, "add_norm_pre",
                        {"x": small["x"], "residual": small["dy"][:, :3].copy()},
                        ["--normalized_shape", "4"])
    assert_one_line_error(message, "r has shape [3, 3], expected [3, 4]")


def test_normalized_shape_mismatch(addnorm_bin, tmp_path, small):
    message = run_fails(addnorm_bin, tmp_path, "rms_norm", {"x": small["x"]},
                        ["--normalized_shape", "3,4,5"])
    assert_one_line_error(message, "normalized_shape [3, 4, 5]")


def test_negative_eps_and_momentum_beyond_one_are_taken_as_pytorch_takes_them(addnorm_bin,
                                                                             tmp_path):
    """Any finite eps and momentum, as F.layer_norm and F.batch_norm take them: rows whose
    variance + eps is negative come out NaN in both; a momentum of 1.5 extrapolates."""
    rng = np.random.default_rng(41)
    x = randn(rng, 6, 5) * np.array([[0.2], [3.0], [0.5], [2.0], [0.1], [1.0]], np.float32)
    out = run_ok(addnorm_bin, tmp_path, "layer_norm", {"x": x}, ["--axis", "-1", "--eps", "-0.3"])
    want = F.layer_norm(leaf(x), (5,), eps=-0.3).detach().numpy()
    assert np.isnan(want).any() and not np.isnan(want).all()
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-5, equal_nan=True)
    running_mean, running_var = np.zeros(5, np.float32), np.ones(5, np.float32)
    out = run_ok(addnorm_bin, tmp_path, "batch_norm",
                 {"x": x, "running_mean": running_mean, "running_var": running_var},
                 ["--momentum", "1.5"])
    mean, var = torch.zeros(5, dtype=torch.float64), torch.ones(5, dtype=torch.float64)
    want = F.batch_norm(leaf(x), mean, var, training=True, momentum=1.5)
    assert_close(out["y"], want)
    assert_close(out["running_mean"], mean)
    assert_close(out["running_var"], var)


@pytest.mark.parametrize("op, extra", [("dropout", {}), ("add_norm_post", {"s": "x"})])
def test_dropout_probability_one(addnorm_bin, tmp_path, small, op, extra):
    inputs = {"x": small["x"], **{name: small[source] for name, source in extra.items()}}
    options = ["--p", "1"] + (["--axis", "-1"] if op == "add_norm_post" else [])
    message = run_fails(addnorm_bin, tmp_path, op, inputs, options)
    assert_one_line_error(message, "p is 1", "[0, 1)")


def test_unsupported_npy_dtype_names_the_option_and_file(addnorm_bin, tmp_path, small):
    message = run_fails(addnorm_bin, tmp_path, "layer_norm",
                        {"x": small["x"], "weight": np.arange(4)}, ["--axis", "-1"])
    assert_one_line_error(message, "--weight: ", "weight.npy: dtype '<i8' is not supported",
                          "expected float32 ('<f4') or float64 ('<f8')")


def test_backward_needs_dy_and_dy_needs_backward(addnorm_bin, tmp_path, small):
    message = run_fails(addnorm_bin, tmp_path, "layer_norm", {"x": small["x"]},
                        ["--axis", "-1", "--backward"])
    assert_one_line_error(message, "--dy is required with --backward")
    message = run_fails(addnorm_bin, tmp_path, "layer_norm", {"x": small["x"], "dy": small["dy"]},
                        ["--axis", "-1"])
    assert "--dy requires --backward" in message.splitlines()[0]


def test_dy_shape_mismatch(addnorm_bin, tmp_path, small):
    message = run_fails(addnorm_bin, tmp_path, "layer_norm",
                        {"x": small["x"], "dy": small["x"][:2].copy()}, ["--axis", "-1",
                                                                         "--backward"])
    assert_one_line_error(message, "dy has shape [2, 4], expected [3, 4]")


def test_normalized_shape_and_axis_are_exclusive_and_one_is_required(addnorm_bin, tmp_path, small):
    message = run_fails(addnorm_bin, tmp_path, "layer_norm", {"x": small["x"]},
                        ["--axis", "-1", "--normalized_shape", "4"])
    assert "excludes" in message.splitlines()[0]
    message = run_fails(addnorm_bin, tmp_path, "layer_norm", {"x": small["x"]})
    assert_one_line_error(message, "--normalized_shape or --axis is required")
    message = run_fails(addnorm_bin, tmp_path, "layer_norm", {"x": small["x"]},
                        ["--normalized_shape", "4,x"])
    assert_one_line_error(message, "--normalized_shape is '4,x'", "comma-separated")
    message = run_fails(addnorm_bin, tmp_path, "layer_norm", {"x": small["x"]}, ["--axis", "2"])
    assert_one_line_error(message, "axis is 2")


def test_unknown_option_and_option_of_another_op(addnorm_bin, tmp_path, small):
    message = run_fails(addnorm_bin, tmp_path, "layer_norm", {"x": small["x"]},
                        ["--axis", "-1", "--bogus", "1"])
    assert "--bogus" in message.splitlines()[0]
    message = run_fails(addnorm_bin, tmp_path, "layer_norm", {"x": small["x"]},
                        ["--axis", "-1", "--momentum", "0.1"])
    assert "--momentum" in message.splitlines()[0]


def test_batch_norm_running_statistics_errors(addnorm_bin, tmp_path, small):
    message = run_fails(addnorm_bin, tmp_path, "batch_norm", {"x": small["x"]}, ["--eval"])
    assert_one_line_error(message, "running_mean and running_var are absent")
    message = run_fails(addnorm_bin, tmp_path, "batch_norm",
                        {"x": small["x"], "running_mean": small["c4"]})
    assert_one_line_error(message, "--running_var is missing")
    message = run_fails(addnorm_bin, tmp_path, "batch_norm",
                        {"x": small["x"], "running_mean": small["w5"],
                         "running_var": small["w5"]})
    assert_one_line_error(message, "running_mean has shape [5], expected [4]")


def test_fused_norm_options_are_checked(addnorm_bin, tmp_path, small):
    inputs = {"x": small["x"], "residual": small["dy"], "bias": small["w4"]}
    message = run_fails(addnorm_bin, tmp_path, "add_norm_pre", inputs,
                        ["--axis", "-1", "--norm", "rms_norm"])
    # The option it came in as (--bias), not the C++ name (beta).
    assert_one_line_error(message, "bias was given for rms_norm")
    message = run_fails(addnorm_bin, tmp_path, "add_norm_pre", inputs,
                        ["--axis", "-1", "--norm", "group_norm"])
    assert "--norm" in message.splitlines()[0]
    message = run_fails(addnorm_bin, tmp_path, "add_norm_pre",
                        {**inputs, "dy": small["dy"], "dh_next": small["w4"]},
                        ["--axis", "-1", "--backward"])
    assert_one_line_error(message, "dh_next")


def test_float64_input_beyond_float32_s_range_is_added_in_float64(addnorm_bin, tmp_path):
    got = run_ok(addnorm_bin, tmp_path, "add",
                 {"x": np.array([1.0, 1e300]), "residual": np.array([2.0, -1e299])})
    assert got["y"].dtype == np.float64
    np.testing.assert_array_equal(got["y"], np.array([3.0, 1e300 - 1e299]))


def test_output_directory_blocked_by_a_file(addnorm_bin, tmp_path, small):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    result = run_fails(addnorm_bin, tmp_path, "add",
                       {"x": small["x"], "residual": small["dy"]}, out_dir=blocker)
    assert_one_line_error(result, "--out")
    assert blocker.read_text() == "not a directory"


def test_help_lists_ops_and_their_options(addnorm_bin):
    import subprocess
    run_help = subprocess.run([str(addnorm_bin), "run", "--help"], capture_output=True, text=True)
    assert run_help.returncode == 0
    for op in ("add", "dropout", "layer_norm", "rms_norm", "batch_norm", "add_norm_pre",
               "add_norm_post"):
        assert op in run_help.stdout
    assert "float64" in run_help.stdout
    op_help = subprocess.run([str(addnorm_bin), "run", "batch_norm", "--help"],
                             capture_output=True, text=True)
    assert op_help.returncode == 0
    for option in ("--x", "--weight,--gamma", "--running_mean", "--momentum", "--convention",
                   "--eval", "--backward", "--out", "running_mean.npy"):
        assert option in op_help.stdout

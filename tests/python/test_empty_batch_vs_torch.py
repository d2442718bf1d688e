"""Empty batches (tensors with a dimension of 0) through the torch operators, the NumPy face and
`addnorm run`,
against what PyTorch 1.13 itself gives for the same call: the output's shape and dtype, the
parameters' gradients (sums over nothing), and BatchNorm's running statistics, which
F.batch_norm leaves as they were. The C++ library decides these values (src/ops/empty_batch.hpp);
the faces only pass the call through."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import addnorm
import addnorm.torch as at
from run_cli import run_ok

DTYPES = [torch.float32, torch.float64, torch.bfloat16]


def parameters(count, dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(count, generator=generator).to(dtype).requires_grad_()
            for _ in range(2)]


def run(function, shape, dtype, weight, bias, **kwargs):
    """function's output on an empty input of `shape`, and the gradients of weight and bias
    after a backward of its sum."""
    x = torch.empty(shape, dtype=dtype, requires_grad=True)
    y = function(x, weight=weight, bias=bias, **kwargs)
    y.sum().backward()
    return y, x.grad, weight.grad, bias.grad


def expect_same(mine, theirs):
    for a, b in zip(mine, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
        assert torch.equal(a, b), (a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 16), (3, 0, 16)])
def test_layer_norm(dtype, shape):
    mine = run(at.layer_norm, shape, dtype, *parameters(16, dtype, 1), normalized_shape=(16,))
    theirs = run(F.layer_norm, shape, dtype, *parameters(16, dtype, 1), normalized_shape=(16,))
    expect_same(mine, theirs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_group_norm(dtype):
    mine = run(at.group_norm, (0, 6, 5), dtype, *parameters(6, dtype, 2), num_groups=3)
    theirs = run(F.group_norm, (0, 6, 5), dtype, *parameters(6, dtype, 2), num_groups=3)
    expect_same(mine, theirs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_group_norm_of_groups_with_no_positions(dtype):
    """Samples whose groups hold no positions: PyTorch's dweight is NaN there (its formula
    multiplies by the empty group's rstd, 0/0), where the sum over no elements is 0, which
    addnorm gives. Everything else is PyTorch's."""
    y, dx, dweight, dbias = run(at.group_norm, (2, 6, 0), dtype, *parameters(6, dtype, 2),
                                num_groups=3)
    theirs = run(F.group_norm, (2, 6, 0), dtype, *parameters(6, dtype, 2), num_groups=3)
    expect_same((y, dx, dbias), (theirs[0], theirs[1], theirs[3]))
    assert torch.isnan(theirs[2]).all()  # the divergence, while PyTorch has it
    assert torch.equal(dweight, torch.zeros_like(theirs[2]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 4), (0, 4, 7), (0, 4, 3, 3), (2, 4, 0)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(dtype, shape, training):
    generator = torch.Generator().manual_seed(3)
    stats_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    stats = (torch.randn(4, generator=generator).to(stats_dtype),
             (torch.rand(4, generator=generator) + 0.5).to(stats_dtype))
    mine_stats = [s.clone() for s in stats]
    theirs_stats = [s.clone() for s in stats]
    mine = run(at.batch_norm, shape, dtype, *parameters(4, dtype, 4), running_mean=mine_stats[0],
               running_var=mine_stats[1], training=training)
    theirs = run(F.batch_norm, shape, dtype, *parameters(4, dtype, 4),
                 running_mean=theirs_stats[0], running_var=theirs_stats[1], training=training)
    expect_same(mine, theirs)
    expect_same(mine_stats, theirs_stats)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_modules(dtype):
    for mine, theirs, shape in [(at.LayerNorm(8), torch.nn.LayerNorm(8), (0, 8)),
                                (at.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4), (0, 4, 5)),
                                (at.BatchNorm1d(4), torch.nn.BatchNorm1d(4), (0, 4, 5))]:
        mine, theirs = mine.to(dtype), theirs.to(dtype)
        x = torch.empty(shape, dtype=dtype)
        expect_same([mine(x)], [theirs(x)])
        if isinstance(theirs, torch.nn.BatchNorm1d):
            expect_same([mine.running_mean, mine.running_var],
                        [theirs.running_mean, theirs.running_var])


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_the_fused_ops_give_zero_parameter_gradients(norm):
    """PyTorch has no fused op: its unfused x + r, then the norm, is the expectation."""
    weight, bias = parameters(8, torch.float32, 5)
    x = torch.empty((0, 8), requires_grad=True)
    r = torch.empty((0, 8), requires_grad=True)
    kwargs = {"bias": bias} if norm == "layer_norm" else {}
    h, y = at.add_norm_pre(x, r, (8,), weight, norm=norm, **kwargs)
    (h.sum() + y.sum()).backward()
    assert h.shape == y.shape == (0, 8)
    assert torch.equal(weight.grad, torch.zeros(8))
    weight.grad = None
    y = at.add_norm_post(x, r, (8,), weight, norm=norm, p=0.1, **kwargs)
    y.sum().backward()
    assert y.shape == (0, 8) and torch.equal(weight.grad, torch.zeros(8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_numpy_face(dtype):
    """PyTorch's values for the same empty calls are the expectation."""
    x = np.empty((0, 3, 8), dtype)
    weight = np.linspace(0.5, 1.5, 8).astype(dtype)
    bias = np.linspace(-1, 1, 8).astype(dtype)
    y, mean, rstd = addnorm.layer_norm(x, 8, weight, bias, return_stats=True)
    assert y.shape == (0, 3, 8) and mean.shape == rstd.shape == (0, 3)
    dx, dweight, dbias = addnorm.layer_norm_backward(x, x, 8, weight, bias)
    wt, bt = (torch.tensor(p, requires_grad=True) for p in (weight, bias))
    F.layer_norm(torch.tensor(x), (8,), wt, bt).sum().backward()
    assert dx.shape == x.shape
    np.testing.assert_array_equal(dweight, wt.grad.numpy())
    np.testing.assert_array_equal(dbias, bt.grad.numpy())

    running_mean, running_var = weight[:3].copy(), weight[3:6].copy()
    before = running_mean.copy(), running_var.copy()
    y = addnorm.batch_norm(np.empty((0, 3, 4), dtype), running_mean, running_var, training=True)
    assert y.shape == (0, 3, 4)
    np.testing.assert_array_equal(running_mean, before[0])
    np.testing.assert_array_equal(running_var, before[1])


def test_the_command_line(addnorm_bin, tmp_path):
    """`addnorm run` on an empty .npy: PyTorch's shapes and parameter gradients, and BatchNorm's
    running statistics written back unchanged."""
    x = np.empty((0, 3, 8), np.float32)
    weight = np.linspace(0.5, 1.5, 8).astype(np.float32)
    forward = run_ok(addnorm_bin, tmp_path, "layer_norm", {"x": x, "weight": weight},
                     ["--normalized_shape", "8"])
    assert forward["y"].shape == (0, 3, 8) and forward["rstd"].shape == (0, 3)
    backward = run_ok(addnorm_bin, tmp_path, "layer_norm", {"x": x, "dy": x, "weight": weight},
                      ["--normalized_shape", "8", "--backward"])
    wt = torch.tensor(weight, requires_grad=True)
    F.layer_norm(torch.tensor(x), (8,), wt).sum().backward()
    np.testing.assert_array_equal(backward["dweight"], wt.grad.numpy())

    running_mean, running_var = weight[:3].copy(), weight[3:6].copy()
    theirs_mean, theirs_var = torch.tensor(running_mean), torch.tensor(running_var)
    F.batch_norm(torch.empty((0, 3, 4)), theirs_mean, theirs_var, training=True)
    outputs = run_ok(addnorm_bin, tmp_path, "batch_norm",
                     {"x": np.empty((0, 3, 4), np.float32), "running_mean": running_mean,
                      "running_var": running_var}, ["--training"])
    assert outputs["y"].shape == (0, 3, 4)
    np.testing.assert_array_equal(outputs["running_mean"], theirs_mean.numpy())
    np.testing.assert_array_equal(outputs["running_var"], theirs_var.numpy())


def test_instance_norm_follows_pytorchs_rules():
    """No channels: an empty output, as F.instance_norm gives. One position per (sample, channel)
    is refused whatever N and C, as PyTorch refuses it, an empty batch included."""
    x = torch.empty((2, 0, 5))
    expect_same([at.instance_norm(x)], [F.instance_norm(x)])
    for shape in [(0, 3, 1), (2, 3, 1)]:
        with pytest.raises(ValueError, match="Expected more than 1 spatial element"):
            F.instance_norm(torch.empty(shape))
        with pytest.raises(ValueError, match="Expected more than 1 spatial element"):
            at.instance_norm(torch.empty(shape))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_group_norm_double_backward(dtype):
    """Gradients of gradients on an empty batch: PyTorch's zeros, not a reshape error."""
    results = []
    for group_norm in (at.group_norm, F.group_norm):
        weight, bias = parameters(6, dtype, 6)
        x = torch.empty((0, 6, 5), dtype=dtype, requires_grad=True)
        y = group_norm(x, 3, weight, bias)
        (dweight,) = torch.autograd.grad((y * y).sum(), weight, create_graph=True)
        (ddweight,) = torch.autograd.grad(dweight.sum(), weight, allow_unused=True)
        results.append([dweight.detach(), torch.zeros(6, dtype=dtype) if ddweight is None
                        else ddweight])
    expect_same(*results)

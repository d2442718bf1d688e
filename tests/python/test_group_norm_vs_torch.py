"""GroupNorm, InstanceNorm and BatchNorm of any rank through every Python face (NumPy, the torch
operators and modules, patch, TorchScript, `addnorm run`) against PyTorch 1.13's own results,
and the default eps of each norm kind being the same at every entry point of a face."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import addnorm
import addnorm.torch as at
from run_cli import run_fails, run_ok

GROUP_CASES = [((2, 6, 5), 3), ((3, 8, 4, 4), 4), ((2, 4, 3, 2, 5), 2), ((4, 32, 7), 32),
               ((1, 12), 6), ((2, 64, 9, 9), 1)]


def rng_for(shape):
    return np.random.default_rng(sum(shape) * 31 + len(shape))


def inputs(shape, dtype=np.float32):
    rng = rng_for(shape)
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    weight = (rng.standard_normal(c) + 1).astype(dtype)
    bias = rng.standard_normal(c).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    return x, weight, bias, dy


def torch_group_norm(x, groups, weight, bias, dy, eps=1e-5):
    """PyTorch's float64 forward, its statistics and autograd gradients on the same values."""
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(weight, dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(bias, dtype=torch.float64, requires_grad=True)
    y = F.group_norm(xt, groups, wt, bt, eps)
    (y * torch.tensor(dy, dtype=torch.float64)).sum().backward()
    rows = xt.detach().reshape(x.shape[0], groups, -1)
    mean = rows.mean(-1)
    rstd = 1 / torch.sqrt(rows.var(-1, unbiased=False) + eps)
    return [t.detach().numpy() for t in (y, mean, rstd, xt.grad, wt.grad, bt.grad)]


def close(actual, expected, ulps=8):
    """Within a few float32 ulp of the reference, scaled by the reference's magnitude."""
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=ulps * 2**-23,
                               atol=ulps * 2**-23 * scale)


@pytest.mark.parametrize("shape,groups", GROUP_CASES)
def test_numpy_group_norm_matches_torch(shape, groups):
    x, weight, bias, dy = inputs(shape)
    y, mean, rstd, dx, dweight, dbias = torch_group_norm(x, groups, weight, bias, dy)
    got_y, got_mean, got_rstd = addnorm.group_norm(x, groups, weight, bias, return_stats=True)
    close(got_y, y)
    close(got_mean, mean)
    close(got_rstd, rstd)
    got_dx, got_dweight, got_dbias = addnorm.group_norm_backward(dy, x, groups, weight, bias)
    close(got_dx, dx, ulps=32)
    close(got_dweight, dweight, ulps=32)
    close(got_dbias, dbias, ulps=32)
    # float64 arrays run the reference kernels: PyTorch's float64 to its own rounding.
    y64 = addnorm.group_norm(x.astype(np.float64), groups, weight.astype(np.float64),
                             bias.astype(np.float64))
    np.testing.assert_allclose(y64, y, rtol=1e-12, atol=1e-12)


def test_numpy_instance_norm_is_one_group_per_channel():
    x, weight, bias, _ = inputs((3, 5, 11))
    expected = F.instance_norm(torch.tensor(x, dtype=torch.float64),
                               weight=torch.tensor(weight, dtype=torch.float64),
                               bias=torch.tensor(bias, dtype=torch.float64)).numpy()
    close(addnorm.instance_norm(x, weight, bias), expected)


def test_numpy_group_norm_refuses_bad_arguments():
    x = np.ones((2, 6, 3), np.float32)
    with pytest.raises(ValueError, match=r"num_groups is 4, expected a divisor of the 6 channels"):
        addnorm.group_norm(x, 4)
    with pytest.raises(TypeError, match=r"num_groups is a float, expected an int"):
        addnorm.group_norm(x, 2.0)
    with pytest.raises(ValueError, match=r"weight has shape \[5\], expected \[6\]"):
        addnorm.group_norm(x, 2, np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"x has shape \[6\], expected \(N, C, \*\)"):
        addnorm.group_norm(np.ones(6, np.float32), 1)


@pytest.mark.parametrize("dtype,ulps", [(torch.float32, 8), (torch.bfloat16, 2**16),
                                        (torch.float16, 2**13), (torch.float64, 1e-4)])
@pytest.mark.parametrize("shape,groups", GROUP_CASES[:4])
def test_torch_group_norm_forward_and_backward_match_torch(shape, groups, dtype, ulps):
    x, weight, bias, dy = inputs(shape)
    leaves = [torch.tensor(a).to(dtype).requires_grad_() for a in (x, weight, bias)]
    # The reference sees the values exactly as stored in dtype.
    stored = [t.detach().double().numpy() for t in leaves]
    y, _, _, dx, dweight, dbias = torch_group_norm(*stored[:1], groups, *stored[1:],
                                                   torch.tensor(dy).to(dtype).double().numpy())
    out = at.group_norm(leaves[0], groups, leaves[1], leaves[2])
    assert out.dtype == dtype
    out.backward(torch.tensor(dy).to(dtype))
    for got, want in zip([out] + [t.grad for t in leaves], [y, dx, dweight, dbias]):
        assert got.dtype == dtype
        close(got.detach().double().numpy(), want, ulps=ulps)


def test_torch_group_norm_gradcheck_in_float64():
    x = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: at.group_norm(a[0], 3, a[1], a[2]), (x, w, b))


def test_torch_group_norm_refuses_bad_num_groups():
    # RuntimeError, as F.group_norm raises for the same mistake.
    with pytest.raises(RuntimeError, match=r"num_groups is 4, expected a divisor of the 6"):
        at.group_norm(torch.ones(2, 6, 3), 4)


def module_pairs():
    """(addnorm's module, torch's) built alike, with input shapes for each."""
    return [
        (at.GroupNorm(4, 8), torch.nn.GroupNorm(4, 8), (3, 8, 5, 5)),
        (at.GroupNorm(2, 6, affine=False), torch.nn.GroupNorm(2, 6, affine=False), (2, 6, 7)),
        (at.InstanceNorm1d(5), torch.nn.InstanceNorm1d(5), (3, 5, 9)),
        (at.InstanceNorm1d(5), torch.nn.InstanceNorm1d(5), (5, 9)),  # unbatched
        (at.InstanceNorm2d(4, affine=True), torch.nn.InstanceNorm2d(4, affine=True),
         (2, 4, 6, 6)),
        (at.InstanceNorm3d(3, affine=True, track_running_stats=True),
         torch.nn.InstanceNorm3d(3, affine=True, track_running_stats=True), (2, 3, 4, 3, 5)),
        (at.BatchNorm3d(4), torch.nn.BatchNorm3d(4), (3, 4, 2, 3, 5)),
        (at.BatchNorm1d(4, momentum=None), torch.nn.BatchNorm1d(4, momentum=None), (6, 4, 3)),
    ]


@pytest.mark.parametrize("index", range(len(module_pairs())))
def test_modules_match_torch_in_training_and_eval(index):
    ours, theirs, shape = module_pairs()[index]
    theirs.load_state_dict(ours.state_dict())
    torch.manual_seed(index)
    for mode in ("train", "eval"):
        getattr(ours, mode)()
        getattr(theirs, mode)()
        for step in range(2):
            x = torch.randn(*shape) * (1 + step) + step
            got, want = ours(x), theirs(x)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=2e-6)
        for name, buffer in theirs.named_buffers():
            torch.testing.assert_close(dict(ours.named_buffers())[name], buffer, rtol=1e-5,
                                       atol=1e-6)


@pytest.mark.parametrize("index", range(len(module_pairs())))
def test_modules_script(index):
    ours, _, shape = module_pairs()[index]
    scripted = torch.jit.script(ours)
    x = torch.randn(*shape)
    ours.eval()
    scripted.eval()
    torch.testing.assert_close(scripted(x), ours(x))


def test_patch_swaps_every_norm_module_and_unpatch_restores_them():
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.GroupNorm(4, 8),
                                torch.nn.InstanceNorm2d(8, affine=True), torch.nn.BatchNorm2d(8))
    x = torch.randn(2, 3, 9, 9)
    want = model(x)
    weights = [p for p in model.parameters()]
    patched = at.patch(model, batch_norm=True)
    assert [type(m) for m in patched][1:] == [at.GroupNorm, at.InstanceNorm2d, at.BatchNorm2d]
    assert [p for p in patched.parameters()] == weights  # the same Parameter objects
    torch.testing.assert_close(patched(x), want, rtol=1e-5, atol=2e-6)
    restored = at.unpatch(patched)
    assert [type(m) for m in restored][1:] == [torch.nn.GroupNorm, torch.nn.InstanceNorm2d,
                                               torch.nn.BatchNorm2d]


def test_patch_leaves_sync_batch_norm_to_torch_with_a_warning():
    model = torch.nn.Sequential(torch.nn.SyncBatchNorm(4))
    with pytest.warns(UserWarning, match="SyncBatchNorm is left to PyTorch"):
        patched = at.patch(model, batch_norm=True)
    assert type(patched[0]) is torch.nn.SyncBatchNorm


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (2, 3, 2, 4, 5)])
def test_batch_norm_of_rank_four_and_five_matches_torch(shape):
    x, weight, bias, dy = inputs(shape)
    mean, var = np.zeros(shape[1], np.float32), np.ones(shape[1], np.float32)
    y = addnorm.batch_norm(x, mean, var, weight, bias, training=True)
    xt = torch.tensor(x, dtype=torch.float64)
    rm, rv = torch.zeros(shape[1], dtype=torch.float64), torch.ones(shape[1], dtype=torch.float64)
    want = F.batch_norm(xt, rm, rv, torch.tensor(weight, dtype=torch.float64),
                        torch.tensor(bias, dtype=torch.float64), training=True)
    close(y, want.numpy())
    close(mean, rm.numpy())
    close(var, rv.numpy())
    got = at.batch_norm(torch.tensor(x), None, None, torch.tensor(weight), torch.tensor(bias),
                        training=True)
    close(got.numpy(), want.numpy())


def test_cli_group_norm_matches_torch(addnorm_bin, tmp_path):
    x, weight, bias, dy = inputs((3, 6, 4, 2))
    y, mean, rstd, dx, dweight, dbias = torch_group_norm(x, 3, weight, bias, dy, eps=1e-3)
    options = ["--num_groups", "3", "--eps", "0.001"]
    forward = run_ok(addnorm_bin, tmp_path, "group_norm",
                     {"x": x, "weight": weight, "bias": bias}, options)
    backward = run_ok(addnorm_bin, tmp_path, "group_norm",
                      {"x": x, "weight": weight, "bias": bias, "dy": dy}, options + ["--backward"])
    assert set(forward) == {"y", "mean", "rstd"}
    assert set(backward) == {"dx", "dweight", "dbias"}
    for got, want in [(forward["y"], y), (forward["mean"], mean), (forward["rstd"], rstd),
                      (backward["dx"], dx), (backward["dweight"], dweight),
                      (backward["dbias"], dbias)]:
        close(got, want, ulps=32)


# --- one default eps per norm kind, at every entry point of a face ---------------------------

SMALL = (np.random.default_rng(5).standard_normal((3, 16)) * 1e-3).astype(np.float32)


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_numpy_defaults_agree_across_entry_points(norm):
    plain = getattr(addnorm, norm)(SMALL, 16)
    zero = np.zeros_like(SMALL)
    assert np.array_equal(addnorm.add_norm_pre(SMALL, zero, 16, norm=norm)[1], plain)
    assert np.array_equal(addnorm.add_norm_post(SMALL, zero, 16, norm=norm), plain)
    # ...and the rows are small enough that the eps in use shows: 1e-5 and 1e-6 differ here.
    other = 1e-5 if norm == "rms_norm" else 1e-6
    assert not np.array_equal(getattr(addnorm, norm)(SMALL, 16, eps=other), plain)


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_torch_defaults_agree_across_entry_points_and_follow_pytorch(norm):
    x = torch.from_numpy(SMALL)
    plain = getattr(at, norm)(x, 16)
    zero = torch.zeros_like(x)
    assert torch.equal(at.add_norm_pre(x, zero, 16, norm=norm)[1], plain)
    assert torch.equal(at.add_norm_post(x, zero, 16, norm=norm), plain)
    assert torch.equal(at.AddNorm(16, mode="post", norm=norm, dropout=0.0,
                                  elementwise_affine=False)(x, zero), plain)
    # PyTorch's defaults: F.layer_norm's 1e-5; F.rms_norm's (torch >= 2.4) finfo(dtype).eps.
    eps = 1e-5 if norm == "layer_norm" else torch.finfo(torch.float32).eps
    xd = x.double()
    if norm == "layer_norm":
        want = F.layer_norm(xd, (16,), eps=eps)
    else:
        want = xd / torch.sqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
    close(plain.numpy(), want.numpy())


def test_numpy_channel_norm_defaults_follow_pytorch():
    # Channels of tiny spread, so that eps shows: PyTorch's F.group_norm, F.instance_norm and
    # F.batch_norm defaults (1e-5) are the expected values, on float64 copies of the input.
    x = (np.random.default_rng(6).standard_normal((4, 6, 5)) * 1e-3).astype(np.float32)
    xd = torch.from_numpy(x).double()
    cases = [
        (addnorm.group_norm(x, 3), F.group_norm(xd, 3)),
        (addnorm.instance_norm(x), F.instance_norm(xd)),
        (addnorm.batch_norm(x, None, None, training=True),
         F.batch_norm(xd, None, None, training=True)),
    ]
    for got, want in cases:
        close(got, want.numpy())
    # ...and 1e-5 is not 1e-6 here: a wrong default would show.
    assert not np.allclose(addnorm.group_norm(x, 3, eps=1e-6), cases[0][0], rtol=1e-3)
    running_var = np.full(6, 1e-6, np.float32)
    got = addnorm.batch_norm(x, np.zeros(6, np.float32), running_var, training=False)
    want = F.batch_norm(xd, torch.zeros(6).double(), torch.from_numpy(running_var).double(),
                        training=False)
    close(got, want.numpy())
    assert addnorm._addnorm.default_eps("group_norm") == 1e-5
    with pytest.raises(ValueError, match="norm is 'batchnorm', expected 'layer_norm' or"):
        addnorm._addnorm.default_eps("batchnorm")


@pytest.mark.parametrize("opset", [14, 17])
def test_onnx_export_of_group_and_instance_norm(tmp_path, opset):
    onnx = pytest.importorskip("onnx")
    model = torch.nn.Sequential(at.GroupNorm(4, 8), at.InstanceNorm2d(8, affine=True)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_()
    path = tmp_path / "norms.onnx"
    torch.onnx.export(model, torch.randn(2, 8, 5, 5), str(path), opset_version=opset)
    exported = onnx.load(str(path))
    onnx.checker.check_model(exported, full_check=True)
    op_types = [node.op_type for node in exported.graph.node]
    # Two norms, each Reshape (N, G, -1) / Reshape back, and two ReduceMeans of the decomposition.
    assert op_types.count("Reshape") == 4
    assert op_types.count("ReduceMean") == 4
    # weight and bias of each, unsqueezed to (C, 1, 1) (folded into the initializers).
    shapes = [tuple(item.dims) for item in exported.graph.initializer]
    assert shapes.count((8, 1, 1)) == 4
    assert not [node for node in exported.graph.node if node.domain not in ("", "ai.onnx")]


@pytest.mark.parametrize("layout, shape", [(torch.channels_last, (2, 8, 5, 5)),
                                           (torch.channels_last_3d, (2, 8, 3, 5, 2))])
def test_onnx_export_of_channels_last_group_norm(tmp_path, layout, shape):
    """torch.nn.GroupNorm exports on channels-last input; so does addnorm's (whose eager output
    keeps the layout, which ONNX does not have)."""
    onnx = pytest.importorskip("onnx")
    x = torch.randn(shape).to(memory_format=layout)
    for module in (torch.nn.GroupNorm(4, 8), at.GroupNorm(4, 8)):
        path = tmp_path / f"{type(module).__module__}.onnx"
        torch.onnx.export(module.eval(), x, str(path), opset_version=17)
        onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    assert at.GroupNorm(4, 8)(x).is_contiguous(memory_format=layout)


@pytest.mark.parametrize("call", [
    lambda f: f.instance_norm(torch.randn(4, 3, 1)),
    lambda f: f.group_norm(torch.randn(1, 2, 1), 2),
    lambda f: f.group_norm(torch.randn(1, 6), 6),
])
def test_single_value_groups_are_refused_as_pytorch_refuses_them(call):
    with pytest.raises(ValueError) as theirs:
        call(F)
    with pytest.raises(ValueError) as ours:
        call(at)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("call", [
    lambda f: f.group_norm(torch.randn(6), 2),
    lambda f: f.group_norm(torch.randn(2, 6, 3), 0),
    lambda f: f.instance_norm(torch.randn(2, 3, 4), momentum=None),
])
def test_malformed_calls_raise_pytorchs_error(call):
    # The class and message F raises, which come from its Python code and argument parser.
    with pytest.raises(Exception) as theirs:
        call(F)
    with pytest.raises(Exception) as ours:
        call(at)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_modules_refuse_single_value_groups_as_torch_does():
    for ours, theirs in [(at.InstanceNorm1d(3), torch.nn.InstanceNorm1d(3)),
                         (at.GroupNorm(2, 2), torch.nn.GroupNorm(2, 2))]:
        x = torch.randn(1, ours.num_features if hasattr(ours, "num_features") else 2, 1)
        with pytest.raises(ValueError, match="Expected more than 1"):
            theirs(x)
        with pytest.raises(ValueError, match="Expected more than 1"):
            ours(x)


@pytest.mark.parametrize("shape,groups", [((1000000, 0), "1"), ((1, 0), "4000000000"),
                                          ((2, 6, 3), "18446744073709551615"), ((2, 6, 3), "0")])
def test_cli_group_norm_refuses_hostile_sizes_without_allocating(addnorm_bin, tmp_path, shape,
                                                                 groups):
    import resource
    message = run_fails(addnorm_bin, tmp_path, "group_norm",
                        {"x": np.zeros(shape, np.float32)}, ["--num_groups", groups])
    assert "num_groups" in message or "x has shape" in message or "has a zero" in message \
        or "expected" in message
    if groups == "18446744073709551615":  # quoted as typed, not as int64's clamp
        assert "num_groups is 18446744073709551615, expected a divisor of the 6 channels" in message
    # The child's peak memory (all children so far, in KiB) stayed far below what sizing the
    # statistics by num_groups would take (gigabytes).
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 512 * 1024


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape, layout, groups", [((3, 32, 9, 7), torch.channels_last, 8),
                                                   ((2, 12, 4, 5, 3), torch.channels_last_3d, 3),
                                                   ((2, 6, 5, 5), torch.channels_last, 6),
                                                   ((2, 64, 16, 16), torch.channels_last, 16),
                                                   ((1, 32, 8, 8, 8), torch.channels_last_3d, 4)])
def test_channels_last_group_norm_is_pytorchs_float64_result_rounded_once(dtype, shape, layout,
                                                                          groups):
    """A channels-last input, read and written in that order by the library (its own kernel
    for samples of at least 2048 values, the last two shapes; copies for smaller ones):
    PyTorch's float64 group_norm of the stored values, rounded once to the storage type, and the
    layout PyTorch gives."""
    generator = torch.Generator().manual_seed(7)
    x = (torch.randn(shape, generator=generator) * 3 + 1).to(dtype).to(memory_format=layout)
    weight = torch.randn(shape[1], generator=generator)
    bias = torch.randn(shape[1], generator=generator)
    got = at.group_norm(x, groups, weight.to(dtype), bias.to(dtype))
    assert got.is_contiguous(memory_format=layout) and got.dtype == dtype
    assert got.stride() == F.group_norm(x.float(), groups, weight, bias).stride()
    expected = F.group_norm(x.double(), groups, weight.to(dtype).double(), bias.to(dtype).double())
    scale = (expected - bias.to(dtype).double().view(1, -1, *[1] * (len(shape) - 2))).abs() + \
        bias.to(dtype).double().abs().view(1, -1, *[1] * (len(shape) - 2))
    ulp = {torch.float32: 2.0 ** -23, torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}[dtype]
    # Half a unit of the storage type from the rounding, plus float32's few ulp of the terms.
    bound = scale * (0.5 * ulp if dtype != torch.float32 else 0) + scale * 4 * 2.0 ** -23 + 1e-30
    assert ((got.double() - expected).abs() <= bound).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape, layout, groups", [((3, 32, 9, 7), torch.channels_last, 8),
                                                   ((2, 64, 16, 16), torch.channels_last, 16),
                                                   ((1, 32, 8, 8, 8), torch.channels_last_3d, 4)])
@pytest.mark.parametrize("dy_layout", ["same", "contiguous"])
def test_channels_last_group_norm_backward_is_pytorchs_float64_result(dtype, shape, layout,
                                                                      groups, dy_layout):
    """The backward of a channels-last input, read and written in that order (the library's
    kernel for samples of at least 2048 values, the last two shapes; copies for smaller ones),
    whatever grad_y's layout: PyTorch's float64 gradients of the stored values, within a few
    float32 units of their terms (half a unit of the storage type more for dx in bfloat16), and
    dx in PyTorch's layout (contiguous, as autograd.grad shows it: a leaf's .grad is re-strided
    to the leaf's layout whatever the operator returned)."""
    generator = torch.Generator().manual_seed(9)
    x = (torch.randn(shape, generator=generator) * 2 - 1).to(dtype).to(memory_format=layout)
    dy = torch.randn(shape, generator=generator).to(dtype)
    if dy_layout == "same":
        dy = dy.to(memory_format=layout)
    weight = torch.randn(shape[1], generator=generator)
    bias = torch.randn(shape[1], generator=generator)
    grads = []
    for function, cast in ((at.group_norm, lambda t: t), (F.group_norm, lambda t: t.double())):
        leaves = [cast(t).detach().requires_grad_() for t in (x, weight.to(dtype), bias.to(dtype))]
        function(leaves[0], groups, leaves[1], leaves[2]).backward(cast(dy))
        grads.append([leaf.grad for leaf in leaves])
    (dx, dweight, dbias), (want_dx, want_dweight, want_dbias) = grads
    assert dx.dtype == dtype
    strides = []
    for function in (at.group_norm, F.group_norm):
        leaf = x.detach().requires_grad_()
        y = function(leaf, groups, weight.to(dtype), bias.to(dtype))
        strides.append(torch.autograd.grad(y, leaf, dy)[0].stride())
    assert strides[0] == strides[1]
    # dx's terms: rstd * (|g| + |mean(g)| + |x_hat * mean(g * x_hat)|), bounded here by the
    # group's rstd times the largest |g| a few times over.
    rows = want_dx.double().reshape(shape[0], groups, -1)
    xs = x.double().reshape(shape[0], groups, -1)
    rstd = 1 / torch.sqrt(xs.var(-1, unbiased=False) + 1e-5)
    g = (dy.double() * weight.to(dtype).double().view(1, -1, *[1] * (len(shape) - 2)))
    terms = rstd.unsqueeze(-1) * 4 * g.reshape(shape[0], groups, -1).abs().amax(-1, keepdim=True)
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 0.0
    bound = (rows.abs() * 0.5 * ulp + terms * 4 * 2.0 ** -23).reshape(shape)
    assert ((dx.double() - want_dx).abs() <= bound).all()
    for got, want in ((dweight, want_dweight), (dbias, want_dbias)):
        scale = 4 * 2.0 ** -23 * (dy.double().abs() * (xs.abs().max() + 1) * rstd.max()).sum()
        assert ((got.double() - want).abs() <= scale * (0.5 * ulp * 2 ** 23 + 1)).all()


@pytest.mark.parametrize("shape", [(4, 64, 1, 1), (4, 1, 8, 8), (2, 64, 16, 16), (2, 8, 1, 4, 4)])
def test_channels_last_backward_gives_dx_pytorchs_strides(shape):
    """PyTorch 1.13's backward returns dx with standard contiguous strides, also where size-1
    dimensions let the channels-last strides count as contiguous."""
    layout = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    x = torch.randn(shape).to(memory_format=layout)
    groups = 1 if shape[1] == 1 else 4
    strides = []
    for function in (at.group_norm, F.group_norm):
        leaf = x.detach().requires_grad_()
        y = function(leaf, groups)
        strides.append(torch.autograd.grad(y, leaf, torch.ones_like(y))[0].stride())
    assert strides[0] == strides[1]


@pytest.mark.parametrize("given", ["mean", "var"])
def test_instance_norm_with_one_running_statistic_updates_it_as_pytorch(given):
    x = torch.randn(4, 3, 5, generator=torch.Generator().manual_seed(5))
    ours = torch.zeros(3) if given == "mean" else torch.full((3,), 2.0)
    theirs = ours.clone()
    args = (ours, None) if given == "mean" else (None, ours)
    their_args = (theirs, None) if given == "mean" else (None, theirs)
    torch.testing.assert_close(at.instance_norm(x, *args), F.instance_norm(x, *their_args))
    torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("layout, shape", [(torch.channels_last, (3, 4, 4)),
                                           (torch.channels_last_3d, (3, 2, 4, 4))])
def test_instance_norm_with_running_statistics_returns_pytorchs_strides(n, layout, shape):
    """Running statistics take the BatchNorm route over a (1, N*C, *) view; one sample stored
    channels-last reshapes to a view that keeps its strides, yet PyTorch's result is contiguous."""
    x = torch.randn((n,) + shape).to(memory_format=layout)
    expected = F.instance_norm(x, torch.zeros(3), torch.ones(3))
    got = at.instance_norm(x, torch.zeros(3), torch.ones(3))
    assert got.stride() == expected.stride()
    torch.testing.assert_close(got, expected)

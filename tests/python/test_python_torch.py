"""addnorm.torch: autograd functions checked by torch.autograd.gradcheck in float64, the modules
as drop-in replacements for torch.nn's (outputs, gradients, state_dict both ways, BatchNorm's
buffers), AddNorm's dropout seeding, and patch()."""
import copy
import io

import numpy as np
import pytest
import torch
import torch.fx
import torch.nn.functional as F

import addnorm
import addnorm._torch_functions
import addnorm.torch as an
from user_norms import CentredRMSNorm, GemmaRMSNorm, LlamaRMSNorm


def double(*shape, requires_grad=True):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=requires_grad)


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(1234)


def test_gradcheck_functions():
    x, w, b = double(3, 2, 5), double(5), double(5)
    assert torch.autograd.gradcheck(lambda x, w, b: an.layer_norm(x, 5, w, b), (x, w, b))
    assert torch.autograd.gradcheck(lambda x, w: an.layer_norm(x, (2, 5), w.expand(2, 5)), (x, w))
    assert torch.autograd.gradcheck(lambda x, w: an.rms_norm(x, 5, w, 1e-6), (x, w))
    assert torch.autograd.gradcheck(
        lambda x, w: an.rms_norm(x, 5, w, 1e-6, zero_centered_weight=True), (x, w))
    r, s = double(3, 2, 5), double(3, 2, 5)
    assert torch.autograd.gradcheck(
        lambda x, r, w, b: torch.cat([t.flatten() for t in an.add_norm_pre(x, r, 5, w, b)]),
        (x, r, w, b))
    assert torch.autograd.gradcheck(
        lambda x, r, w: an.add_norm_pre(x, r, 5, w, norm="rms_norm")[1], (x, r, w))
    assert torch.autograd.gradcheck(
        lambda x, s, w, b: an.add_norm_post(x, s, 5, w, b, p=0.3, seed=99), (x, s, w, b))
    assert torch.autograd.gradcheck(lambda x: an.dropout(x, 0.4, seed=5), (x,))


@pytest.mark.parametrize("training", [True, False])
def test_gradcheck_batch_norm(training):
    x, w, b = double(4, 3, 2), double(3), double(3)
    mean, var = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    assert torch.autograd.gradcheck(
        lambda x, w, b: an.batch_norm(x, mean, var, w, b, training, 0.1, 1e-5), (x, w, b))


def test_gradcheck_modules():
    x = double(4, 6)
    for module in (an.LayerNorm(6), an.RMSNorm(6, eps=1e-6), an.BatchNorm1d(6),
                   an.AddNorm(6, "post", dropout=0.0), an.AddNorm(6, "post", "rms_norm", 0.0)):
        module = module.double()
        with torch.no_grad():
            for parameter in module.parameters():
                parameter.normal_()
        inputs = (x,) if not isinstance(module, an.AddNorm) else (x, double(4, 6))
        assert torch.autograd.gradcheck(module, inputs), module


def assert_same(ours, theirs, atol=1e-5):
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=atol)


def test_layer_norm_is_a_drop_in_both_ways():
    theirs = torch.nn.LayerNorm((3, 4), eps=1e-6)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours = an.LayerNorm((3, 4), eps=1e-6)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(5, 3, 4, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    assert_same(ours(x), theirs(x2))
    ours(x).square().sum().backward()
    theirs(x2).square().sum().backward()
    assert_same(x.grad, x2.grad, atol=1e-4)
    assert_same(ours.weight.grad, theirs.weight.grad, atol=1e-4)
    assert_same(ours.bias.grad, theirs.bias.grad, atol=1e-4)
    back = torch.nn.LayerNorm((3, 4), eps=1e-6)
    back.load_state_dict(ours.state_dict())
    assert_same(back.weight, ours.weight)
    assert isinstance(ours, torch.nn.LayerNorm) and repr(ours) == repr(theirs)


def test_strided_tensors_are_made_contiguous():
    x = torch.randn(6, 8).t()
    assert_same(an.layer_norm(x, 6), torch.nn.functional.layer_norm(x, (6,)))


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5)])
def test_batch_norm1d_matches_torch_over_steps(momentum, shape):
    theirs = torch.nn.BatchNorm1d(3, momentum=momentum)
    ours = an.BatchNorm1d(3, momentum=momentum)
    ours.load_state_dict(theirs.state_dict())
    for _ in range(3):
        x = torch.randn(*shape) * 2 + 1
        assert_same(ours(x), theirs(x))
    for name in ("running_mean", "running_var"):
        assert_same(getattr(ours, name), getattr(theirs, name))
    assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked) == 3
    ours.eval()
    theirs.eval()
    x = torch.randn(*shape, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    assert_same(ours(x), theirs(x2))
    ours(x).sum().backward()
    theirs(x2).sum().backward()
    assert_same(x.grad, x2.grad)
    back = torch.nn.BatchNorm1d(3)
    back.load_state_dict(ours.state_dict())
    assert_same(back.running_var, ours.running_var)


def test_batch_norm1d_without_running_stats():
    ours = an.BatchNorm1d(3, track_running_stats=False).eval()
    theirs = torch.nn.BatchNorm1d(3, track_running_stats=False).eval()
    x = torch.randn(5, 3)
    assert_same(ours(x), theirs(x))


@pytest.mark.parametrize("name, shape, options", [
    ("BatchNorm1d", (1, 5), {}),
    ("BatchNorm1d", (1, 5, 1), {}),
    ("BatchNorm1d", (1, 5), {"momentum": None}),
    ("BatchNorm2d", (1, 5, 1, 1), {}),
    ("BatchNorm3d", (1, 5, 1, 1, 1), {}),
    ("BatchNorm1d", (1, 5), {"track_running_stats": False, "eval": True}),
])
def test_batch_norm_of_one_value_per_channel_fails_as_pytorchs(name, shape, options):
    """One value per channel with batch statistics: PyTorch's ValueError and message, after the
    same bookkeeping (num_batches_tracked counts the call, the running statistics stay)."""
    options = dict(options)
    evaluate = options.pop("eval", False)
    theirs = getattr(torch.nn, name)(5, **options)
    ours = getattr(an, name)(5, **options)
    if evaluate:
        theirs.eval(), ours.eval()
    x = torch.randn(shape)
    with pytest.raises(ValueError) as expected:
        theirs(x)
    with pytest.raises(ValueError) as got:
        ours(x)
    assert str(got.value) == str(expected.value)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    for key, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value), key
    x = torch.randn(1, 5)
    with pytest.raises(ValueError) as expected:
        torch.nn.functional.batch_norm(x, None, None, training=True)
    with pytest.raises(ValueError) as got:
        an.batch_norm(x, None, None, training=True)
    assert str(got.value) == str(expected.value)
    assert_same(an.batch_norm(x, torch.zeros(5), torch.ones(5)),
                torch.nn.functional.batch_norm(x, torch.zeros(5), torch.ones(5)))


def _norm_stack(dims):
    """A small model with each torch.nn norm addnorm replaces, for 1-D, 2-D or 3-D inputs."""
    conv, batch, instance = {1: (torch.nn.Conv1d, torch.nn.BatchNorm1d, torch.nn.InstanceNorm1d),
                             2: (torch.nn.Conv2d, torch.nn.BatchNorm2d, torch.nn.InstanceNorm2d),
                             3: (torch.nn.Conv3d, torch.nn.BatchNorm3d,
                                 torch.nn.InstanceNorm3d)}[dims]
    torch.manual_seed(dims)
    return torch.nn.Sequential(conv(3, 8, 3), batch(8), torch.nn.GroupNorm(2, 8),
                               instance(8, affine=True), torch.nn.Flatten(1),
                               torch.nn.LayerNorm(8 * 4 ** dims))


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_patched_model_traces_with_torch_fx_as_the_original_does(dims):
    """torch.fx keeps torch.nn's norms whole (call_module nodes); a patched model's drop-ins are
    kept the same way, so it traces to the original's graph, and the traced BatchNorm still
    follows train() and eval(). The classes stay addnorm's, and pickle as such."""
    theirs = torch.fx.symbolic_trace(_norm_stack(dims))
    ours = an.patch(_norm_stack(dims), batch_norm=True)
    assert all(type(m).__module__.startswith("addnorm.") for m in list(ours)[1:4] + [ours[5]])
    eager = copy.deepcopy(ours)
    traced = torch.fx.symbolic_trace(ours)
    assert [(n.op, str(n.target)) for n in traced.graph.nodes] == \
        [(n.op, str(n.target)) for n in theirs.graph.nodes]
    x = torch.randn(4, 3, *[6] * dims)
    outputs = {}
    for training in (True, False, True):
        traced.train(training), eager.train(training)
        outputs[training] = traced(x)
        assert_same(outputs[training], eager(x))
    assert not torch.equal(outputs[True], outputs[False])
    assert_same(ours[1].running_mean, eager[1].running_mean)
    # A user's subclass with a forward of its own is traced into, as one of torch.nn's is.
    class Scaled(an.LayerNorm):
        def forward(self, input):
            return super().forward(input) * 2

    traced_subclass = torch.fx.symbolic_trace(torch.nn.Sequential(Scaled(4)))
    assert "call_module" not in {n.op for n in traced_subclass.graph.nodes}
    buffer = io.BytesIO()
    torch.save(ours, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert [type(m) for m in loaded] == [type(m) for m in ours]
    assert_same(loaded.eval()(x), ours.eval()(x))


@pytest.mark.parametrize("make, shape, layout", [
    (lambda nn: nn.GroupNorm(2, 4), (2, 4, 3, 5), torch.channels_last),
    (lambda nn: nn.GroupNorm(2, 4), (2, 4, 3, 5, 2), torch.channels_last_3d),
    (lambda nn: nn.BatchNorm3d(4), (2, 4, 3, 5, 2), torch.channels_last_3d),
    (lambda nn: nn.BatchNorm2d(4), (2, 4, 3, 5), torch.channels_last),
    (lambda nn: nn.InstanceNorm2d(4, affine=True), (2, 4, 3, 5), torch.channels_last),
    (lambda nn: nn.InstanceNorm3d(4), (2, 4, 3, 5, 2), torch.channels_last_3d),
    (lambda nn: nn.GroupNorm(2, 4), (2, 4, 3, 5), torch.contiguous_format),
    # One channel: channels-last storage that also counts as contiguous, whose strides
    # PyTorch's result does not keep for InstanceNorm, nor for 5-D BatchNorm.
    (lambda nn: nn.InstanceNorm2d(1), (2, 1, 3, 3), torch.channels_last),
    (lambda nn: nn.InstanceNorm3d(1), (2, 1, 2, 3, 3), torch.channels_last_3d),
    (lambda nn: nn.BatchNorm3d(1), (2, 1, 2, 3, 3), torch.channels_last_3d),
    (lambda nn: nn.BatchNorm3d(1).eval(), (2, 1, 2, 3, 3), torch.channels_last_3d),
    (lambda nn: nn.BatchNorm2d(1), (2, 1, 3, 3), torch.channels_last),
    (lambda nn: nn.GroupNorm(1, 1), (2, 1, 2, 3, 3), torch.channels_last_3d),
])
def test_channels_last_input_gives_pytorchs_output_layout(make, shape, layout):
    """Each module returns the memory layout torch.nn's returns for the same input (GroupNorm and
    BatchNorm keep channels-last, InstanceNorm does not), with its values and gradients."""
    theirs, ours = make(torch.nn), make(an)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(shape, dtype=torch.float64).to(memory_format=layout).requires_grad_()
    x2 = x.detach().clone(memory_format=torch.preserve_format).requires_grad_()
    expected, got = theirs.double()(x), ours.double()(x2)
    assert got.stride() == expected.stride()
    torch.testing.assert_close(got, expected)
    g = torch.randn(shape, dtype=torch.float64)
    (expected * g).sum().backward()
    (got * g).sum().backward()
    torch.testing.assert_close(x2.grad, x.grad)


@pytest.mark.parametrize("make, shape, layout", [
    (lambda nn: nn.GroupNorm(2, 4), (2, 4, 3, 5), torch.channels_last),
    (lambda nn: nn.GroupNorm(2, 4), (2, 4, 3, 5, 2), torch.channels_last_3d),
    (lambda nn: nn.BatchNorm2d(4), (2, 4, 3, 5), torch.channels_last),
    (lambda nn: nn.BatchNorm3d(4), (2, 4, 3, 5, 2), torch.channels_last_3d),
])
@pytest.mark.parametrize("traced_on_channels_last", [False, True])
def test_a_traced_module_gives_each_input_pytorchs_layout(make, shape, layout,
                                                          traced_on_channels_last):
    """torch.jit.trace records the operator, not the layout of the input it was traced with:
    called on the other layout, the traced module returns what torch.nn's returns."""
    theirs, ours = make(torch.nn).eval(), make(an).eval()
    ours.load_state_dict(theirs.state_dict())
    example = torch.randn(shape)
    if traced_on_channels_last:
        example = example.to(memory_format=layout)
    traced = torch.jit.trace(ours, example)
    x = torch.randn(shape)
    if not traced_on_channels_last:
        x = x.to(memory_format=layout)
    got, expected = traced(x), theirs(x)
    assert got.stride() == expected.stride()
    torch.testing.assert_close(got, expected)


def strided_like(sizes, order, step=1):
    """A float64 tensor of these sizes whose dimensions are laid out in memory in order
    (outermost first), every step-th element of a larger buffer when step > 1."""
    buffer = torch.randn([sizes[d] * step for d in order], dtype=torch.float64)
    if step > 1:
        buffer = buffer[tuple(slice(None, None, step) for _ in order)]
    return buffer.permute([order.index(d) for d in range(len(sizes))])


# Layouts whose strides PyTorch settles by its own rule: C = 1, all spatial sizes 1 (contiguous
# and channels-last at once), a size-1 spatial dim, a sliced buffer, a permutation that is
# neither layout, in 4-D and 5-D.
LAYOUT_CASES = [((2, 1, 3, 3), [0, 2, 3, 1]), ((2, 4, 1, 1), [0, 2, 3, 1]),
                ((2, 4, 3, 1), [0, 2, 3, 1]), ((1, 2, 1, 1), [0, 2, 3, 1]),
                ((3, 1, 2, 1), [0, 2, 1, 3]), ((2, 4, 3, 3), [0, 1, 3, 2]),
                ((2, 4, 3, 5), [0, 2, 3, 1]), ((2, 1, 3, 3, 3), [0, 2, 3, 4, 1]),
                ((2, 4, 1, 1, 1), [0, 2, 3, 4, 1]), ((2, 4, 1, 3, 2), [0, 2, 3, 4, 1]),
                ((2, 4, 3, 2, 2), [0, 4, 2, 3, 1])]


@pytest.mark.parametrize("step", [1, 2])
@pytest.mark.parametrize("sizes, order", LAYOUT_CASES)
def test_group_norm_output_strides_are_pytorchs(sizes, order, step):
    """F.group_norm returns the strides PyTorch's returns for the same input strides, also where
    the layout is ambiguous (PyTorch's suggested memory format decides), with its values."""
    x = strided_like(sizes, order, step)
    groups = 2 if sizes[1] % 2 == 0 and x.numel() // sizes[0] > 2 else 1  # > 1 value a group
    expected = F.group_norm(x, groups)
    got = an.group_norm(x, groups)
    assert got.stride() == expected.stride()
    torch.testing.assert_close(got, expected)


def test_group_norm_output_strides_are_pytorchs_on_random_layouts():
    rng = np.random.default_rng(11)
    for _ in range(300):
        rank = int(rng.integers(4, 6))
        sizes = [int(s) for s in rng.choice([1, 1, 2, 3], rank)]
        sizes[0] = max(sizes[0], 2)  # more than one value in the group
        order = [int(d) for d in rng.permutation(rank)]
        x = strided_like(sizes, order, int(rng.choice([1, 2])))
        assert an.group_norm(x, 1).stride() == F.group_norm(x, 1).stride(), (
            sizes, x.stride())


def test_rms_norm_module():
    module = an.RMSNorm(4, eps=1e-6)
    assert list(module.state_dict()) == ["weight"]
    x = torch.randn(3, 4)
    expected = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6)
    assert_same(module(x), expected)
    default_eps = an.RMSNorm(4)  # eps=None: the dtype's machine epsilon, as in PyTorch
    x = torch.randn(3, 4, dtype=torch.float64)
    expected = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + torch.finfo(x.dtype).eps)
    assert_same(default_eps.double()(x), expected)


def test_add_norm_post_matches_layer_norm_of_the_sum_and_loads_its_state():
    theirs = torch.nn.LayerNorm(8)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours = an.AddNorm(8, "post", dropout=0.1)
    ours.load_state_dict(theirs.state_dict())
    x, s = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    assert_same(ours.eval()(x, s), theirs(x + s))
    h, y = an.AddNorm(8, "pre").eval()(x, s)
    assert_same(h, x + s)
    assert_same(y, torch.nn.functional.layer_norm(x + s, (8,)))


def test_add_norm_dropout_is_seeded_by_torch_and_regenerated_in_backward():
    module = an.AddNorm(16, "post", dropout=0.5).train()
    x = torch.randn(4, 16)
    s = torch.randn(4, 16, requires_grad=True)
    torch.manual_seed(7)
    first = module(x, s)
    torch.manual_seed(7)
    again = module(x, s)
    assert torch.equal(first, again)
    assert not torch.equal(module(x, s), first)  # the next forward draws a new seed
    upstream = torch.randn(4, 16)  # not a constant: LayerNorm's output rows have a fixed sum
    torch.manual_seed(7)
    (module(x, s) * upstream).sum().backward()
    # Dropped elements of s get no gradient; kept ones do (with overwhelming probability).
    torch.manual_seed(7)
    seed = addnorm._torch_functions.fresh_seed()
    mask = torch.from_numpy(addnorm.dropout_mask((4, 16), 0.5, seed))
    assert torch.all(s.grad[~mask] == 0)
    assert torch.all(s.grad[mask] != 0)


def test_patch_swaps_norms_keeping_parameters():
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.LayerNorm(6), LlamaRMSNorm(6),
                                GemmaRMSNorm(6), CentredRMSNorm(6),
                                torch.nn.Sequential(torch.nn.LayerNorm(6)))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_()
    x = torch.randn(3, 6)
    expected = model(x)
    parameters = list(model.parameters())
    with pytest.warns(UserWarning, match=r"left these modules alone: '4' "
                                         r"\(CentredRMSNorm\)"):
        patched = an.patch(model)
    assert patched is model
    assert type(model[1]) is an.LayerNorm and type(model[5][0]) is an.LayerNorm
    assert type(model[2]) is an.RMSNorm and not model[2].zero_centered_weight
    assert type(model[3]) is an.RMSNorm and model[3].zero_centered_weight
    assert type(model[4]) is CentredRMSNorm
    assert all(a is b for a, b in zip(model.parameters(), parameters))
    assert_same(model(x), expected, atol=1e-4)
    assert type(an.patch(torch.nn.LayerNorm(4))) is an.LayerNorm


def test_tensor_errors():
    with pytest.raises(RuntimeError, match=r"input has dtype Long, expected torch.float32"):
        an.layer_norm(torch.ones(2, 4, dtype=torch.int64), 4)
    with pytest.raises(RuntimeError, match=r"eps is inf, expected a finite value$"):
        an.LayerNorm(4, eps=float("inf"))(torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"mode is 'middle'"):
        an.AddNorm(4, mode="middle")


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("stat", ["running_mean", "running_var"])
def test_running_statistics_that_require_grad_are_refused_as_pytorch_refuses_them(training,
                                                                                   stat):
    """Buffers have no gradient: with grad mode on, PyTorch's batch_norm refuses a running
    statistic that requires one (RuntimeError naming it) and changes nothing; under no_grad
    both compute."""
    x = torch.randn(4, 3, 5)
    stats = {"running_mean": torch.zeros(3), "running_var": torch.ones(3)}
    stats[stat].requires_grad_()
    before = {name: t.detach().clone() for name, t in stats.items()}
    pattern = f"not differentiable with respect to argument '{stat}'"
    for batch_norm in (torch.nn.functional.batch_norm, an.batch_norm):
        with pytest.raises(RuntimeError, match=pattern):
            batch_norm(x, stats["running_mean"], stats["running_var"], training=training)
        for name, t in stats.items():
            assert torch.equal(t.detach(), before[name])
    with torch.no_grad():
        expected = torch.nn.functional.batch_norm(x, before["running_mean"].clone(),
                                                  before["running_var"].clone(),
                                                  training=training)
        got = an.batch_norm(x, stats["running_mean"], stats["running_var"], training=training)
    torch.testing.assert_close(got, expected)


def norm_of_sum(h, norm, weight, bias):
    """PyTorch's own norm of h (RMSNorm as the formula a PyTorch 1.13 user writes)."""
    if norm == "rms_norm":
        eps = torch.finfo(h.dtype).eps
        return h * torch.rsqrt(h.square().mean(-1, keepdim=True) + eps) * weight
    return F.layer_norm(h, h.shape[-1:], weight, bias)


@pytest.mark.parametrize("x_shape, r_shape", [
    ((2, 3, 8), (8,)), ((2, 3, 8), (1, 3, 8)), ((1, 3, 8), (2, 1, 8)), ((8,), (2, 3, 8)),
    ((2, 3, 8), ()),
])
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_fused_ops_broadcast_their_addends_as_x_plus_r_does(x_shape, r_shape, norm):
    """add_norm_pre(x, r) is (x + r, Norm(x + r)) and add_norm_post(x, s) is Norm(x + s) with
    PyTorch's broadcasting: values, and gradients summed back to each addend's shape."""
    x = torch.randn(x_shape, dtype=torch.float64, requires_grad=True)
    r = torch.randn(r_shape, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(8, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(8, dtype=torch.float64, requires_grad=True) if norm == "layer_norm" \
        else None
    leaves = [t for t in (x, r, weight, bias) if t is not None]
    h_expected = x + r
    y_expected = norm_of_sum(h_expected, norm, weight, bias)
    h, y = an.add_norm_pre(x, r, [8], weight, bias, norm=norm)
    assert h.shape == h_expected.shape
    torch.testing.assert_close(h, h_expected)
    torch.testing.assert_close(y, y_expected)
    torch.testing.assert_close(an.add_norm_post(x, r, [8], weight, bias, norm=norm), y_expected)
    gy, gh = torch.randn_like(y), torch.randn_like(h)
    expected = torch.autograd.grad((y_expected * gy).sum() + (h_expected * gh).sum(), leaves)
    got = torch.autograd.grad((y * gy).sum() + (h * gh).sum(), leaves)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        torch.testing.assert_close(g, e)
    assert torch.autograd.gradcheck(
        lambda a, b: an.add_norm_post(a, b, [8], weight, bias, norm=norm), (x, r))


@pytest.mark.parametrize("x_dtype, r_dtype", [
    (torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
    (torch.float32, torch.float64), (torch.float16, torch.bfloat16),
])
def test_fused_ops_promote_their_addends_as_x_plus_r_does(x_dtype, r_dtype):
    """Mixed dtypes take PyTorch's promoted dtype (outputs in it, each gradient in its addend's
    dtype); a 0-dim float64 branch does not promote a float32 stream, as in x + r."""
    x = torch.randn(4, 8).to(x_dtype).requires_grad_()
    r = torch.randn(4, 8).to(r_dtype).requires_grad_()
    h_expected = x + r
    h, y = an.add_norm_pre(x, r, [8])
    assert h.dtype == y.dtype == h_expected.dtype
    torch.testing.assert_close(h, h_expected)
    reference = F.layer_norm(h_expected.double(), [8])
    torch.testing.assert_close(y.double(), reference, rtol=1e-2, atol=1e-2)
    y.sum().backward()
    assert x.grad.dtype == x_dtype and r.grad.dtype == r_dtype
    scalar = torch.tensor(2.0, dtype=torch.float64)
    assert an.add_norm_pre(x.detach().float(), scalar, [8])[0].dtype == torch.float32


def test_post_norm_drops_a_broadcast_branch_before_the_sum():
    """Norm(x + Dropout(s)) with s broadcast: the mask is drawn over s's own elements (as
    x + F.dropout(s) does), so every row sees the same dropped elements; the gradient holds
    against finite differences."""
    x = torch.randn(6, 16, dtype=torch.float64, requires_grad=True)
    s = torch.randn(16, dtype=torch.float64, requires_grad=True)
    y = an.add_norm_post(x, s, [16], p=0.5, seed=7)
    dropped = an.dropout(s, 0.5, seed=7)
    assert (dropped == 0).any() and (dropped != 0).any()
    torch.testing.assert_close(y, F.layer_norm(x + dropped, [16]))
    assert torch.autograd.gradcheck(lambda a, b: an.add_norm_post(a, b, [16], p=0.5, seed=7),
                                    (x, s))


def test_post_norm_refuses_an_integer_branch_to_drop_as_pytorch_does():
    """x + F.dropout(s) raises for an integer s; so does add_norm_post with p > 0, whether s is
    broadcast or not (at p = 0 it is promoted, as x + s)."""
    x = torch.randn(2, 3, 8)
    with pytest.raises(RuntimeError):
        x + F.dropout(torch.ones(2, 3, 8, dtype=torch.int64), 0.1)
    for s in (torch.ones(2, 3, 8, dtype=torch.int64), torch.ones(8, dtype=torch.int64)):
        with pytest.raises(RuntimeError, match="s has dtype Long, expected a floating-point"):
            an.add_norm_post(x, s, [8], p=0.1)
        torch.testing.assert_close(an.add_norm_post(x, s, [8]), F.layer_norm(x + s, [8]))

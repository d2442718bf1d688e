"""torch.ops.addnorm.*: every operator against torch.nn.functional (float32), against a float64
reference computed by PyTorch with a bfloat16/float16 tolerance, gradcheck in float64, CPU
autocast, and bad arguments named in the error. Higher-order and forward-mode derivatives and
functorch: test_torch_higher_order.py."""
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import addnorm
import addnorm.torch  # noqa: F401  (loads torch.ops.addnorm)
from torch_op_cases import dropout_reference, row_norm_cases

ops = torch.ops.addnorm
D = 24


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(2024)


# Each case: (our op on (x, r, weight, bias), torch's definition of the same). The inputs are
# (4, 3, D) activations and (D,) parameters.
CASES = {
    **row_norm_cases(D),
    "dropout": (lambda x, r, w, b: ops.dropout(x, 0.3, 11, 0),
                lambda x, r, w, b: dropout_reference(x, 0.3, 11)),
}


def inputs(dtype, requires_grad=True):
    tensors = (torch.randn(4, 3, D) * 2 + 0.5, torch.randn(4, 3, D), torch.randn(D) + 1,
               torch.randn(D))
    return [t.to(dtype).requires_grad_(requires_grad) for t in tensors]


def forward_and_grads(function, tensors, upstream):
    out = function(*tensors)
    grads = torch.autograd.grad((out * upstream).sum(), tensors, allow_unused=True)
    return [out.detach()] + [g for g in grads if g is not None]


@pytest.mark.parametrize("name", CASES)
def test_float32_matches_torch(name):
    ours, theirs = CASES[name]
    tensors = inputs(torch.float32)
    upstream = torch.randn_like(theirs(*tensors))
    expected = forward_and_grads(theirs, tensors, upstream)
    got = forward_and_grads(ours, tensors, upstream)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)


# One rounding of each output to 16 bits (float32 statistics and sums inside) allows up to two
# units in the last place of the result's largest value: TOLERANCE * max is between half a unit
# and one. (Checked over 30 seeds; a change of eps from 1e-5 to 1e-1 exceeds it.)
TOLERANCE = {torch.bfloat16: 2 ** -8, torch.float16: 2 ** -11}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", CASES)
def test_16_bit_against_float64(name, dtype):
    ours, theirs = CASES[name]
    narrow = inputs(dtype)
    wide = [t.detach().double().requires_grad_() for t in narrow]
    upstream = torch.randn_like(theirs(*wide)).to(dtype)
    expected = forward_and_grads(theirs, wide, upstream.double())
    got = forward_and_grads(ours, narrow, upstream)
    for a, b in zip(got, expected):
        assert a.dtype == dtype
        scale = b.abs().max().item()
        torch.testing.assert_close(a.double(), b, rtol=0, atol=2 * TOLERANCE[dtype] * scale)


def test_16_bit_input_with_float32_parameters():
    """autocast's mixed case: bfloat16 activations, float32 weight and bias."""
    x = torch.randn(5, D).bfloat16()
    w, b = torch.randn(D), torch.randn(D)
    y = ops.layer_norm(x, [D], w, b, 1e-5)
    assert y.dtype == torch.bfloat16
    expected = F.layer_norm(x.double(), (D,), w.double(), b.double())
    torch.testing.assert_close(y.double(), expected, rtol=0,
                               atol=2 * TOLERANCE[torch.bfloat16] * expected.abs().max().item())


def small_float64_inputs():
    x, r, w, b = inputs(torch.float64, requires_grad=False)
    return [t.requires_grad_() for t in (x[:2, :2].clone(), r[:2, :2].clone(), w, b)]


@pytest.mark.parametrize("name", CASES)
def test_float64_gradcheck(name):
    ours, _ = CASES[name]
    assert torch.autograd.gradcheck(ours, small_float64_inputs())


def test_a_dropped_value_is_multiplied_by_zero_as_in_pytorch():
    # PyTorch's dropout is s * mask / (1 - p): a dropped NaN or infinity stays NaN, a dropped
    # negative value is -0. The same in the plain op, the post-norm's h (a NaN in a dropped
    # element of s poisons its row, as in F.layer_norm(x + F.dropout(s))) and its ds.
    s = torch.tensor([[float("nan"), float("inf"), -float("inf"), -2.0, 3.0] * 8] * 3)
    keep = torch.from_numpy(addnorm.dropout_mask(tuple(s.shape), 0.5, 7, 0))
    assert (~keep).any() and keep.any()
    expected = s * keep / 0.5
    got = ops.dropout(s, 0.5, 7, 0)
    assert torch.equal(got.isnan(), expected.isnan())
    finite = ~expected.isnan()
    assert torch.equal(got[finite], expected[finite])
    assert torch.equal(got.signbit()[finite], expected.signbit()[finite])
    x = torch.randn(3, 40)
    # A NaN only where s is dropped still poisons its row of h, as in x + F.dropout(s).
    s_dropped_nan = torch.where(keep, torch.ones_like(s), s)
    y = ops.add_norm_post(x, s_dropped_nan, [40], None, None, 1e-5, "layer_norm", False, 0.5, 7, 0)
    assert y.isnan().all()
    dy = torch.randn(3, 40)
    finite_s = torch.where(s.isfinite(), s, torch.zeros_like(s))
    dx, ds, _, _ = ops.add_norm_post_backward(dy.nan_to_num(), x, finite_s, [40], None, None,
                                              1e-5, "layer_norm", False, 0.5, 7, 0)
    assert torch.equal(ds, dx * keep / 0.5)
    nan_dy = dy.clone()
    nan_dy[0, 0] = float("nan")
    dx, ds, _, _ = ops.add_norm_post_backward(nan_dy, x, finite_s, [40], None, None, 1e-5,
                                              "layer_norm", False, 0.5, 7, 0)
    assert ds[0].isnan().all() and not ds[1:].isnan().any()


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_a_dropout_probability_outside_0_1_is_pytorchs_value_error(p, training):
    x = torch.randn(4, 8)
    for dropout in (F.dropout, addnorm.torch.dropout):
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            dropout(x, p, training)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        addnorm.torch.add_norm_post(x, x, 8, p=p)


def test_dropout_at_p_1_drops_everything_as_pytorch_does():
    x = torch.tensor([[float("nan"), -1.0, 2.0, float("inf")]] * 2, requires_grad=True)
    ours, theirs = addnorm.torch.dropout(x, 1.0), F.dropout(x, 1.0)
    torch.testing.assert_close(ours, theirs, equal_nan=True)
    assert torch.equal(ours.signbit(), theirs.signbit())
    ours.sum().backward()
    torch.testing.assert_close(x.grad, torch.zeros_like(x))
    r = torch.randn(2, 4, requires_grad=True)
    y = addnorm.torch.add_norm_post(r, torch.randn(2, 4), 4, p=1.0)
    torch.testing.assert_close(y, F.layer_norm(r, (4,)))


@pytest.mark.parametrize("given", ["running_mean", "running_var"])
def test_batch_norm_updates_the_one_running_statistic_given_as_pytorch_does(given):
    x = torch.randn(6, 3, 5) * 2 + 1
    results = []
    for batch_norm in (F.batch_norm, addnorm.torch.batch_norm):
        stats = {"running_mean": torch.full((3,), 0.5), "running_var": torch.full((3,), 2.0)}
        other = "running_var" if given == "running_mean" else "running_mean"
        stats[other] = None
        y = batch_norm(x, stats["running_mean"], stats["running_var"], training=True,
                       momentum=0.3)
        results.append((y, stats[given]))
    (y_theirs, stat_theirs), (y_ours, stat_ours) = results
    torch.testing.assert_close(y_ours, y_theirs)
    torch.testing.assert_close(stat_ours, stat_theirs)


def test_dropout_differentiates_to_any_order():
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda x: ops.dropout(x, 0.4, 3, 0), (x,))


def test_inference_batch_norm_uses_and_keeps_running_statistics():
    x = torch.randn(6, 4, 5, requires_grad=True)
    mean, var = torch.randn(4), torch.rand(4) + 0.5
    w, b = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    ours = ops.batch_norm(x, w, b, mean, var, False, 0.1, 1e-5)
    theirs = F.batch_norm(x, mean, var, w, b, False, 0.1, 1e-5)
    torch.testing.assert_close(ours, theirs)
    upstream = torch.randn_like(ours)
    ours_grads = torch.autograd.grad((ours * upstream).sum(), (x, w, b))
    theirs_grads = torch.autograd.grad((theirs * upstream).sum(), (x, w, b))
    for a, e in zip(ours_grads, theirs_grads):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    running_mean, running_var = torch.zeros(4), torch.ones(4)
    their_mean, their_var = running_mean.clone(), running_var.clone()
    ops.batch_norm(x.detach(), None, None, running_mean, running_var, True, 0.2, 1e-5)
    F.batch_norm(x.detach(), their_mean, their_var, None, None, True, 0.2, 1e-5)
    torch.testing.assert_close(running_mean, their_mean)
    torch.testing.assert_close(running_var, their_var)


def rms_norm_composition(x, weight, eps):
    """RMSNorm as PyTorch 1.13 users write it (it has no F.rms_norm)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


# Each norm next to PyTorch's own (or, for RMSNorm, the composition a PyTorch user writes), on
# (8, D, 3) input: LayerNorm and RMSNorm over the last axis, GroupNorm and BatchNorm over
# channels D.
AUTOCAST_NORMS = {
    "layer_norm": (lambda x, w, b: addnorm.torch.layer_norm(x, 3, w[:3], b[:3]),
                   lambda x, w, b: F.layer_norm(x, (3,), w[:3], b[:3])),
    "rms_norm": (lambda x, w, b: addnorm.torch.rms_norm(x, 3, w[:3], eps=1e-6),
                 lambda x, w, b: rms_norm_composition(x, w[:3], 1e-6)),
    "group_norm": (lambda x, w, b: addnorm.torch.group_norm(x, 4, w, b),
                   lambda x, w, b: F.group_norm(x, 4, w, b)),
    "batch_norm": (lambda x, w, b: addnorm.torch.batch_norm(x, None, None, w, b, training=True),
                   lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", AUTOCAST_NORMS)
def test_autocast_leaves_each_norm_in_its_inputs_dtype_as_pytorch_does(name, dtype):
    # PyTorch 1.13's CPU autocast has no rule for its norms: float32 stays float32 and
    # bfloat16 stays bfloat16 (given parameters of the same dtype, which PyTorch requires).
    ours, theirs = AUTOCAST_NORMS[name]
    x = (torch.randn(8, D, 3) * 2 + 0.5).to(dtype)
    weight, bias = (torch.randn(D) + 1).to(dtype), torch.randn(D).to(dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, expected = ours(x, weight, bias), theirs(x, weight, bias)
    assert got.dtype == expected.dtype == dtype
    exact = theirs(x.double(), weight.double(), bias.double())
    # Within twice PyTorch's own error (or one 16-bit rounding) of the float64 result.
    bound = 2 * (expected.double() - exact).abs().max().item() + \
        TOLERANCE.get(dtype, 2 ** -23) * exact.abs().max().item()
    assert (got.double() - exact).abs().max().item() <= bound


@pytest.mark.parametrize("mode", ["pre", "post"])
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_autocast_fused_add_follows_x_plus_r_as_pytorch_does(mode, norm):
    # A float32 residual stream plus a sublayer's bfloat16 output: PyTorch's `x + r` is float32,
    # and so is a norm of it; the fused operator gives the same dtype, values and gradients.
    linear = torch.nn.Linear(D, D)
    weight, bias = torch.randn(D) + 1, torch.randn(D)
    x = torch.randn(8, D, requires_grad=True)

    def run(fused):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            r = linear(x)
            assert r.dtype == torch.bfloat16
            if fused:
                out = (addnorm.torch.add_norm_pre if mode == "pre" else addnorm.torch.add_norm_post)(
                    x, r, D, weight, bias if norm == "layer_norm" else None, eps=1e-5, norm=norm)
            else:
                h = x + r
                y = F.layer_norm(h, (D,), weight, bias, 1e-5) if norm == "layer_norm" else \
                    rms_norm_composition(h, weight, 1e-5)
                out = (h, y) if mode == "pre" else y
        outs = out if mode == "pre" else (out,)
        grads = torch.autograd.grad(sum(o.sum() * (i + 1) for i, o in enumerate(outs)),
                                    [x, linear.weight])
        return outs, grads

    (ours, our_grads), (theirs, their_grads) = run(True), run(False)
    for got, expected in zip(ours, theirs):
        assert got.dtype == expected.dtype == torch.float32
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    for got, expected in zip(our_grads, their_grads):
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_autocast_takes_float32_parameters_beside_bfloat16_activations():
    # Where PyTorch 1.13 refuses a bfloat16 activation with a float32 LayerNorm (the usual case
    # under autocast: a Linear's output into a float32 module), addnorm runs it: bfloat16 out,
    # float32 weight gradients.
    linear, norm = torch.nn.Linear(D, D), addnorm.torch.LayerNorm(D)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(8, D)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        hidden = linear(x)
        with pytest.raises(RuntimeError, match="expected scalar type BFloat16 but found Float"):
            F.layer_norm(hidden, (D,), norm.weight, norm.bias)
        y = norm(hidden)
    assert hidden.dtype == y.dtype == torch.bfloat16
    expected = F.layer_norm(hidden.double(), (D,), norm.weight.double(), norm.bias.double())
    torch.testing.assert_close(y.double(), expected, rtol=0,
                               atol=2 * TOLERANCE[torch.bfloat16] * expected.abs().max().item())
    y.float().square().sum().backward()
    assert norm.weight.grad.dtype == torch.float32 and linear.weight.grad.dtype == torch.float32
    assert torch.isfinite(norm.weight.grad).all() and norm.weight.grad.abs().sum() > 0


# Each op records its own graph node (python/torch_ext/autograd.cpp); these hold the nodes to
# what PyTorch's do with the same misuse. Each pair: our op and torch's, on x (5, D), weight and
# bias (D,).
GRAPH_NORMS = {
    "layer_norm": (lambda x, w, b: ops.layer_norm(x, [D], w, b, 1e-5),
                   lambda x, w, b: F.layer_norm(x, (D,), w, b, 1e-5)),
    "rms_norm": (lambda x, w, b: ops.rms_norm(x, [D], w, 1e-5, False),
                 lambda x, w, b: rms_norm_composition(x, w, 1e-5)),
    "add_norm_post": (lambda x, w, b: ops.add_norm_post(x, x.cos(), [D], w, b, 1e-5),
                      lambda x, w, b: F.layer_norm(x + x.cos(), (D,), w, b, 1e-5)),
    "batch_norm": (lambda x, w, b: ops.batch_norm(x, w, b, None, None, True, 0.1, 1e-5),
                   lambda x, w, b: F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5)),
    "group_norm": (lambda x, w, b: ops.group_norm(x, 4, w, b, 1e-5),
                   lambda x, w, b: F.group_norm(x, 4, w, b, 1e-5)),
}

# The name a tensor's repr gives its grad_fn, as PyTorch's own read `grad_fn=<NativeLayerNorm
# Backward0>`: each op's node, named for the op.
GRAPH_NODE_NAMES = {
    "LayerNormBackward": lambda x, w, b: ops.layer_norm(x, [D], w, b, 1e-5),
    "RmsNormBackward": lambda x, w, b: ops.rms_norm(x, [D], w, 1e-5, False),
    "AddNormPreBackward": lambda x, w, b: ops.add_norm_pre(x, x.cos(), [D], w, b, 1e-5)[1],
    "AddNormPostBackward": lambda x, w, b: ops.add_norm_post(x, x.cos(), [D], w, b, 1e-5),
    "BatchNormBackward": lambda x, w, b: ops.batch_norm(x, w, b, None, None, True, 0.1, 1e-5),
    "GroupNormBackward": lambda x, w, b: ops.group_norm(x, 4, w, b, 1e-5),
    "DropoutBackward": lambda x, w, b: ops.dropout(x, 0.3, 11, 0),
}


@pytest.mark.parametrize("name", GRAPH_NODE_NAMES)
def test_a_tensor_shows_its_nodes_name_as_pytorchs_do(name):
    y = GRAPH_NODE_NAMES[name](*graph_inputs())
    assert y.grad_fn.name() == "addnorm::" + name
    assert repr(y).endswith(f"grad_fn=<{name}>)")
    theirs = F.layer_norm(graph_inputs()[0], (D,))
    assert repr(theirs).endswith("grad_fn=<NativeLayerNormBackward0>)")  # the form followed


def test_the_pre_norms_node_does_not_keep_its_own_output_alive():
    # The node saves h, its own output; saved as such, h is freed with the graph (a node that
    # held h would hold itself: a cycle no garbage collector sees, since it is in C++).
    x, w, b = graph_inputs()
    h, y = ops.add_norm_pre(x, x.cos(), [D], w, b, 1e-5)
    h_ref = weakref.ref(h)
    del h, y  # no backward, which would release what the node saved
    assert h_ref() is None


def test_h_alone_reads_no_saved_tensor_as_x_plus_r_reads_none():
    # h changed in place after the forward, y unused: PyTorch's x + r needs nothing saved and
    # backs up through h; so does the fused node, which checks its saved h only where y's
    # gradient arrives.
    results = []
    for fused in (True, False):
        x, w, b = graph_inputs()
        r = torch.randn(5, D, requires_grad=True)
        if fused:
            h, _ = ops.add_norm_pre(x, r, [D], w, b, 1e-5)
        else:
            h = x + r
            F.layer_norm(h, (D,), w, b, 1e-5)
        h.add_(1)
        h.sum().backward()
        results.append((x.grad, r.grad))
    for ours, theirs in zip(*results):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_the_pre_norm_gives_h_alone_its_gradient_as_pytorch_does():
    # Only h used: y's gradient never arrives, and the norm's part is zero.
    x, w, b = graph_inputs()
    r = torch.randn(5, D, requires_grad=True)
    h, _ = ops.add_norm_pre(x, r, [D], w, b, 1e-5)
    upstream = torch.randn(5, D)
    dx, dr, dw, db = torch.autograd.grad(h, [x, r, w, b], upstream, allow_unused=True)
    torch.testing.assert_close(dx, upstream, rtol=0, atol=0)
    torch.testing.assert_close(dr, upstream, rtol=0, atol=0)
    assert dx.data_ptr() != dr.data_ptr()
    assert dw is None and db is None  # as for torch's x + r, which never reaches the norm


def graph_inputs():
    return (torch.randn(5, D, requires_grad=True), torch.randn(D, requires_grad=True),
            torch.randn(D, requires_grad=True))


@pytest.mark.parametrize("name", GRAPH_NORMS)
def test_a_saved_input_changed_in_place_is_refused_as_pytorch_does(name):
    for function in GRAPH_NORMS[name]:
        x, w, b = graph_inputs()
        leaf = x.detach().clone().requires_grad_()
        inner = leaf * 1.0
        y = function(inner, w, b)
        inner.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


@pytest.mark.parametrize("name", GRAPH_NORMS)
def test_a_second_backward_needs_retain_graph_as_pytorchs_does(name):
    for function in GRAPH_NORMS[name]:
        x, w, b = graph_inputs()
        y = function(x, w, b)
        y.sum().backward(retain_graph=True)
        y.sum().backward()  # retained: runs again and accumulates
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.sum().backward()


@pytest.mark.parametrize("name", GRAPH_NORMS)
def test_gradients_flow_only_where_pytorchs_do(name):
    ours, theirs = GRAPH_NORMS[name]
    for requires in [(True, False, False), (False, True, False), (False, False, True),
                     (False, False, False)]:
        tensors = [t.detach().requires_grad_(r) for t, r in zip(graph_inputs(), requires)]
        got, expected = ours(*tensors), theirs(*tensors)
        assert got.requires_grad == expected.requires_grad
        assert (got.grad_fn is None) == (expected.grad_fn is None)
        if got.requires_grad:
            upstream = torch.randn_like(got)
            wanted = [t for t in tensors if t.requires_grad]
            got_grads = torch.autograd.grad(got, wanted, upstream, allow_unused=True)
            expected_grads = torch.autograd.grad(expected, wanted, upstream, allow_unused=True)
            for g, e in zip(got_grads, expected_grads):
                assert (g is None) == (e is None)
                if e is not None:
                    torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", GRAPH_NORMS)
def test_saved_tensor_hooks_see_the_saved_tensors(name):
    # torch.autograd.graph.saved_tensors_hooks (activation offloading, checkpointing libraries)
    # packs every tensor a node saves and unpacks it for the backward.
    ours, theirs = GRAPH_NORMS[name]
    results, inputs = [], graph_inputs()
    for function in (ours, theirs):
        x, w, b = (t.detach().clone().requires_grad_() for t in inputs)
        packed, unpacked = [], []

        def pack(tensor):
            packed.append(tensor.shape)
            return tensor.clone()

        def unpack(tensor):
            unpacked.append(tensor.shape)
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = function(x, w, b)
        y.backward(torch.ones_like(y))
        assert packed and len(unpacked) == len(packed)
        results.append(x.grad)
    torch.testing.assert_close(results[0], results[1], rtol=1e-4, atol=1e-5)


def test_running_statistics_sharing_memory_are_refused_by_range_not_identity():
    # Strided running statistics reach the library as copies, so its own overlap check cannot see
    # them: the operator compares the memory the views cover (a view passed twice once lost the
    # running mean).
    x = torch.randn(5, 4)
    buffer = torch.zeros(8)
    for mean, var in [(buffer[::2], buffer[::2]), (buffer[0:4], buffer[3:7])]:
        with pytest.raises(RuntimeError, match="running_mean overlaps running_var, expected "
                                               "separate memory"):
            ops.batch_norm(x, None, None, mean, var, True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="running_mean overlaps weight"):
        ops.batch_norm(x, buffer[::2], None, buffer[::2], torch.ones(4), True, 0.1, 1e-5)
    assert torch.equal(buffer, torch.zeros(8)), "a refused call wrote to its arguments"
    # A strided input in the statistics' storage: ATen cannot decide the overlap, so refused.
    storage = torch.randn(40)
    strided = storage.view(10, 4)[::2]
    kept = storage.clone()
    with pytest.raises(RuntimeError, match="running_mean shares its storage with a strided input"):
        ops.batch_norm(strided, None, None, storage[8:12], torch.ones(4), True, 0.1, 1e-5)
    assert torch.equal(storage, kept)
    # Interleaved views share a storage but not a byte: accepted, and updated as PyTorch does.
    theirs = torch.zeros(8)
    theirs[1::2] = 1
    ours = theirs.clone()
    ops.batch_norm(x, None, None, ours[::2], ours[1::2], True, 0.1, 1e-5)
    F.batch_norm(x, theirs[::2], theirs[1::2], None, None, True, 0.1, 1e-5)
    torch.testing.assert_close(ours, theirs)


def test_strided_input_is_made_contiguous():
    x = torch.randn(D, 6).t()
    torch.testing.assert_close(ops.layer_norm(x, [D], None, None, 1e-5),
                               F.layer_norm(x, (D,)))


@pytest.mark.parametrize("call, message", [
    (lambda: ops.layer_norm(torch.ones(2, 4, dtype=torch.int32), [4], None, None, 1e-5),
     r"input has dtype Int, expected torch.float32, torch.bfloat16"),
    (lambda: ops.layer_norm(torch.ones(2, 4), [5], None, None, 1e-5),
     r"normalized_shape is \[5\], expected the trailing dimensions of input, whose shape is "
     r"\[2, 4\]"),
    (lambda: ops.layer_norm(torch.ones(2, 4), [4], torch.ones(3), None, 1e-5),
     r"weight has shape \[3\], expected \[4\]"),
    (lambda: ops.layer_norm(torch.ones(2, 4), [4], torch.ones(4).double(), None, 1e-5),
     r"weight has dtype torch.float64, expected torch.float32 like input"),
    (lambda: ops.layer_norm(torch.ones(2, 4), [4], None, None, float("nan")),
     r"eps is nan, expected a finite value"),
    (lambda: ops.rms_norm(torch.ones(2, 4), [4], None, float("-inf"), False),
     r"eps is -inf, expected a finite value"),
    # float32 holds eps in float32: 1e50 is refused by value, not converted (undefined
    # behaviour) into an infinity.
    (lambda: ops.layer_norm(torch.ones(2, 4), [4], None, None, 1e50),
     r"eps is 1e\+50, beyond float32's range"),
    (lambda: ops.group_norm(torch.ones(2, 4, 3).bfloat16(), 2, None, None, 1e50),
     r"eps is 1e\+50, beyond float32's range"),
    # The fused ops add as x + r does: shapes that do not broadcast get PyTorch's error.
    (lambda: ops.add_norm_pre(torch.ones(2, 4), torch.ones(3, 4), [4]),
     r"The size of tensor a \(2\) must match the size of tensor b \(3\) at non-singleton "
     r"dimension 0"),
    (lambda: ops.add_norm_pre(torch.ones(2, 4), torch.ones(2, 4), [4], norm="batch"),
     r"norm is 'batch', expected 'layer_norm' or 'rms_norm'"),
    (lambda: ops.add_norm_post(torch.ones(2, 4, dtype=torch.int32), torch.ones(2, 4).int(), [4]),
     r"input has dtype Int, expected torch.float32"),
    (lambda: ops.add_norm_post(torch.ones(2, 4), torch.ones(2, 4), [4], p=1.0),
     r"p is 1, expected a dropout probability in \[0, 1\)"),
    (lambda: ops.batch_norm(torch.ones(2, 3, 4, 5, 1, 2), None, None, None, None, True),
     r"input has shape \[2, 3, 4, 5, 1, 2\], expected rank 2 to 5: \(N, C, \*\)"),
    (lambda: ops.batch_norm(torch.ones(2, 3), None, None, None, None, False),
     r"running_mean is None in inference mode"),
    (lambda: ops.batch_norm(torch.ones(2, 3), None, None, torch.zeros(3), torch.ones(3), True,
                            float("inf")),
     r"momentum is inf, expected a finite value"),
    (lambda: ops.dropout(torch.ones(3), 0.5, -2, 0),
     r"seed is -2, expected an integer >= 0"),
    # One rule for p near 1 in every dtype: the mask is drawn at float32's precision.
    (lambda: ops.dropout(torch.ones(3, dtype=torch.float64), 1 - 1e-11, 2, 0),
     r"p is 0.99999999999, which rounds to 1 in float32 \(the dropout mask's precision\)"),
    (lambda: ops.add_norm_post(torch.ones(2, 4), torch.ones(2, 4), [4], p=1 - 1e-11, seed=1),
     r"p is 0.99999999999, which rounds to 1 in float32"),
    # Saved statistics that the forward did not write are refused, never reused or replaced.
    (lambda: ops.layer_norm_backward(torch.ones(2, 4), torch.ones(2, 4), [4], None, None, 1e-5,
                                     torch.zeros(2), torch.ones(2).double()),
     r"rstd has dtype torch.float64, expected torch.float32 \(what the forward saves for "
     r"input of torch.float32\)"),
    (lambda: ops.layer_norm_backward(torch.ones(2, 4), torch.ones(2, 4), [4], None, None, 1e-5,
                                     torch.zeros(2, 1), torch.ones(2)),
     r"mean has shape \[2, 1\], expected \[2\] \(input's dimensions before normalized_shape\)"),
    (lambda: ops.rms_norm_backward(torch.ones(3, 2, 4).bfloat16(), torch.ones(3, 2, 4).bfloat16(),
                                   [4], None, 1e-5, False, torch.ones(3, 2).bfloat16()),
     r"rstd has dtype torch.bfloat16, expected torch.float32"),
    (lambda: ops.add_norm_pre_backward(torch.ones(2, 4), None, torch.ones(2, 4), [4], None, None,
                                       1e-5, "rms_norm", False, torch.zeros(2), torch.ones(2)),
     r"mean is given, expected none for rms_norm \(it does not centre\)"),
    (lambda: ops.add_norm_post_backward(torch.ones(2, 4), torch.ones(2, 4), torch.ones(2, 4), [4],
                                        None, None, 1e-5, "layer_norm", False, 0.0, 0, 0,
                                        torch.zeros(4), torch.ones(2)),
     r"mean has shape \[4\], expected \[2\]"),
    (lambda: ops.layer_norm_backward(torch.ones(2, 4), torch.ones(2, 4), [4], None, None, 1e-5,
                                     torch.zeros(2), None),
     r"mean and rstd: one is given, expected both or neither"),
    # The same checks where the backward runs as a differentiable composite (create_graph).
    (lambda: ops.layer_norm_backward(torch.ones(2, 4), torch.ones(2, 4, requires_grad=True), [4],
                                     None, None, 1e-5, torch.zeros(2, 1), torch.ones(2, 1)),
     r"mean has shape \[2, 1\], expected \[2\]"),
    (lambda: ops.rms_norm_backward(torch.ones(2, 4), torch.ones(2, 4, requires_grad=True), [4],
                                   None, 1e-5, False, torch.ones(2).double()),
     r"rstd has dtype torch.float64, expected torch.float32"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# The same mistake made with PyTorch's own function and with addnorm's: the same class of error.
@pytest.mark.parametrize("ours, theirs", [
    (lambda: ops.layer_norm(torch.ones(2, 4, dtype=torch.int32), [4], None, None, 1e-5),
     lambda: F.layer_norm(torch.ones(2, 4, dtype=torch.int32), (4,))),
    (lambda: ops.layer_norm(torch.ones(2, 4), [5], None, None, 1e-5),
     lambda: F.layer_norm(torch.ones(2, 4), (5,))),
    (lambda: ops.layer_norm(torch.ones(2, 4), [4], torch.ones(3), None, 1e-5),
     lambda: F.layer_norm(torch.ones(2, 4), (4,), torch.ones(3))),
    (lambda: ops.layer_norm(torch.ones(2, 4), [4], torch.ones(4).double(), None, 1e-5),
     lambda: F.layer_norm(torch.ones(2, 4), (4,), torch.ones(4).double())),
    (lambda: ops.group_norm(torch.ones(2, 6, 3), 4, None, None, 1e-5),
     lambda: F.group_norm(torch.ones(2, 6, 3), 4)),
    (lambda: ops.batch_norm(torch.ones(2, 3), None, None, None, None, False),
     lambda: F.batch_norm(torch.ones(2, 3), None, None, training=False)),
    (lambda: ops.batch_norm(torch.ones(2, 3), None, None, torch.zeros(4), torch.ones(4), True),
     lambda: F.batch_norm(torch.ones(2, 3), torch.zeros(4), torch.ones(4), training=True)),
])
def test_errors_are_of_pytorchs_class(ours, theirs):
    with pytest.raises(Exception) as their_error:
        theirs()
    with pytest.raises(Exception) as our_error:
        ours()
    assert type(our_error.value) is type(their_error.value), (our_error.value, their_error.value)


def test_a_float64_call_takes_an_eps_beyond_float32():
    x = torch.arange(8, dtype=torch.float64).reshape(2, 4)
    torch.testing.assert_close(ops.layer_norm(x, [4], None, None, 1e50),
                               F.layer_norm(x, (4,), eps=1e50), rtol=1e-12, atol=0)


X8 = torch.randn(2, 3, 8)
X4D = torch.randn(2, 4, 3, 3)


@pytest.mark.parametrize("name, ours, theirs", [
    ("weight", lambda: addnorm.torch.layer_norm(X8, [8], weight=3),
     lambda: F.layer_norm(X8, [8], weight=3)),
    ("eps", lambda: addnorm.torch.layer_norm(X8, [8], eps="a"),
     lambda: F.layer_norm(X8, [8], eps="a")),
    ("normalized_shape", lambda: addnorm.torch.layer_norm(X8, [8.0]),
     lambda: F.layer_norm(X8, [8.0])),
    ("normalized_shape", lambda: addnorm.torch.layer_norm(X8, "8"),
     lambda: F.layer_norm(X8, "8")),
    ("input", lambda: addnorm.torch.layer_norm(X8.tolist(), [8]),
     lambda: F.layer_norm(X8.tolist(), [8])),
    ("num_groups", lambda: addnorm.torch.group_norm(X4D, 2.0),
     lambda: F.group_norm(X4D, 2.0)),
    ("bias", lambda: addnorm.torch.group_norm(X4D, 2, None, "b"),
     lambda: F.group_norm(X4D, 2, None, "b")),
    ("momentum", lambda: addnorm.torch.batch_norm(X4D, None, None, training=True, momentum="m"),
     lambda: F.batch_norm(X4D, None, None, training=True, momentum="m")),
    ("weight", lambda: addnorm.torch.instance_norm(X4D, weight=[1.0] * 4),
     lambda: F.instance_norm(X4D, weight=[1.0] * 4)),
    ("p", lambda: addnorm.torch.dropout(X8, "0.5"), lambda: F.dropout(X8, "0.5")),
    # Python's truth test would take these; PyTorch's parser wants a bool, or an int not a bool.
    ("training", lambda: addnorm.torch.batch_norm(X4D, None, None, training=1),
     lambda: F.batch_norm(X4D, None, None, training=1)),
    ("training", lambda: addnorm.torch.batch_norm(X4D, None, None, training=np.True_),
     lambda: F.batch_norm(X4D, None, None, training=np.True_)),
    ("training", lambda: addnorm.torch.batch_norm(X4D, None, None, training=None),
     lambda: F.batch_norm(X4D, None, None, training=None)),
    ("training", lambda: addnorm.torch.dropout(X8, 0.5, 1), lambda: F.dropout(X8, 0.5, 1)),
    ("use_input_stats", lambda: addnorm.torch.instance_norm(X4D, use_input_stats=1),
     lambda: F.instance_norm(X4D, use_input_stats=1)),
    ("num_groups", lambda: addnorm.torch.group_norm(X4D, True),
     lambda: F.group_norm(X4D, True)),
    ("num_groups", lambda: addnorm.torch.group_norm(X4D, np.True_),
     lambda: F.group_norm(X4D, np.True_)),
    ("normalized_shape", lambda: addnorm.torch.layer_norm(torch.ones(2, 1), True),
     lambda: F.layer_norm(torch.ones(2, 1), True)),
    ("normalized_shape", lambda: addnorm.torch.layer_norm(torch.ones(2, 1), (True,)),
     lambda: F.layer_norm(torch.ones(2, 1), (True,))),
])
def test_wrongly_typed_arguments_raise_type_error_as_pytorch_does(name, ours, theirs):
    """An argument of the wrong Python type is a TypeError naming it, as torch.nn.functional's
    argument parser raises (torch.ops would raise RuntimeError)."""
    with pytest.raises(TypeError) as their_error:
        theirs()
    with pytest.raises(TypeError, match=name) as our_error:
        ours()
    assert type(our_error.value) is type(their_error.value)


@pytest.mark.parametrize("make_ours, make_theirs", [
    (lambda: addnorm.torch.LayerNorm(8), lambda: torch.nn.LayerNorm(8)),
    (lambda: addnorm.torch.GroupNorm(2, 4), lambda: torch.nn.GroupNorm(2, 4)),
    (lambda: addnorm.torch.BatchNorm2d(4), lambda: torch.nn.BatchNorm2d(4)),
    (lambda: addnorm.torch.InstanceNorm2d(4), lambda: torch.nn.InstanceNorm2d(4)),
])
@pytest.mark.parametrize("wrong", [X4D.tolist(), "x", None, 3.0])
def test_a_module_given_a_wrongly_typed_input_raises_as_torch_nn_does(make_ours, make_theirs,
                                                                      wrong):
    with pytest.raises(Exception) as their_error:
        make_theirs()(wrong)
    with pytest.raises(Exception) as our_error:
        make_ours()(wrong)
    assert type(our_error.value) is type(their_error.value), (our_error.value, their_error.value)


def test_the_modules_without_a_torch_nn_peer_raise_type_error_naming_the_input():
    for call in (lambda: addnorm.torch.RMSNorm(8)(X8.tolist()),
                 lambda: addnorm.torch.AddNorm(8, mode="post")(X8, "s"),
                 lambda: addnorm.torch.AddNorm(8, mode="pre", dropout=0.0)([1.0], X8),
                 lambda: addnorm.torch.AddNorm(8, mode="pre", dropout=0.5)(X8, None)):
        with pytest.raises(TypeError, match="argument '(input|x|s|r)' must be Tensor"):
            call()


@pytest.mark.parametrize("ours, theirs", [
    (lambda: addnorm.torch.batch_norm(torch.ones(1, 4), None, None, training=1),
     lambda: F.batch_norm(torch.ones(1, 4), None, None, training=1)),
    (lambda: addnorm.torch.instance_norm(torch.ones(2, 4, 1), use_input_stats=1),
     lambda: F.instance_norm(torch.ones(2, 4, 1), use_input_stats=1)),
    (lambda: addnorm.torch.group_norm(X4D, False), lambda: F.group_norm(X4D, False)),
    (lambda: addnorm.torch.instance_norm(torch.ones(2, 4, 1), momentum=None),
     lambda: F.instance_norm(torch.ones(2, 4, 1), momentum=None)),
    (lambda: addnorm.torch.group_norm(torch.ones(1, 1), True),
     lambda: F.group_norm(torch.ones(1, 1), True)),
])
def test_pytorchs_own_checks_come_before_the_argument_types(ours, theirs):
    """torch.nn.functional checks sizes in Python before the argument parser sees the types: a
    call wrong in both raises the size's error (ValueError, ZeroDivisionError), as PyTorch's."""
    with pytest.raises(Exception) as their_error:
        theirs()
    with pytest.raises(Exception) as our_error:
        ours()
    assert type(our_error.value) is type(their_error.value), (our_error.value, their_error.value)
    assert type(our_error.value) is not TypeError


@pytest.mark.parametrize("shape", [(d for d in (3,)), iter([3]), {3}, torch.tensor([3])])
def test_a_normalized_shape_that_is_not_a_list_or_tuple_is_refused_as_pytorch_refuses_it(shape):
    x = torch.randn(2, 3)
    with pytest.raises(TypeError):
        F.layer_norm(x, shape)
    with pytest.raises(TypeError, match="normalized_shape"):
        addnorm.torch.layer_norm(x, shape)
    assert addnorm.torch.layer_norm(x, torch.Size([3])).shape == x.shape


@pytest.mark.parametrize("shape", [(1, 4), (4, 1), (1, 1, 4)])
def test_batch_norm_takes_parameters_of_any_shape_holding_a_value_a_channel(shape):
    """F.batch_norm checks that weight and bias hold C values, not that they are vectors. Its
    forward takes them so; its backward then fails (a 1-D TensorAccessor), where addnorm's gives
    each gradient the parameter's shape: PyTorch's, of the same parameters as vectors."""
    x = torch.randn(5, 4, 3, dtype=torch.float64)
    dy = torch.cos(torch.arange(60.0, dtype=torch.float64)).reshape(5, 4, 3)
    results = []
    for function, as_given in ((addnorm.torch.batch_norm, True), (F.batch_norm, False)):
        weight = torch.linspace(0.5, 2.0, 4, dtype=torch.float64).reshape(shape).requires_grad_()
        bias = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64).reshape(shape).requires_grad_()
        w, b = (weight, bias) if as_given else (weight.reshape(-1), bias.reshape(-1))
        y = function(x, None, None, w, b, training=True)
        y.backward(dy)
        results.append((y, weight.grad, bias.grad))
    for ours, theirs in zip(*results):
        assert ours.shape == theirs.shape
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    ones = torch.ones(shape, dtype=torch.float64)
    torch.testing.assert_close(addnorm.torch.batch_norm(x, None, None, ones, training=True),
                               F.batch_norm(x, None, None, ones, training=True),
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="weight has shape \\[2, 4\\], expected \\[4\\]"):
        addnorm.torch.batch_norm(x, None, None, torch.ones(2, 4, dtype=torch.float64),
                                 training=True)


def test_wrongly_typed_arguments_of_the_fused_functions_raise_type_error():
    for call in (lambda: addnorm.torch.rms_norm(X8, [8], eps="a"),
                 lambda: addnorm.torch.add_norm_pre(X8, X8, [8], weight=2),
                 lambda: addnorm.torch.add_norm_post(X8, X8, [8], norm=3),
                 lambda: addnorm.torch.add_norm_post(X8, X8, [8], p=0.1, seed="s")):
        with pytest.raises(TypeError):
            call()
    # The operators' own checks keep PyTorch's RuntimeError.
    with pytest.raises(RuntimeError, match="normalized_shape is \\[5\\]"):
        addnorm.torch.layer_norm(X8, [5])


@pytest.mark.parametrize("p", [0.5, 1.0, 0.0])
def test_dropout_takes_f_dropouts_arguments_inplace_included(p):
    """dropout(input, p, training, inplace) as F.dropout: in place, input holds the result and is
    returned (F.dropout's own behaviour is the expectation for what is not random)."""
    x = torch.randn(64)
    expected = addnorm.torch.dropout(x, p, True, False, 9)
    y = x.clone()
    got = addnorm.torch.dropout(y, p, True, True, 9)
    assert got is y and torch.equal(y, expected)
    theirs = x.clone()
    assert (F.dropout(theirs, p, True, True) is theirs) == (got is y)
    # Positionally, the fourth argument is inplace, as in F.dropout: the seed stays random.
    draws = [addnorm.torch.dropout(x, 0.5, True, False) for _ in range(3)]
    assert not all(torch.equal(draws[0], d) for d in draws[1:])
    # In place through autograd, on a non-leaf: the gradient is the mask scaled, as F.dropout's.
    leaf = torch.randn(64, requires_grad=True)
    inner = leaf * 1.0
    out = addnorm.torch.dropout(inner, 0.5, True, True, 4)
    out.sum().backward()
    torch.testing.assert_close(leaf.grad, (addnorm.torch.dropout(torch.ones(64), 0.5, True, False, 4)))

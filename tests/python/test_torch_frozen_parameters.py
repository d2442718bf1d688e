"""Frozen norm parameters (fine-tuning): the backward operators take PyTorch's output_mask and
leave out the gradients it does not ask for (None, as PyTorch's native backward ops return
them), and autograd through addnorm's norms with frozen weight, bias or input gives torch.nn's
gradients."""
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import addnorm.torch as an

OPS = torch.ops.addnorm


def data(dtype=torch.float64, shape=(5, 3, 16)):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(shape, generator=g, dtype=dtype) * 2 + 0.5
    dy = torch.randn(shape, generator=g, dtype=dtype)
    weight = torch.randn(shape[-1], generator=g, dtype=dtype) + 1
    bias = torch.randn(shape[-1], generator=g, dtype=dtype)
    return x, dy, weight, bias


MASKS3 = [[True, True, True], [True, False, False], [True, True, False], [True, False, True],
          [False, True, True], [False, False, True]]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mask", MASKS3)
def test_layer_norm_backward_output_mask(mask, dtype):
    x, dy, weight, bias = data(dtype)
    full = OPS.layer_norm_backward(dy, x, [16], weight, bias, 1e-5)
    part = OPS.layer_norm_backward(dy, x, [16], weight, bias, 1e-5, output_mask=mask)
    for wanted, got, expected in zip(mask, part, full):
        if wanted:
            assert torch.equal(got, expected)  # the same kernel, the same bits
        else:
            assert got is None


@pytest.mark.parametrize("mask", MASKS3)
def test_add_norm_pre_backward_output_mask(mask):
    x, dy, weight, bias = data(torch.float32)
    dh = torch.randn_like(x)
    full = OPS.add_norm_pre_backward(dy, dh, x, [16], weight, bias, 1e-5)
    part = OPS.add_norm_pre_backward(dy, dh, x, [16], weight, bias, 1e-5, output_mask=mask)
    for wanted, got, expected in zip(mask, part, full):
        assert torch.equal(got, expected) if wanted else got is None


@pytest.mark.parametrize("mask", [[True, True, True, True], [True, True, False, False],
                                  [False, True, True, False], [True, False, False, True]])
def test_add_norm_post_backward_output_mask(mask):
    x, dy, weight, bias = data(torch.float32)
    s = torch.randn_like(x)
    full = OPS.add_norm_post_backward(dy, x, s, [16], weight, bias, 1e-5, p=0.2, seed=4)
    part = OPS.add_norm_post_backward(dy, x, s, [16], weight, bias, 1e-5, p=0.2, seed=4,
                                      output_mask=mask)
    for wanted, got, expected in zip(mask, part, full):
        assert torch.equal(got, expected) if wanted else got is None


@pytest.mark.parametrize("mask", [[True, True], [True, False], [False, True]])
def test_rms_norm_backward_output_mask(mask):
    x, dy, weight, _ = data(torch.float32)
    full = OPS.rms_norm_backward(dy, x, [16], weight, 1e-6)
    part = OPS.rms_norm_backward(dy, x, [16], weight, 1e-6, output_mask=mask)
    for wanted, got, expected in zip(mask, part, full):
        assert torch.equal(got, expected) if wanted else got is None


def test_output_mask_in_the_composite_backward():
    # create_graph: the backward's own autograd kernel (the composite form) honours the mask too.
    x, dy, weight, bias = data()
    x.requires_grad_()
    dx, dweight, dbias = OPS.layer_norm_backward(dy, x, [16], weight, bias, 1e-5,
                                                 output_mask=[True, False, False])
    assert dx.requires_grad and dweight is None and dbias is None
    (ddx,) = torch.autograd.grad(dx.sum(), x)
    x_ref = x.detach().clone().requires_grad_()
    y = F.layer_norm(x_ref, [16], weight, bias, 1e-5)
    (dx_ref,) = torch.autograd.grad(y, x_ref, dy, create_graph=True)
    (ddx_ref,) = torch.autograd.grad(dx_ref.sum(), x_ref)
    torch.testing.assert_close(ddx, ddx_ref, rtol=1e-9, atol=1e-12)


# What does not require a gradient in each case.
FROZEN = [("weight",), ("bias",), ("weight", "bias"), ("input",), ()]


def make(kind, module_set):
    if kind == "layer_norm":
        return module_set.LayerNorm(16, dtype=torch.float64)
    if kind == "rms_norm":
        return an.RMSNorm(16, eps=1e-6, dtype=torch.float64)
    return None


def reference(kind, x, module):
    if kind == "layer_norm":
        return F.layer_norm(x, [16], module.weight, module.bias, 1e-5)
    rms = torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6)
    return x * rms * module.weight


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("frozen", FROZEN)
def test_autograd_with_frozen_parts_gives_torchs_gradients(kind, frozen):
    x, dy, weight, bias = data()
    ours = make(kind, an)
    with torch.no_grad():
        ours.weight.copy_(weight)
        if getattr(ours, "bias", None) is not None:
            ours.bias.copy_(bias)
    for name, parameter in ours.named_parameters():
        parameter.requires_grad_(name not in frozen)
    x_ours = x.clone().requires_grad_("input" not in frozen)
    x_ref = x.clone().requires_grad_("input" not in frozen)
    ours(x_ours).backward(dy)
    reference(kind, x_ref, ours).backward(dy)
    if x_ref.requires_grad:
        torch.testing.assert_close(x_ours.grad, x_ref.grad, rtol=1e-10, atol=1e-12)
    for name, parameter in ours.named_parameters():
        if name in frozen:
            assert parameter.grad is None
    trainable = [p for n, p in ours.named_parameters() if n not in frozen]
    if trainable:
        ours.zero_grad(set_to_none=True)
        expected = torch.autograd.grad(reference(kind, x_ref.detach(), ours), trainable, dy)
        got = torch.autograd.grad(ours(x.clone()), trainable, dy)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("frozen", [("weight",), ("bias",), ("weight", "bias"), ("x", "r")])
def test_pre_norm_with_frozen_parts_gives_torchs_gradients(norm, frozen):
    x, dy, weight, bias = data()
    r = torch.randn_like(x)
    bias = bias if norm == "layer_norm" else None
    def leaves():
        named = {"x": x, "r": r, "weight": weight, "bias": bias}
        return {n: t.clone().requires_grad_(n not in frozen) for n, t in named.items()
                if t is not None}
    ours, refs = leaves(), leaves()
    h, y = an.add_norm_pre(ours["x"], ours["r"], 16, ours["weight"], ours.get("bias"), 1e-5,
                           norm=norm)
    def backward(h, y):  # h needs no gradient when x and r are frozen
        pairs = [(t, g) for t, g in ((h, dy * 0.5), (y, dy)) if t.requires_grad]
        torch.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])
    backward(h, y)
    h_ref = refs["x"] + refs["r"]
    if norm == "layer_norm":
        y_ref = F.layer_norm(h_ref, [16], refs["weight"], refs["bias"], 1e-5)
    else:
        y_ref = h_ref * torch.rsqrt(h_ref.square().mean(-1, keepdim=True) + 1e-5) * refs["weight"]
    backward(h_ref, y_ref)
    for name, tensor in ours.items():
        if name in frozen:
            assert tensor.grad is None
        else:
            torch.testing.assert_close(tensor.grad, refs[name].grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("mask", MASKS3)
def test_batch_norm_backward_output_mask(mask, training, dtype):
    # In eval mode without dweight the kernel does not read x: dx and dbias keep their bits.
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(6, 5, 7, generator=g, dtype=torch.float64) * 3 + 1).to(dtype)
    dy = torch.randn(6, 5, 7, generator=g, dtype=torch.float64).to(dtype)
    weight, bias = torch.rand(5, dtype=dtype) + 0.5, torch.randn(5, dtype=dtype)
    mean, var = torch.randn(5, dtype=dtype), torch.rand(5, dtype=dtype) + 0.5
    full = OPS.batch_norm_backward(dy, x, weight, bias, mean, var, training, 1e-5)
    part = OPS.batch_norm_backward(dy, x, weight, bias, mean, var, training, 1e-5,
                                   output_mask=mask)
    for wanted, got, expected in zip(mask, part, full):
        assert torch.equal(got, expected) if wanted else got is None


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("frozen", [("weight",), ("bias",), ("weight", "bias"), ("input",)])
def test_batch_norm_with_frozen_parts_gives_torchs_gradients(frozen, training):
    g = torch.Generator().manual_seed(6)
    x = torch.randn(6, 5, 7, generator=g, dtype=torch.float64) * 3 + 1
    dy = torch.randn(6, 5, 7, generator=g, dtype=torch.float64)
    modules = [an.BatchNorm1d(5, dtype=torch.float64), torch.nn.BatchNorm1d(5, dtype=torch.float64)]
    for module in modules:
        with torch.no_grad():
            module.running_mean.copy_(torch.linspace(-0.5, 0.5, 5))
            module.running_var.copy_(torch.linspace(0.5, 2, 5))
        module.train(training)
    assert_frozen_modules_agree(modules, x, dy, frozen)


def assert_frozen_modules_agree(modules, x, dy, frozen):
    """Runs addnorm's and torch's module (in that order, of the same kind and settings) on x with
    the named parts frozen and dy upstream: the same gradients, and none for a frozen part."""
    inputs = []
    for module in modules:
        channels = module.weight.shape[0]
        with torch.no_grad():
            module.weight.copy_(torch.linspace(0.5, 1.5, channels))
            module.bias.copy_(torch.linspace(-1, 1, channels))
        for name, parameter in module.named_parameters():
            parameter.requires_grad_(name not in frozen)
        inputs.append(x.clone().requires_grad_("input" not in frozen))
        module(inputs[-1]).backward(dy)
    ours, theirs = modules
    for (name, p_ours), p_theirs in zip(ours.named_parameters(), theirs.parameters()):
        if name in frozen:
            assert p_ours.grad is None
        else:
            torch.testing.assert_close(p_ours.grad, p_theirs.grad, rtol=1e-10, atol=1e-12)
    if "input" not in frozen:
        torch.testing.assert_close(inputs[0].grad, inputs[1].grad, rtol=1e-10, atol=1e-12)


class MaskSpy(TorchDispatchMode):
    """Records the output_mask each addnorm backward operator is called with; every call passes
    through."""

    def __init__(self):
        super().__init__()
        self.masks = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        if name.startswith("addnorm.") and "backward" in name:
            last = func._schema.arguments[-1]
            assert last.name == "output_mask"
            # The dispatcher leaves out trailing arguments equal to their default (all true).
            given = kwargs.get("output_mask")
            if given is None and len(args) == len(func._schema.arguments):
                given = args[-1]
            self.masks[name.split(".")[1]] = list(given if given is not None
                                                  else last.default_value)
        return func(*args, **kwargs)


def leaves(present, trainable):
    """x, r, weight and bias (None where not in present), each requiring grad when trainable."""
    g = torch.Generator().manual_seed(8)
    tensors = {n: torch.randn(4, 16, generator=g) if n in "xr" else torch.randn(16, generator=g)
               for n in ("x", "r", "weight", "bias")}
    return {n: t.requires_grad_(n in trainable) if n in present else None
            for n, t in tensors.items()}


@pytest.mark.parametrize("present", [("weight", "bias"), ("weight",), ("bias",), ()])
@pytest.mark.parametrize("trainable", [("x",), ("weight",), ("bias",), ("x", "weight", "bias"),
                                       ("r", "bias")])
def test_autograd_asks_the_operators_for_what_the_graph_needs(present, trainable):
    # The mask reaching each backward operator names what some edge needs; absent weight or
    # bias shift the pre-norm's edges (x, r, then the ones given).
    t = leaves(("x", "r") + present, trainable)
    wanted = lambda name: t[name] is not None and t[name].requires_grad  # noqa: E731
    spy = MaskSpy()
    y = an.layer_norm(t["x"], 16, t["weight"], t["bias"])
    h, y_pre = an.add_norm_pre(t["x"], t["r"], 16, t["weight"], t["bias"])
    y_post = an.add_norm_post(t["x"], t["r"], 16, t["weight"], t["bias"], p=0.1, seed=3)
    outputs = [out for out in (y, y_pre, y_post) if out.requires_grad]
    if not outputs:
        return
    with spy:
        torch.autograd.backward([out.sum() for out in outputs])
    if y.requires_grad:
        assert spy.masks["layer_norm_backward"] == [wanted("x"), wanted("weight"), wanted("bias")]
    assert spy.masks["add_norm_pre_backward"] == [wanted("x") or wanted("r"), wanted("weight"),
                                                  wanted("bias")]
    assert spy.masks["add_norm_post_backward"] == [wanted("x"), wanted("r"), wanted("weight"),
                                                   wanted("bias")]


def test_grad_of_one_input_asks_for_that_gradient_alone():
    # torch.autograd.grad(y, x) with trainable weight and bias: PyTorch's node asks for dx alone
    # (the task's own edges), and so does addnorm's.
    t = leaves(("x", "r", "weight", "bias"), ("x", "weight", "bias"))
    spy = MaskSpy()
    y = an.layer_norm(t["x"], 16, t["weight"], t["bias"])
    _, y_pre = an.add_norm_pre(t["x"], t["r"], 16, t["weight"], t["bias"])
    with spy:
        torch.autograd.grad([y.sum(), y_pre.sum()], [t["x"]])
    assert spy.masks["layer_norm_backward"] == [True, False, False]
    assert spy.masks["add_norm_pre_backward"] == [True, False, False]


@pytest.mark.parametrize("present", [("weight", "bias"), ("bias",), ("weight",)])
@pytest.mark.parametrize("trainable", [("x",), ("weight",), ("x", "bias"), ("bias",)])
def test_batch_norm_asks_for_what_the_graph_needs(trainable, present):
    t = leaves(("x",) + present, trainable)
    mean, var = torch.zeros(16), torch.ones(16)
    spy = MaskSpy()
    y = an.batch_norm(t["x"], mean, var, t["weight"], t["bias"], False)
    if not y.requires_grad:  # the one trainable tensor is absent
        return
    with spy:
        y.sum().backward()
    assert spy.masks["batch_norm_backward"] == [n in trainable and n in ("x",) + present
                                                for n in ("x", "weight", "bias")]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mask", MASKS3)
def test_group_norm_backward_output_mask(mask, dtype):
    g = torch.Generator().manual_seed(9)
    x = (torch.randn(3, 6, 5, generator=g, dtype=torch.float64) * 2 + 1).to(dtype)
    dy = torch.randn(3, 6, 5, generator=g, dtype=torch.float64).to(dtype)
    weight, bias = torch.rand(6, dtype=dtype) + 0.5, torch.randn(6, dtype=dtype)
    full = OPS.group_norm_backward(dy, x, 3, weight, bias, 1e-5)
    part = OPS.group_norm_backward(dy, x, 3, weight, bias, 1e-5, output_mask=mask)
    for wanted, got, expected in zip(mask, part, full):
        assert torch.equal(got, expected) if wanted else got is None


@pytest.mark.parametrize("module", ["GroupNorm", "InstanceNorm1d"])
@pytest.mark.parametrize("frozen", [("weight",), ("bias",), ("weight", "bias"), ("input",)])
def test_group_norm_with_frozen_parts_gives_torchs_gradients(frozen, module):
    g = torch.Generator().manual_seed(10)
    x = torch.randn(4, 6, 7, generator=g, dtype=torch.float64) * 3 + 1
    dy = torch.randn(4, 6, 7, generator=g, dtype=torch.float64)
    make = {"GroupNorm": lambda nn: nn.GroupNorm(3, 6, dtype=torch.float64),
            "InstanceNorm1d": lambda nn: nn.InstanceNorm1d(6, affine=True, dtype=torch.float64)}
    assert_frozen_modules_agree([make[module](an), make[module](torch.nn)], x, dy, frozen)


@pytest.mark.parametrize("present", [("weight", "bias"), ("bias",), ("weight",), ()])
@pytest.mark.parametrize("trainable", [("x",), ("weight",), ("x", "bias"), ("bias",)])
def test_group_norm_asks_for_what_the_graph_needs(trainable, present):
    t = leaves(("x",) + present, trainable)
    spy = MaskSpy()
    y = an.group_norm(t["x"], 4, t["weight"], t["bias"])
    if not y.requires_grad:  # the one trainable tensor is absent
        return
    with spy:
        y.sum().backward()
    assert spy.masks["group_norm_backward"] == [n in trainable and n in ("x",) + present
                                                for n in ("x", "weight", "bias")]


@pytest.mark.parametrize("frozen", [("weight",), ("bias",), ("weight", "bias"), ("s",), ("x",)])
def test_post_norm_with_frozen_parts_gives_torchs_gradients(frozen):
    x, dy, weight, bias = data()
    s = torch.randn_like(x)
    named = {"x": x, "s": s, "weight": weight, "bias": bias}
    ours = {n: t.clone().requires_grad_(n not in frozen) for n, t in named.items()}
    refs = {n: t.clone().requires_grad_(n not in frozen) for n, t in named.items()}
    an.add_norm_post(ours["x"], ours["s"], 16, ours["weight"], ours["bias"], 1e-5,
                     p=0.0).backward(dy)
    F.layer_norm(refs["x"] + refs["s"], [16], refs["weight"], refs["bias"], 1e-5).backward(dy)
    for name, tensor in ours.items():
        if name in frozen:
            assert tensor.grad is None
        else:
            torch.testing.assert_close(tensor.grad, refs[name].grad, rtol=1e-10, atol=1e-12)

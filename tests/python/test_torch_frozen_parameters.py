"""Frozen norm parameters (fine-tuning): the backward operators take PyTorch's output_mask and
leave out the gradients it does not ask for (None, as PyTorch's native backward ops return
them), and autograd through addnorm's norms with frozen weight, bias or input gives torch.nn's
gradients."""
import pytest
import torch
import torch.nn.functional as F

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

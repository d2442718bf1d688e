"""addnorm.torch under PyTorch's other kinds of differentiation (issue 33 items 1-3): forward-mode
AD, functorch's transforms (grad, vmap, jacrev, jacfwd, per-sample gradients) and double
backward (gradgradcheck, Hessians), every operator in float64, each compared with what PyTorch's
own functions give for the same inputs."""
import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

import addnorm.torch as at
from torch_op_cases import row_norm_cases

functorch = pytest.importorskip("functorch")
ops = torch.ops.addnorm
D = 6


# (our operator, PyTorch's definition of the same) on x (2, 3, D), r (2, 3, D), weight, bias (D);
# BatchNorm in inference and GroupNorm beside the shared table.
CASES = {
    **row_norm_cases(D),
    "batch_norm_inference": (
        lambda x, r, w, b: ops.batch_norm(x.transpose(1, 2), w, b, STATS[0], STATS[1], False,
                                          0.1, 1e-5),
        lambda x, r, w, b: F.batch_norm(x.transpose(1, 2), STATS[0], STATS[1], w, b, False,
                                        0.1, 1e-5)),
    "group_norm": (lambda x, r, w, b: ops.group_norm(x.transpose(1, 2), 3, w, b, 1e-5),
                   lambda x, r, w, b: F.group_norm(x.transpose(1, 2), 3, w, b, 1e-5)),
}
STATS = (torch.linspace(-0.5, 0.5, D, dtype=torch.float64),
         torch.linspace(0.5, 2.0, D, dtype=torch.float64))


def inputs(requires_grad=True, seed=7):
    generator = torch.Generator().manual_seed(seed)
    tensors = (torch.randn(2, 3, D, generator=generator) * 2 + 0.5,
               torch.randn(2, 3, D, generator=generator),
               torch.randn(D, generator=generator) + 1, torch.randn(D, generator=generator))
    return [t.double().requires_grad_(requires_grad) for t in tensors]


@pytest.mark.parametrize("name", CASES)
def test_gradgradcheck(name):
    ours, _ = CASES[name]
    assert torch.autograd.gradgradcheck(ours, inputs())


@pytest.mark.parametrize("name", CASES)
def test_second_derivatives_are_pytorchs(name):
    """A Hessian-vector product through the operator: d/dt <grad(<f, u>), v>, for every input."""
    results = []
    for function in CASES[name]:
        tensors = inputs()
        out = function(*tensors)
        u = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
        grads = torch.autograd.grad((out * u).sum(), tensors, create_graph=True,
                                    allow_unused=True)
        generator = torch.Generator().manual_seed(2)
        total = sum((g * torch.randn(g.shape, generator=generator, dtype=g.dtype)).sum()
                    for g in grads if g is not None)
        results.append(torch.autograd.grad(total, tensors, allow_unused=True))
    for got, expected in zip(*results):
        if expected is None or got is None:
            assert (got is None or not got.any()) and (expected is None or not expected.any())
            continue
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", CASES)
def test_forward_mode_tangents_are_pytorchs(name):
    tangents = inputs(requires_grad=False, seed=9)
    results = []
    for function in CASES[name]:
        with fwAD.dual_level():
            duals = [fwAD.make_dual(t, d) for t, d in zip(inputs(requires_grad=False), tangents)]
            results.append(fwAD.unpack_dual(function(*duals)).tangent)
    torch.testing.assert_close(results[0], results[1], rtol=1e-10, atol=1e-10)


def test_a_frozen_block_keeps_the_input_tangent():
    """The issue's case: with frozen parameters the tangent through the norm was dropped."""
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Linear(8, 8)).double()
    block.requires_grad_(False)
    patched = at.patch(torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Linear(8, 8))).double()
    patched.load_state_dict(block.state_dict())
    patched.requires_grad_(False)
    x, t = torch.randn(4, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64)
    tangents = []
    for model in (block, patched):
        with fwAD.dual_level():
            dual = fwAD.make_dual(x, t)
            tangents.append(fwAD.unpack_dual(dual + model(dual)).tangent)
    torch.testing.assert_close(tangents[1], tangents[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", CASES)
def test_functorch_transforms_give_pytorchs_answers(name):
    ours, theirs = CASES[name]
    x, r, w, b = inputs(requires_grad=False)
    batched = torch.randn(5, *x.shape, dtype=torch.float64)
    for transform in (
            lambda f: functorch.grad(lambda x: (f(x, r, w, b) ** 2).sum())(x),
            lambda f: functorch.grad(lambda w: (f(x, r, w, b) ** 2).sum())(w),
            lambda f: functorch.vmap(lambda x: f(x, r, w, b))(batched),
            lambda f: functorch.jacrev(lambda x: f(x, r, w, b))(x),
            lambda f: functorch.jacfwd(lambda x: f(x, r, w, b))(x)):
        torch.testing.assert_close(transform(ours), transform(theirs), rtol=1e-10, atol=1e-10)


def test_vmap_uses_batching_rules_not_the_per_example_loop(capfd):
    """functorch falls back to calling an operator once per example, with a warning on stderr
    ("There is a performance drop because we have not yet implemented the batching rule"), for
    operators without a batched kernel; addnorm's have one."""
    for function in (lambda x: at.layer_norm(x, 8), lambda x: at.rms_norm(x, 8),
                     lambda x: at.add_norm_pre(x, x, 8)[1], lambda x: at.add_norm_post(x, x, 8),
                     lambda x: at.group_norm(x.transpose(0, 1), 1),
                     lambda x: at.dropout(x, 0.5, seed=3)):
        functorch.vmap(function)(torch.randn(5, 3, 8))
    assert "performance drop" not in capfd.readouterr().err


def test_per_sample_gradients_and_the_hessian_of_a_patched_model():
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8),
                                    torch.nn.Linear(8, 1)).double()
    patched = at.patch(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8),
                                           torch.nn.Linear(8, 1)).double())
    patched.load_state_dict(reference.state_dict())
    assert type(patched[1]) is at.LayerNorm
    x, y = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 1, dtype=torch.float64)
    answers = []
    for model in (reference, patched):
        function, params = functorch.make_functional(model)

        def loss(params, xi, yi):
            return ((function(params, xi.unsqueeze(0)) - yi) ** 2).sum()

        per_sample = functorch.vmap(functorch.grad(loss), in_dims=(None, 0, 0))(params, x, y)
        hessian = torch.autograd.functional.hessian(
            lambda v: (model(v.reshape(6, 8)) ** 2).sum(), x.flatten())
        answers.append((per_sample, hessian))
    for got, expected in zip(answers[1][0], answers[0][0]):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(answers[1][1], answers[0][1], rtol=1e-9, atol=1e-9)


def test_float32_training_still_runs_addnorms_kernels():
    """The composite forms are for the other kinds of differentiation only: a plain backward
    gives addnorm's gradients (float64-accurate statistics), which differ from PyTorch's float32
    ones in the last bits."""
    x = (torch.randn(64, 256) * 30 + 1000).requires_grad_()
    w = torch.randn(256, requires_grad=True)
    ours = torch.autograd.grad((at.layer_norm(x, 256, w) ** 2).sum(), (x, w))
    wide = [t.detach().double().requires_grad_() for t in (x, w)]
    exact = torch.autograd.grad((F.layer_norm(wide[0], (256,), wide[1]) ** 2).sum(), wide)
    theirs = torch.autograd.grad((F.layer_norm(x, (256,), w) ** 2).sum(), (x, w))
    for a, e, t in zip(ours, exact, theirs):
        assert (a.double() - e).abs().max() <= (t.double() - e).abs().max()

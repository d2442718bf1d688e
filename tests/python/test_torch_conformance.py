"""PyTorch's own norm tests, run through addnorm.torch: every sample input PyTorch 1.13's OpInfo
database gives torch.nn.functional's layer_norm, batch_norm, group_norm and instance_norm, and
every norm module case of its common_nn test lists (BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d,
LayerNorm, GroupNorm), on addnorm's function or module beside PyTorch's. The expected values are
PyTorch's: outputs, the running statistics a call updates, gradients of the input and of the
parameters, and the exception class where PyTorch refuses a call. Issue 32 counted 35 of these
cases unsupported and 44 refused; a case addnorm refuses or computes differently fails here
(a quarter of the samples pass eps < 0 or momentum outside [0, 1], which addnorm takes as
PyTorch does).
"""
import sys
import types
import unittest

import pytest
import torch

import addnorm.torch as an


def _pytorch_test_lists():
    """torch.testing._internal's OpInfo database and common_nn module tests. Their modules import
    the expecttest package, which Debian does not ship and which these lists never call; a
    stand-in lets them import when the real one is missing."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase
        stand_in.ACCEPT = False
        sys.modules["expecttest"] = stand_in
    from torch.testing._internal import common_methods_invocations, common_nn
    return common_methods_invocations.op_db, common_nn.module_tests + common_nn.new_module_tests


OP_DB, MODULE_TESTS = _pytorch_test_lists()
FUNCTIONS = {
    "nn.functional.layer_norm": an.layer_norm,
    "nn.functional.batch_norm": an.batch_norm,
    "nn.functional.group_norm": an.group_norm,
    "nn.functional.instance_norm": an.instance_norm,
}
OPS = [op for op in OP_DB if op.name in FUNCTIONS]
NORM_MODULES = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
                "InstanceNorm3d", "LayerNorm", "GroupNorm")
MODULE_CASES = [t for t in MODULE_TESTS
                if t.get("module_name") in NORM_MODULES and t.get("test_cpu", True)]
DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def test_the_lists_hold_every_norm_pytorch_tests():
    """The lists this file runs are PyTorch's whole set for these norms, not an empty import."""
    assert sorted({op.name for op in OPS}) == sorted(FUNCTIONS)
    assert {t["module_name"] for t in MODULE_CASES} == set(NORM_MODULES)
    assert len(MODULE_CASES) >= 40


def _tolerance(dtype):
    """(rtol, atol) for comparing two implementations' float32 or float64 results: a few units
    of the dtype's precision."""
    return {torch.float64: (1e-9, 1e-9), torch.float32: (2e-5, 2e-5)}[dtype]


def _copy(value, dtype=None):
    """A fresh copy of a call's argument: tensors cloned (floating ones converted to dtype when
    given; leaves keep requires_grad), containers rebuilt, everything else as it is."""
    if torch.is_tensor(value):
        copy = value.detach().clone()
        if dtype is not None and copy.is_floating_point():
            copy = copy.to(dtype)
        return copy.requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(item, dtype) for item in value)
    if isinstance(value, dict):
        return {key: _copy(item, dtype) for key, item in value.items()}
    return value


def _tensors(value):
    """The tensors in a call's arguments, in order."""
    if torch.is_tensor(value):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


class Run:
    """function on a fresh copy of a sample (floating tensors in `dtype` when given): its output
    or the exception it raised, the arguments' tensors after the call (running statistics are
    updated in place), and the gradients of the leaves that require grad for one fixed seed."""

    def __init__(self, function, sample, index, dtype=None):
        arguments = _copy((sample.input, sample.args, sample.kwargs), dtype)
        self.tensors = _tensors(arguments)
        self.grads = []
        try:
            self.output = function(arguments[0], *arguments[1], **arguments[2])
        except Exception as error:  # noqa: BLE001 - compared with PyTorch's own below
            self.output = error
            return
        leaves = [t for t in self.tensors if t.requires_grad]
        if leaves and self.output.requires_grad:
            # The same values for every run of the sample: drawn in float64, rounded to the
            # sample's dtype, then taken in the run's.
            grad = torch.randn(self.output.shape, generator=torch.Generator().manual_seed(index),
                               dtype=torch.float64).to(sample.input.dtype).to(self.output.dtype)
            self.grads = torch.autograd.grad(self.output, leaves, grad, allow_unused=True)

    @property
    def raised(self):
        return isinstance(self.output, Exception)

    def results(self):
        """(name, tensor) of everything compared: the output, the arguments a call left changed
        or not (running statistics), the gradients."""
        named = [("output", self.output)]
        named += [(f"argument tensor {i}", t.detach()) for i, t in enumerate(self.tensors)]
        named += [(f"gradient {i}", g) for i, g in enumerate(self.grads)]
        return named


def _assert_close(got, expected, dtype, what):
    rtol, atol = _tolerance(dtype)
    torch.testing.assert_close(got.double(), expected.double(), rtol=rtol, atol=atol,
                               equal_nan=True, msg=lambda message: f"{what}: {message}")


# Half a unit of each storage type relative to the exact value, and its part of the tensor's
# scale (at least 1) for the float32 arithmetic before the one rounding: an exact 0, such as a
# row of one value's x_hat or the gradient through it, comes out as a cancellation's remainder.
ROUNDING = {torch.bfloat16: (2.0 ** -8, 2.0 ** -20), torch.float32: (2.0 ** -21, 2.0 ** -21)}


def _assert_rounded(got, exact, dtype, what):
    """A float32 or bfloat16 result against PyTorch's float64 result on the same values."""
    assert got.shape == exact.shape, what
    if exact.numel() == 0:
        return
    relative, floor = ROUNDING[dtype]
    got, exact = got.double(), exact.double()
    bound = relative * exact.abs() + floor * exact.abs().max().clamp(min=1.0)
    error = (got - exact).abs()
    assert bool(((error <= bound) | (got.isnan() & exact.isnan())).all()), \
        f"{what}: largest error {float((error - bound).max()):.3g} beyond the bound"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name + op.variant_test_name)
def test_every_pytorch_sample_input_gives_pytorchs_result(op, dtype):
    """float64: addnorm's results are PyTorch's to a few units. float32 and bfloat16: within a
    few units of PyTorch's float64 result on the same values (PyTorch's own float32 and bfloat16
    kernels are not always: a row of one value, whose x_hat PyTorch's float32 kernel leaves at a
    rounding error times rstd, is exactly beta in float64)."""
    function = FUNCTIONS[op.name]
    torch.manual_seed(0)  # the samples' values are drawn from torch's generator
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=True))
    assert samples
    for index, sample in enumerate(samples):
        what = f"{op.name} sample {index} (input {tuple(sample.input.shape)}, {sample.kwargs})"
        ours = Run(function, sample, index)
        theirs = Run(op.op, sample, index, torch.float64)
        if theirs.raised:
            assert type(ours.output) is type(theirs.output), \
                f"{what}: PyTorch raised {theirs.output!r}, addnorm gave {ours.output!r}"
            continue
        assert not ours.raised, f"{what}: PyTorch computed it, addnorm raised {ours.output!r}"
        assert len(ours.grads) == len(theirs.grads), what
        for (name, got), (_, expected) in zip(ours.results(), theirs.results()):
            if expected is None:
                assert got is None or not got.any(), f"{what}, {name}"
            elif dtype == torch.float64:
                _assert_close(got, expected, dtype, f"{what}, {name}")
            else:
                _assert_rounded(got, expected, got.dtype, f"{what}, {name}")


def _case_id(case):
    return f"{case['module_name']}-{case.get('desc', 'default')}"


def _in(dtype, state):
    """A state_dict with its floating tensors in dtype."""
    return {key: value.to(dtype) if value.is_floating_point() else value.clone()
            for key, value in state.items()}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", MODULE_CASES, ids=_case_id)
def test_every_pytorch_norm_module_case_gives_pytorchs_results(case, dtype):
    """Two training steps and an evaluation, as common_nn's check_eval cases do: outputs,
    buffers (running statistics, num_batches_tracked) and every gradient. bfloat16 modules are
    measured against torch.nn's module in float64 on the same values, step by step (its
    buffers set to the bfloat16 module's before each step), within half a bfloat16 unit."""
    name, arguments = case["module_name"], case.get("constructor_args", ())
    exact = dtype == torch.bfloat16
    their_dtype = torch.float64 if exact else dtype
    theirs = getattr(torch.nn, name)(*arguments).to(their_dtype)
    ours = getattr(an, name)(*arguments).to(dtype)
    with torch.no_grad():  # parameters away from their initial ones and zeros, in dtype
        generator = torch.Generator().manual_seed(7)
        for parameter in theirs.parameters():
            values = torch.rand(parameter.shape, generator=generator, dtype=their_dtype) + 0.5
            parameter.copy_(values.to(dtype))
    ours.load_state_dict(_in(dtype, theirs.state_dict()))

    def compare(got, expected, what):
        if exact:
            _assert_rounded(got, expected, dtype, what)
        else:
            _assert_close(got, expected, dtype, what)

    generator = torch.Generator().manual_seed(11)
    for step, training in enumerate((True, True, False)):
        if exact:
            theirs.load_state_dict(_in(their_dtype, ours.state_dict()))
        theirs.train(training), ours.train(training)
        x = torch.randn(case["input_size"], generator=generator, dtype=their_dtype).to(dtype)
        x_theirs = x.to(their_dtype).clone().requires_grad_()
        x_ours = x.clone().requires_grad_()
        what = f"{_case_id(case)}, step {step} ({'training' if training else 'eval'})"
        expected, got = theirs(x_theirs), ours(x_ours)
        compare(got, expected, what)
        for (key, their_buffer), our_buffer in zip(theirs.state_dict().items(),
                                                   ours.state_dict().values()):
            compare(our_buffer, their_buffer, f"{what}, {key}")
        grad = torch.randn(expected.shape, generator=generator, dtype=their_dtype).to(dtype)
        expected.backward(grad.to(their_dtype))
        got.backward(grad)
        compare(x_ours.grad, x_theirs.grad, f"{what}, input gradient")
        for (key, their_parameter), our_parameter in zip(theirs.named_parameters(),
                                                         ours.parameters()):
            compare(our_parameter.grad, their_parameter.grad, f"{what}, {key} grad")
            their_parameter.grad, our_parameter.grad = None, None

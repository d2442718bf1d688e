"""Hooks follow a patched module: what a forward, forward pre-, backward or state_dict hook saw on
the torch.nn model it sees on the patched one (the expected values are the unpatched torch
model's), hooks registered while patched (on either module) stay after unpatch, every handle
still removes its hook, and child modules the hooks call (quantization observers) move along. Modules whose weight
a hook computes (pruning, weight_norm, parametrizations) are left alone. The RMSNorm probe does
not run the replaced module's hooks."""
import warnings

import pytest
import torch
import torch.ao.quantization
import torch.nn.utils.parametrize
import torch.nn.utils.prune

import addnorm.torch as an
from other_device import on_cuda
from user_norms import LlamaRMSNorm


def build(kind):
    """(model, the norm module whose hooks are tested, input) for one kind of norm."""
    torch.manual_seed(0)
    if kind == "layer_norm":
        norm, x = torch.nn.LayerNorm(6), torch.randn(3, 4, 6)
    elif kind == "rms_norm":
        norm, x = LlamaRMSNorm(6), torch.randn(3, 4, 6)
    elif kind == "group_norm":
        norm, x = torch.nn.GroupNorm(2, 6), torch.randn(3, 6, 5)
    else:
        norm, x = torch.nn.BatchNorm1d(6), torch.randn(3, 6, 5)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        if getattr(norm, "bias", None) is not None:
            norm.bias.uniform_(-0.5, 0.5)
    # float64 throughout, so that torch's and addnorm's gradients agree to rounding
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[-1], x.shape[-1]), norm).double()
    return model, norm, x.double()


KINDS = ["layer_norm", "rms_norm", "group_norm", "batch_norm"]


def record_hooks(module, log):
    """Registers one hook of each kind on module, each appending what it saw to log; returns the
    handles."""
    def pre(_, args):
        log.append(("pre", args[0].detach().clone()))
        return (args[0] * 2,)  # a pre-hook that changes the input must change the output

    def post(_, args, output):
        log.append(("forward", output.detach().clone()))
        return output + 1

    def backward(_, grad_input, grad_output):
        log.append(("backward", grad_output[0].detach().clone()))
        return (grad_input[0] * 3,)

    def state(_, state_dict, prefix, local_metadata):
        state_dict[prefix + "from_hook"] = torch.tensor(7.0)

    return [module.register_forward_pre_hook(pre), module.register_forward_hook(post),
            module.register_full_backward_hook(backward), module._register_state_dict_hook(state)]


def run(model, x):
    """The model's output, the gradient of x and of every parameter, and its state_dict keys."""
    x = x.clone().requires_grad_()
    y = model(x)
    y.pow(2).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return y.detach(), x.grad, grads, sorted(model.state_dict())


def assert_same(actual, expected):
    y, dx, grads, keys = actual
    y_want, dx_want, grads_want, keys_want = expected
    torch.testing.assert_close(y, y_want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(dx, dx_want, rtol=1e-10, atol=1e-12)
    for g, g_want in zip(grads, grads_want):
        torch.testing.assert_close(g, g_want, rtol=1e-10, atol=1e-12)
    assert keys == keys_want


def assert_logs_match(log, log_want):
    assert [entry for entry, _ in log] == [entry for entry, _ in log_want]
    for (_, seen), (_, seen_want) in zip(log, log_want):
        torch.testing.assert_close(seen, seen_want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_hooks_registered_before_patch_run_on_the_replacement(kind):
    torch_model, torch_norm, x = build(kind)
    log_want = []
    record_hooks(torch_norm, log_want)
    expected = run(torch_model, x)  # torch.nn's own module, with the hooks

    model, norm, _ = build(kind)  # the same values
    log = []
    record_hooks(norm, log)
    patched = an.patch(model, batch_norm=True)
    assert type(patched[1]).__module__.startswith("addnorm") and patched[1] is not norm
    assert_same(run(patched, x), expected)
    assert_logs_match(log, log_want)


@pytest.mark.parametrize("kind", KINDS)
def test_hooks_registered_while_patched_stay_after_unpatch_and_handles_remove_them(kind):
    model, norm, x = build(kind)
    plain_model, _, _ = build(kind)  # the same values, no hooks
    expected_plain = run(plain_model, x)

    patched = an.patch(model, batch_norm=True)
    log = []
    handles = record_hooks(patched[1], log)
    restored = an.unpatch(patched)
    assert restored[1] is norm
    run(restored, x)
    assert [entry for entry, _ in log] == ["pre", "forward", "backward"]  # they ran on torch's

    for handle in handles:
        handle.remove()
    assert not norm._forward_hooks and not norm._forward_pre_hooks and not norm._backward_hooks
    # Without the hooks the model computes what it computed before any was registered
    # (BatchNorm's running statistics moved on, but training-mode outputs do not use them).
    assert_same(run(an.patch(restored, batch_norm=True), x), expected_plain)


def test_a_handle_taken_before_patch_removes_the_hook_from_the_replacement():
    model, norm, x = build("layer_norm")
    calls = []
    handle = norm.register_forward_hook(lambda *_: calls.append(1))
    patched = an.patch(model)
    patched(x)
    assert calls == [1]
    handle.remove()
    patched(x)
    assert calls == [1]


def test_the_rms_probe_does_not_run_the_hooks_of_the_module_it_probes():
    model, norm, x = build("rms_norm")
    calls = []
    norm.register_forward_hook(lambda *_: calls.append(1))
    patched = an.patch(model)
    assert type(patched[1]).__name__ == "RMSNorm" and patched[1] is not norm
    assert calls == []  # patch itself ran no hook
    patched(x)
    assert calls == [1]


def test_a_non_full_backward_hook_keeps_its_kind():
    # register_backward_hook (the older, non-full kind) stays that kind on the replacement:
    # PyTorch refuses to mix the two kinds on one module.
    model, norm, x = build("layer_norm")
    seen = []
    norm.register_backward_hook(lambda _, grad_in, grad_out: seen.append(len(grad_out)))
    patched = an.patch(model)
    with pytest.raises(RuntimeError, match="both regular backward hooks and full backward hooks"):
        patched[1].register_full_backward_hook(lambda *_: None)
    patched(x.requires_grad_()).sum().backward()
    assert seen == [1]


def test_hooks_registered_on_the_replaced_module_while_patched_run_now_and_after_unpatch():
    model, norm, x = build("layer_norm")
    patched = an.patch(model)
    seen = []
    norm.register_forward_hook(lambda *_: seen.append("forward"))
    norm.register_full_backward_hook(lambda *_: seen.append("backward"))
    patched(x.clone().requires_grad_()).sum().backward()
    assert seen == ["forward", "backward"]
    restored = an.unpatch(patched)
    assert restored[1] is norm and norm._is_full_backward_hook is True
    restored(x.clone().requires_grad_()).sum().backward()
    assert seen == ["forward", "backward"] * 2


def test_child_modules_move_with_the_hooks_that_call_them():
    # Eager quantization's prepare adds an observer child and a forward hook that calls it.
    torch_model, torch_norm, x = build("layer_norm")
    model, norm, _ = build("layer_norm")
    for m in (torch_model, model):
        m.float().qconfig = torch.ao.quantization.get_default_qconfig("fbgemm")
        torch.ao.quantization.prepare(m, inplace=True)
    assert hasattr(norm, "activation_post_process")
    patched = an.patch(model)
    assert patched[1] is not norm
    expected, got = torch_model(x.float()), patched(x.float())
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    observed = patched[1].activation_post_process
    assert observed is norm.activation_post_process
    torch.testing.assert_close(observed.min_val, torch_norm.activation_post_process.min_val)
    torch.testing.assert_close(observed.max_val, torch_norm.activation_post_process.max_val)
    assert an.unpatch(patched)[1].activation_post_process is observed


@pytest.mark.parametrize("method, kind", [("prune", "layer_norm"), ("weight_norm", "layer_norm"),
                                          ("parametrize", "layer_norm"), ("prune", "rms_norm"),
                                          ("parametrize", "rms_norm")])
def test_a_module_whose_weight_a_hook_computes_is_left_alone(method, kind):
    model, norm, x = build(kind)
    if method == "prune":
        torch.nn.utils.prune.l1_unstructured(norm, "weight", 0.5)
    elif method == "weight_norm":
        torch.nn.utils.weight_norm(norm, "weight", dim=None)
    else:
        class Doubled(torch.nn.Module):
            def forward(self, weight):
                return 2 * weight
        torch.nn.utils.parametrize.register_parametrization(norm, "weight", Doubled())
    expected = model(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patched = an.patch(model)
    assert patched[1] is norm
    torch.testing.assert_close(patched(x), expected, rtol=0, atol=0)
    # A torch.nn.LayerNorm whose weight is not its Parameter is named in a warning, under the
    # class name parametrize gave it where it has one. (An RMSNorm-like module without a weight
    # Parameter is no candidate: patch passes it by without a word.)
    if kind == "layer_norm":
        expected = ("'1' (ParametrizedLayerNorm): its weight is computed by "
                    "torch.nn.utils.parametrize" if method == "parametrize" else
                    "'1' (LayerNorm): its weight is computed from other tensors")
        assert any(f"left these modules alone: {expected}" in str(w.message) for w in caught)
    assert an.unpatch(patched)[1] is norm


@pytest.mark.parametrize("make", [lambda: torch.nn.GroupNorm(2, 4),
                                  lambda: torch.nn.BatchNorm1d(4),
                                  lambda: torch.nn.InstanceNorm1d(4, affine=True)],
                         ids=["GroupNorm", "BatchNorm1d", "InstanceNorm1d"])
def test_a_parametrized_norm_of_any_kind_is_named_in_the_warning(make):
    class Doubled(torch.nn.Module):
        def forward(self, weight):
            return 2 * weight
    norm = make()
    torch.nn.utils.parametrize.register_parametrization(norm, "weight", Doubled())
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), norm)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patched = an.patch(model, batch_norm=True)
    assert patched[1] is norm
    assert any(f"'1' (Parametrized{type(norm).__bases__[0].__name__}): its weight is computed"
               in str(w.message) for w in caught), [str(w.message) for w in caught]


class Positive(torch.nn.Module):
    def forward(self, value):
        return value.abs() + 0.5


def test_a_parametrized_buffer_leaves_the_module_alone():
    # parametrize takes buffers too: the running variance lives in norm.parametrizations, which
    # addnorm's module would not copy (it would normalise with a fresh variance of ones).
    norm = torch.nn.BatchNorm1d(4)
    with torch.no_grad():
        norm.running_var.fill_(-3.0)  # kept positive by the parametrization: 3.5
    torch.nn.utils.parametrize.register_parametrization(norm, "running_var", Positive())
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), norm).eval()
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(5))
    expected = model(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patched = an.patch(model, batch_norm=True)
    assert patched[1] is norm
    torch.testing.assert_close(patched(x), expected, rtol=0, atol=0)
    assert any("'1' (ParametrizedBatchNorm1d): its running_var is computed by "
               "torch.nn.utils.parametrize" in str(w.message) for w in caught)


def test_a_module_left_alone_anyway_is_not_refused_for_its_device():
    # A parametrized norm on another device stays as it is, as a pruned one would: patch has
    # nothing to run on addnorm there, so it changes nothing and refuses nothing.
    norm = torch.nn.LayerNorm(4)
    torch.nn.utils.parametrize.register_parametrization(norm, "weight", Positive())
    on_cuda(norm.parametrizations.weight)  # its stored weight, `original`, on cuda
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), norm)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patched = an.patch(model)
    assert patched[1] is norm
    assert any("'1' (ParametrizedLayerNorm): its weight is computed" in str(w.message)
               for w in caught)


def test_a_subclass_holding_its_own_parametrizations_child_is_no_candidate():
    # Exact types only: a user's LayerNorm subclass is never swapped, even when it keeps a
    # ModuleDict named `parametrizations` of its own (parametrize's test for "parametrized").
    class Tagged(torch.nn.LayerNorm):
        def __init__(self, width):
            super().__init__(width)
            self.parametrizations = torch.nn.ModuleDict({"tag": torch.nn.Identity()})

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Tagged(4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patched = an.patch(model)
    assert type(patched[1]) is Tagged
    assert not any("Tagged" in str(w.message) for w in caught)


def test_spectral_norm_is_left_alone_too():
    model, norm, x = build("layer_norm")
    torch.nn.utils.spectral_norm(norm, "weight", dim=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patched = an.patch(model)
    assert patched[1] is norm
    assert any("'1' (LayerNorm): its weight is computed" in str(w.message) for w in caught)


class WrappedRMSNorm(LlamaRMSNorm):
    """An RMSNorm-like module holding a LayerNorm of its own (which a second patch reaches)."""

    def __init__(self, width):
        super().__init__(width)
        self.inner = torch.nn.LayerNorm(width)

    def forward(self, x):
        self.inner(x)  # runs, but takes no part in the output
        return super().forward(x)


def test_unpatch_restores_patched_modules_inside_patched_modules():
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), WrappedRMSNorm(6))
    model = an.patch(an.patch(model))  # the second patch swaps the moved LayerNorm
    assert type(model[1]).__module__.startswith("addnorm")
    assert type(model[1].inner).__module__.startswith("addnorm")
    restored = an.unpatch(model)
    assert type(restored[1]) is WrappedRMSNorm
    assert type(restored[1].inner) is torch.nn.LayerNorm


def test_a_child_removed_while_patched_stays_removed():
    model, norm, x = build("layer_norm")
    norm.add_module("probe", torch.nn.Identity())
    patched = an.patch(model)
    assert patched[1].probe is norm.probe
    del patched[1].probe
    restored = an.unpatch(patched)
    assert not hasattr(restored[1], "probe")
    assert "probe" not in dict(restored.named_modules()).get("1")._modules


def test_mixing_backward_hook_kinds_across_the_swap_is_refused_as_torch_refuses_it():
    model, norm, x = build("layer_norm")
    patched = an.patch(model)
    norm.register_full_backward_hook(lambda *_: None)
    patched[1].register_backward_hook(lambda *_: None)
    with pytest.raises(RuntimeError, match="both regular backward hooks and full backward hooks"):
        patched(x.clone().requires_grad_()).sum().backward()


class FlagBiasRMSNorm(LlamaRMSNorm):
    """An RMSNorm-like class whose bias attribute is a flag, not a tensor."""

    def __init__(self, width):
        super().__init__(width)
        self.bias = False


def test_a_bias_flag_is_not_taken_for_a_computed_bias():
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), FlagBiasRMSNorm(6))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patched = an.patch(model)
    assert type(patched[1]).__module__.startswith("addnorm"), [str(w.message) for w in caught]

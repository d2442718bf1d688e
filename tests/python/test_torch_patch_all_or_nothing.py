"""addnorm.torch.patch changes all or nothing: a candidate on another device (not cpu or meta) or in a dtype the
modules cannot compute in makes it raise, naming the module, before anything is swapped. And
unpatch undoes patch: torch's modules back, the same parameter objects, equal state_dict and
outputs."""
import re

import pytest
import torch

import addnorm.torch as an
from addnorm._torch_dtypes import SUPPORTED_DTYPES, describe
from other_device import on_cuda
from user_norms import LlamaRMSNorm


def modules_of(model):
    """(name, module object) for every module: to show that nothing was swapped."""
    return [(name, module) for name, module in model.named_modules()]


def assert_refused(model, pattern, **options):
    before = modules_of(model)
    state = {k: v.clone() for k, v in model.state_dict().items() if v.device.type == "cpu"}
    with pytest.raises(TypeError, match=pattern):
        an.patch(model, **options)
    assert modules_of(model) == before  # the same objects in the same places
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in state.items())


def test_a_module_on_another_device_refuses_the_whole_patch():
    model = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Linear(8, 8),
                                torch.nn.Sequential(LlamaRMSNorm(8)),
                                on_cuda(torch.nn.LayerNorm(8)))
    assert_refused(model, r"patch changed nothing: 1 module\(s\) cannot run on addnorm: '3' "
                          r"\(LayerNorm\) is on device cuda, expected cpu or meta")


def test_a_module_of_an_unsupported_dtype_refuses_the_whole_patch():
    # bfloat16 is not in SUPPORTED_DTYPES until the 16-bit operators arrive (then float16, or
    # at last complex64, which no norm here computes in, takes its place). Every kind of
    # candidate is refused the same way.
    unsupported = next(d for d in (torch.bfloat16, torch.float16, torch.complex64)
                       if d not in SUPPORTED_DTYPES)
    model = torch.nn.Sequential(torch.nn.LayerNorm(8),
                                torch.nn.Sequential(LlamaRMSNorm(8).to(unsupported)),
                                torch.nn.BatchNorm2d(3).to(unsupported))
    name = str(unsupported)
    assert_refused(model, rf"2 module\(s\) cannot run on addnorm: '1.0' \(LlamaRMSNorm\) has "
                          rf"dtype {name}, expected {re.escape(describe())}; '2' "
                          rf"\(BatchNorm2d\) has dtype {name}", batch_norm=True)
    # Without batch_norm=True the BatchNorm is no candidate, but the RMSNorm still refuses.
    assert_refused(model, r"1 module\(s\) cannot run on addnorm: '1.0' \(LlamaRMSNorm\)")
    # Mixed in one model: a float64 LayerNorm is fine, a half-precision one is not.
    mixed = torch.nn.Sequential(torch.nn.LayerNorm(4).double(), torch.nn.LayerNorm(4).half())
    if torch.float16 not in SUPPORTED_DTYPES:
        assert_refused(mixed, r"'1' \(LayerNorm\) has dtype torch.float16")


def test_the_model_itself_as_the_refused_module():
    with pytest.raises(TypeError, match=r"'model' \(LayerNorm\) is on device cuda"):
        an.patch(on_cuda(torch.nn.LayerNorm(4)))


def test_unsupported_dtypes_still_refused_when_nothing_else_is_wrong():
    # A module with no parameters or buffers has no dtype to refuse: the input decides later.
    model = torch.nn.Sequential(torch.nn.LayerNorm(4, elementwise_affine=False))
    assert type(an.patch(model)[0]) is an.LayerNorm


def build_model():
    torch.manual_seed(5)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.Flatten(2),
        torch.nn.BatchNorm1d(4), torch.nn.Linear(9, 16), torch.nn.LayerNorm(16),
        LlamaRMSNorm(16))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model


def test_unpatch_restores_torch_modules_with_the_same_parameters():
    model = build_model()
    originals = dict(modules_of(model))
    parameters = list(model.parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # built before patch
    x = torch.randn(5, 3, 3, 3)

    patched = an.patch(model, batch_norm=True)
    assert patched is model
    assert [type(model[i]) for i in (1, 3, 5, 6)] == [an.BatchNorm2d, an.BatchNorm1d,
                                                        an.LayerNorm, an.RMSNorm]
    # Train one step through addnorm: the parameters and running statistics move.
    optimizer.zero_grad()
    model(x).pow(2).sum().backward()
    optimizer.step()
    model.eval()
    patched_output = model(x)
    patched_state = {k: v.clone() for k, v in model.state_dict().items()}

    restored = an.unpatch(model)
    assert restored is model
    for name, module in modules_of(model):
        assert module is originals[name]  # torch's very modules (and the Llama class) are back
    assert all(a is b for a, b in zip(model.parameters(), parameters))
    assert not any(m.training for m in model.modules())  # eval() carried over
    state = model.state_dict()
    assert list(state) == list(patched_state)
    assert all(torch.equal(state[k], patched_state[k]) for k in state)
    # torch computes the same norms: equal to float32 rounding.
    torch.testing.assert_close(model(x), patched_output, rtol=1e-5, atol=1e-5)


def test_patching_twice_changes_nothing_more():
    model = build_model()
    originals = dict(modules_of(model))
    an.patch(model, batch_norm=True)
    once = dict(modules_of(model))
    an.patch(model, batch_norm=True)
    assert dict(modules_of(model)) == once
    an.unpatch(model)
    assert dict(modules_of(model)) == originals


def test_unpatch_of_a_swapped_model_and_of_unpatched_modules():
    layer = torch.nn.LayerNorm(4)
    patched = an.patch(layer)
    assert type(patched) is an.LayerNorm and patched.weight is layer.weight
    assert an.unpatch(patched) is layer
    direct = torch.nn.Sequential(an.LayerNorm(4))  # not made by patch: left as it is
    assert type(an.unpatch(direct)[0]) is an.LayerNorm


def test_a_module_shared_by_two_parents_is_swapped_once():
    shared = torch.nn.LayerNorm(4)
    model = torch.nn.ModuleDict({"a": torch.nn.Sequential(shared),
                                 "b": torch.nn.Sequential(shared)})
    an.patch(model)
    assert model["a"][0] is model["b"][0] and type(model["a"][0]) is an.LayerNorm
    an.unpatch(model)
    assert model["a"][0] is shared and model["b"][0] is shared


def test_a_module_registered_twice_in_one_parent_is_swapped_under_both_names():
    shared = torch.nn.LayerNorm(4)
    model = torch.nn.Sequential(shared, torch.nn.Linear(4, 4), shared)
    model.alias = shared
    x = torch.randn(3, 4)
    expected = model(x)
    an.patch(model)
    assert type(model[0]) is an.LayerNorm and model[2] is model[0] and model.alias is model[0]
    torch.testing.assert_close(model(x), expected)
    an.unpatch(model)
    assert model[0] is shared and model[2] is shared and model.alias is shared


@pytest.mark.parametrize("make, setting, value", [
    (lambda: torch.nn.LayerNorm(4), "eps", 0.5),
    (lambda: torch.nn.BatchNorm1d(4), "momentum", 0.5),
    (lambda: torch.nn.BatchNorm1d(4), "eps", 0.25),
    (lambda: torch.nn.GroupNorm(2, 4), "eps", 0.5),
    (lambda: torch.nn.InstanceNorm1d(4, track_running_stats=True), "momentum", 0.5),
])
def test_a_setting_changed_while_patched_stays_after_unpatch(make, setting, value):
    """unpatch hands back the replaced module as the replacement left it: its parameters and
    buffers, and its settings too, so outputs carry on."""
    model = torch.nn.Sequential(make())
    an.patch(model, batch_norm=True)
    setattr(model[0], setting, value)
    x = torch.randn(6, 4, 5) if isinstance(model[0], an.InstanceNorm1d) else torch.randn(6, 4)
    expected = model.eval()(x)
    restored = an.unpatch(model)
    assert type(restored[0]).__module__.startswith("torch.nn.")
    assert getattr(restored[0], setting) == value
    torch.testing.assert_close(restored(x), expected)


def test_an_eps_changed_while_patched_reaches_a_model_classes_own_name_for_it():
    model = torch.nn.Sequential(LlamaRMSNorm(8))
    an.patch(model)
    model[0].eps = 1e-2
    x = torch.randn(3, 8) * 1e-2
    expected = model(x)
    restored = an.unpatch(model)
    assert type(restored[0]) is LlamaRMSNorm and restored[0].variance_epsilon == 1e-2
    torch.testing.assert_close(restored(x), expected)


def test_unpatch_leaves_a_setting_whose_type_the_model_class_keeps_otherwise():
    """A model's own RMSNorm-like class may keep normalized_shape as an int, where addnorm's
    RMSNorm keeps a tuple: unpatch hands back eps, not the tuple."""
    class IntShapeRMSNorm(torch.nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.normalized_shape, self.eps = dim, eps
            self.weight = torch.nn.Parameter(torch.ones(dim))

        def forward(self, x):
            rows = x.reshape(-1, self.normalized_shape)
            scale = torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + self.eps)
            return (rows * scale * self.weight).reshape(x.shape)

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), IntShapeRMSNorm(8))
    an.patch(model)
    assert type(model[1]) is an.RMSNorm
    model[1].eps = 1e-3
    an.unpatch(model)
    assert model[1].normalized_shape == 8 and model[1].eps == 1e-3
    model(torch.randn(2, 8))

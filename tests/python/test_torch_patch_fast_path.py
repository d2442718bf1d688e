"""patch warns, naming the layers, when PyTorch's TransformerEncoderLayer inference fast path
would bypass the patched LayerNorms, and only then. The warning's claim is checked by counting
the calls the patched norms really receive (forward hooks run only when a module is called)."""
import warnings

import pytest
import torch

import addnorm.torch as an


def encoder(layers=2, heads=4, **options):
    torch.manual_seed(0)
    options.setdefault("batch_first", True)
    layer = torch.nn.TransformerEncoderLayer(16, heads, 32, dropout=0.0, **options)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def patched_and_warnings(model):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        an.patch(model)
    return [str(w.message) for w in caught if "fast path" in str(w.message)]


def norm_calls(model, run):
    """How many times the patched norms are called while run() runs."""
    calls = []
    hooks = [m.register_forward_hook(lambda *_: calls.append(1))
             for m in model.modules() if isinstance(m, an.LayerNorm)]
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
    return len(calls)


def test_warning_names_the_bypassed_layers_and_is_true():
    model = encoder()
    messages = patched_and_warnings(model)
    assert len(messages) == 1
    assert "bypasses addnorm's LayerNorms in layers.0, layers.1" in messages[0]
    assert "eval mode with autograd off" in messages[0] and "src_mask" in messages[0]
    x = torch.randn(2, 5, 16)
    model.train()
    assert norm_calls(model, lambda: model(x)) == 4  # training: 2 norms x 2 layers
    model.eval()
    assert norm_calls(model, lambda: model(x)) == 4  # eval, autograd on: the slow path
    with torch.no_grad():
        assert norm_calls(model, lambda: model(x)) == 0  # the fast path: bypassed
        mask = torch.zeros(5, 5)
        assert norm_calls(model, lambda: model(x, mask=mask)) == 4  # a src_mask: slow path
        assert norm_calls(model, lambda: model(x[0])) == 4  # unbatched 2-D input: slow path


def test_parameters_not_requiring_grad_also_take_the_fast_path():
    model = encoder(layers=1)
    assert patched_and_warnings(model)
    model.eval().requires_grad_(False)
    assert norm_calls(model, lambda: model(torch.randn(2, 5, 16))) == 0


@pytest.mark.parametrize("options", [
    {"batch_first": False},
    {"heads": 1},                       # an odd number of heads
    {"activation": torch.tanh},         # neither relu nor gelu
])
def test_no_warning_where_the_fast_path_cannot_run(options):
    model = encoder(**options)
    assert patched_and_warnings(model) == []
    model.eval()
    x = torch.randn(2, 5, 16) if model.layers[0].self_attn.batch_first else torch.randn(5, 2, 16)
    with torch.no_grad():
        assert norm_calls(model, lambda: model(x)) == 4  # the norms really are used


def test_no_warning_when_the_two_eps_differ():
    model = encoder(layers=1)
    model.layers[0].norm2.eps = 1e-6
    assert patched_and_warnings(model) == []
    model.eval()
    with torch.no_grad():
        assert norm_calls(model, lambda: model(torch.randn(2, 5, 16))) == 2


def test_no_warning_for_a_subclass_with_its_own_forward_or_without_patched_norms():
    class MyLayer(torch.nn.TransformerEncoderLayer):
        def forward(self, src, src_mask=None, src_key_padding_mask=None):
            return self.norm1(src + self._sa_block(src, src_mask, src_key_padding_mask))

    layer = MyLayer(16, 4, 32, batch_first=True)
    assert patched_and_warnings(torch.nn.Sequential(layer)) == []
    # A model whose encoder layers hold no LayerNorm patch swaps (the norms are BatchNorm1d,
    # not swapped by default) gets no warning either.
    model = encoder(layers=1)
    model.layers[0].norm1 = torch.nn.Identity()
    model.layers[0].norm2 = torch.nn.Identity()
    model.layers[0].norm1.eps = model.layers[0].norm2.eps = 1e-5
    assert patched_and_warnings(model) == []

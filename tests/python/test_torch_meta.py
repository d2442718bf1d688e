"""addnorm.torch on the meta device, as PyTorch's own norms work there: shapes and dtypes
without data, for building a large model without its memory (then to_empty and
load_state_dict) and for tracers that propagate shapes. Every function's result, its
gradients and its inference-mode call give PyTorch's shapes and dtypes; patch swaps a model
built on meta, which then runs as torch's model does once materialised."""
import copy

import pytest
import torch
import torch.nn.functional as F

import addnorm.torch as an
from user_norms import CentredRMSNorm, LlamaRMSNorm


def meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="meta", dtype=dtype)


def rms_norm_composition(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


# (addnorm's call, PyTorch's call computing the same thing), on the same meta tensors.
CASES = {
    "layer_norm": (lambda t: an.layer_norm(t["x"], [8], t["w"], t["b"]),
                   lambda t: F.layer_norm(t["x"], [8], t["w"], t["b"])),
    "rms_norm": (lambda t: an.rms_norm(t["x"], [8], t["w"], 1e-6),
                 lambda t: rms_norm_composition(t["x"], t["w"])),
    "add_norm_pre": (lambda t: an.add_norm_pre(t["x"], t["r"], [8], t["w"], t["b"]),
                     lambda t: (t["x"] + t["r"], F.layer_norm(t["x"] + t["r"], [8], t["w"],
                                                              t["b"]))),
    "add_norm_post": (lambda t: an.add_norm_post(t["x"], t["r"], [8], t["w"], t["b"], p=0.1),
                      lambda t: F.layer_norm(t["x"] + F.dropout(t["r"], 0.1), [8], t["w"],
                                             t["b"])),
    "group_norm": (lambda t: an.group_norm(t["c"], 2, t["cw"], t["cb"]),
                   lambda t: F.group_norm(t["c"], 2, t["cw"], t["cb"])),
    "batch_norm_train": (lambda t: an.batch_norm(t["c"], None, None, t["cw"], t["cb"], True),
                         lambda t: F.batch_norm(t["c"], None, None, t["cw"], t["cb"], True)),
    "batch_norm_eval": (lambda t: an.batch_norm(t["c"], t["mean"], t["var"], t["cw"], t["cb"]),
                        lambda t: F.batch_norm(t["c"], t["mean"], t["var"], t["cw"], t["cb"])),
    "instance_norm": (lambda t: an.instance_norm(t["c"]), lambda t: F.instance_norm(t["c"])),
    "dropout": (lambda t: an.dropout(t["x"], 0.3), lambda t: F.dropout(t["x"], 0.3)),
}


def tensors(dtype, requires_grad=False):
    made = {"x": meta(2, 3, 8, dtype=dtype), "r": meta(3, 8, dtype=dtype),
            "w": meta(8, dtype=dtype), "b": meta(8, dtype=dtype),
            "c": meta(2, 4, 3, 5, dtype=dtype), "cw": meta(4, dtype=dtype),
            "cb": meta(4, dtype=dtype), "mean": meta(4), "var": meta(4)}
    if requires_grad:
        for name in ("x", "r", "w", "b", "c", "cw", "cb"):
            made[name].requires_grad_()
    return made


def outputs(result):
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("name", list(CASES))
def test_results_have_pytorchs_shapes_and_dtypes(name, dtype):
    ours, theirs = CASES[name]
    t = tensors(dtype)
    got, expected = outputs(ours(t)), outputs(theirs(t))
    assert [(o.device.type, o.shape, o.dtype) for o in got] == \
        [(e.device.type, e.shape, e.dtype) for e in expected]
    with torch.inference_mode():
        assert [o.shape for o in outputs(ours(tensors(dtype)))] == [e.shape for e in expected]


@pytest.mark.parametrize("name", [n for n in CASES if n != "batch_norm_eval"])
def test_gradients_have_pytorchs_shapes(name):
    ours, theirs = CASES[name]
    grads = []
    for call in (ours, theirs):
        t = tensors(torch.float32, requires_grad=True)
        leaves = [v for v in t.values() if v.requires_grad]
        total = sum(o.sum() for o in outputs(call(t)))
        grads.append([None if g is None else (g.device.type, g.shape) for g in
                      torch.autograd.grad(total, leaves, allow_unused=True)])
    assert grads[0] == grads[1]


class BiasedRMSNorm(LlamaRMSNorm):
    """Named like an RMSNorm, but shifts by a bias of its own: not addnorm's RMSNorm."""

    def __init__(self, width):
        super().__init__(width)
        self.bias = torch.nn.Parameter(torch.zeros(width))

    def forward(self, x):
        return super().forward(x) + self.bias


class Block(torch.nn.Module):
    """A model's pieces: a pre-norm encoder layer, a Llama RMSNorm, a GroupNorm and a BatchNorm
    over a feature map, and two modules named like an RMSNorm that are not one."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                                        norm_first=True, activation=F.silu)
        self.final = LlamaRMSNorm(8)
        self.centred = CentredRMSNorm(8)
        self.biased = BiasedRMSNorm(8)
        self.conv = torch.nn.Conv2d(8, 4, 1)
        self.group = torch.nn.GroupNorm(2, 4)
        self.batch = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        h = self.biased(self.centred(self.final(self.encoder(x))))
        image = self.conv(h.transpose(1, 2).unsqueeze(-1))
        return self.batch(self.group(image))


def test_patch_swaps_a_model_built_on_meta_which_then_runs_as_torchs():
    torch.manual_seed(3)
    reference = Block()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.3)
    reference.batch.running_mean.normal_()
    reference.batch.running_var.uniform_(0.5, 1.5)
    on_meta = copy.deepcopy(reference).to("meta")
    patched = an.patch(on_meta, batch_norm=True)
    kinds = {name: type(m) for name, m in patched.named_modules()}
    assert kinds["encoder.norm1"] is an.LayerNorm and kinds["encoder.norm2"] is an.LayerNorm
    assert kinds["final"] is an.RMSNorm and kinds["group"] is an.GroupNorm
    assert kinds["batch"] is an.BatchNorm2d
    # The probe on a CPU copy, every tensor of it drawn, tells these apart (the bias too,
    # whatever memory the copy got).
    assert kinds["centred"] is CentredRMSNorm and kinds["biased"] is BiasedRMSNorm
    assert all(p.device.type == "meta" for p in patched.parameters())
    y = patched(meta(2, 5, 8))  # shapes propagate through the patched model on meta
    assert y.device.type == "meta" and y.shape == reference(torch.zeros(2, 5, 8)).shape
    patched.to_empty(device="cpu")
    patched.load_state_dict(reference.state_dict())
    x = torch.randn(2, 5, 8)
    for mode in (False, True):
        torch.testing.assert_close(patched.train(mode)(x), reference.train(mode)(x),
                                   rtol=1e-5, atol=1e-5)

"""Models built from addnorm.torch modules leave Python: torch.jit.script and torch.jit.trace,
saved and loaded in a fresh interpreter (which only imports addnorm.torch to load the
operators), and torch.onnx.export to standard ONNX ops that pass onnx.checker's full check and
carry the modules' weights and eps."""
import io
import subprocess
import sys
import textwrap

import pytest
import torch

import addnorm.torch as an

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402

WIDTH = 16


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(7)


def randomise(model):
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_()
    return model


class Norms(torch.nn.Module):
    """LayerNorm, RMSNorm and BatchNorm1d (scriptable) plus a functional pre-norm call."""

    def __init__(self):
        super().__init__()
        self.width = WIDTH
        self.linear = torch.nn.Linear(WIDTH, WIDTH)
        self.layer_norm = an.LayerNorm(WIDTH)
        self.rms_norm = an.RMSNorm(WIDTH, eps=1e-6)
        self.batch_norm = an.BatchNorm1d(WIDTH)

    def forward(self, x):
        h, y = torch.ops.addnorm.add_norm_pre(x, self.linear(x), [self.width], self.layer_norm.weight,
                                              None, 1e-5, "layer_norm", False)
        return self.batch_norm(self.rms_norm(self.layer_norm(h + y)))


class GPTBlock(torch.nn.Module):
    """A pre-norm GPT block: attention and MLP, each behind addnorm's fused Add & Norm."""

    def __init__(self, norm="layer_norm"):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(WIDTH, 2, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(WIDTH, 2 * WIDTH), torch.nn.GELU(),
                                       torch.nn.Linear(2 * WIDTH, WIDTH))
        self.add_norm_1 = an.AddNorm(WIDTH, "pre", norm=norm, dropout=0.1)
        self.add_norm_2 = an.AddNorm(WIDTH, "pre", norm=norm, dropout=0.1)

    def forward(self, h, y):
        attended = self.attention(y, y, y, need_weights=False)[0]
        h, y = self.add_norm_1(h, attended)
        return self.add_norm_2(h, self.mlp(y))


class GPT(torch.nn.Module):
    def __init__(self, vocabulary=11):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocabulary, WIDTH)
        self.first_norm = an.LayerNorm(WIDTH, eps=1e-6)
        self.blocks = torch.nn.ModuleList([GPTBlock("layer_norm"), GPTBlock("rms_norm")])
        self.head = torch.nn.Linear(WIDTH, vocabulary)

    def forward(self, tokens):
        h = self.embedding(tokens)
        y = self.first_norm(h)
        for block in self.blocks:
            h, y = block(h, y)
        return self.head(y)


def load_in_fresh_interpreter(path, example, expected, tmp_path):
    torch.save({"example": example, "expected": expected}, tmp_path / "io.pt")
    script = textwrap.dedent(f"""
        import torch
        import addnorm.torch  # loads torch.ops.addnorm
        model = torch.jit.load({str(path)!r})
        io = torch.load({str(tmp_path / "io.pt")!r})
        torch.testing.assert_close(model(io["example"]), io["expected"])
        print("same")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "same" in done.stdout, done.stderr


def test_script_save_load_in_a_fresh_process(tmp_path):
    model = randomise(Norms()).eval()
    scripted = torch.jit.script(model)
    x = torch.randn(5, WIDTH)
    expected = model(x)
    torch.testing.assert_close(scripted(x), expected)
    # The module's forward calls addnorm.torch.layer_norm, compiled to the operator itself.
    assert "addnorm::layer_norm" in str(scripted.layer_norm.forward.inlined_graph)
    scripted.save(str(tmp_path / "scripted.pt"))
    load_in_fresh_interpreter(tmp_path / "scripted.pt", x, expected, tmp_path)


def test_script_gpt_with_add_norm_modules():
    model = randomise(GPT()).eval()
    scripted = torch.jit.script(model)
    tokens = torch.randint(0, 11, (2, 5))
    torch.testing.assert_close(scripted(tokens), model(tokens))
    graph = str(scripted.inlined_graph)
    assert "addnorm::add_norm_pre" in graph and "addnorm::layer_norm" in graph


class Functional(torch.nn.Module):
    """Every functional form of addnorm.torch called where torch.nn.functional's would be, as a
    model written for PyTorch calls F.layer_norm and the like, with their positional and keyword
    arguments."""

    def __init__(self):
        super().__init__()
        self.width = WIDTH
        self.weight = torch.nn.Parameter(torch.randn(WIDTH))
        self.bias = torch.nn.Parameter(torch.randn(WIDTH))

    def forward(self, x):
        y = an.layer_norm(x, [self.width], self.weight, self.bias, 1e-5)
        y = an.rms_norm(y, [self.width], self.weight, eps=1e-6)
        h, y = an.add_norm_pre(x, y, [self.width], self.weight, self.bias)
        y = an.add_norm_post(h, y, [self.width], norm="rms_norm", p=0.25, seed=3)
        y = an.batch_norm(y, None, None, self.weight, self.bias, training=True)
        y = an.group_norm(y.unsqueeze(-1), 4, self.weight, self.bias).squeeze(-1)
        return an.dropout(y, 0.5, self.training, seed=5)


def test_the_functions_script_as_torch_nn_functional_does():
    model = Functional().train()
    scripted = torch.jit.script(model)
    x = torch.randn(6, WIDTH)
    torch.testing.assert_close(scripted(x), model(x), rtol=0, atol=0)
    graph = str(scripted.inlined_graph)
    for op in ("layer_norm", "rms_norm", "add_norm_pre", "add_norm_post", "batch_norm",
               "group_norm", "dropout"):
        assert f"addnorm::{op}" in graph
    scripted.eval()
    torch.testing.assert_close(scripted(x), model.eval()(x), rtol=0, atol=0)


def test_scripted_model_trains():
    model = torch.jit.script(randomise(Norms()).train())
    x = torch.randn(6, WIDTH, requires_grad=True)
    model(x).square().sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    assert model.layer_norm.weight.grad is not None


def test_trace_save_load_in_a_fresh_process(tmp_path):
    model = randomise(GPT()).eval()
    tokens = torch.randint(0, 11, (2, 5))
    # check_trace=False: the re-run check takes MultiheadAttention's inference fast path and
    # differs from the trace in torch's ops; the fresh process below compares the outputs.
    traced = torch.jit.trace(model, tokens, check_trace=False)
    expected = model(tokens)
    graph = str(traced.inlined_graph)
    assert "addnorm::add_norm_pre" in graph and "addnorm::layer_norm" in graph
    traced.save(str(tmp_path / "traced.pt"))
    load_in_fresh_interpreter(tmp_path / "traced.pt", tokens, expected, tmp_path)


def export(model, example, tmp_path, opset):
    path = tmp_path / f"model_{opset}.onnx"
    torch.onnx.export(model.eval(), example, str(path), opset_version=opset,
                      input_names=["input"], output_names=["output"])
    exported = onnx.load(str(path))
    onnx.checker.check_model(exported, full_check=True)
    return exported


def initializers(exported):
    return {item.name: numpy_helper.to_array(item) for item in exported.graph.initializer}


def encoder(layers=2):
    # silu keeps nn.TransformerEncoderLayer off its fused inference path, which would bypass
    # the (patched) norms entirely.
    layer = torch.nn.TransformerEncoderLayer(WIDTH, 2, 32, dropout=0.1, batch_first=True,
                                             activation=torch.nn.functional.silu)
    model = randomise(torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False))
    with torch.no_grad():
        model.layers[0].norm1.eps = 1e-6
    return an.patch(model)


def test_onnx_export_of_a_patched_transformer_encoder_uses_layer_normalization(tmp_path):
    model = encoder()
    assert type(model.layers[0].norm1) is an.LayerNorm
    x = torch.randn(2, 5, WIDTH)
    exported = export(model, x, tmp_path, 17)
    nodes = [node for node in exported.graph.node if node.op_type == "LayerNormalization"]
    assert len(nodes) == 4  # norm1 and norm2 of each of the 2 layers
    assert not [node for node in exported.graph.node if node.domain not in ("", "ai.onnx")]
    values = initializers(exported)
    norms = [m for layer in model.layers for m in (layer.norm1, layer.norm2)]
    for node, norm in zip(nodes, norms):
        eps = next(a.f for a in node.attribute if a.name == "epsilon")
        assert eps == pytest.approx(norm.eps, rel=1e-6)
        assert next(a.i for a in node.attribute if a.name == "axis") == -1
        torch.testing.assert_close(torch.from_numpy(values[node.input[1]]), norm.weight.detach())
        torch.testing.assert_close(torch.from_numpy(values[node.input[2]]), norm.bias.detach())


def test_onnx_export_below_opset_17_decomposes_the_norm(tmp_path):
    model = encoder(layers=1)
    exported = export(model, torch.randn(2, 5, WIDTH), tmp_path, 14)
    op_types = [node.op_type for node in exported.graph.node]
    assert "LayerNormalization" not in op_types
    assert op_types.count("ReduceMean") == 4 and op_types.count("Sqrt") == 2
    values = initializers(exported)
    weights = [v for v in values.values() if v.shape == (WIDTH,)]
    for norm in (model.layers[0].norm1, model.layers[0].norm2):
        assert any(torch.equal(torch.from_numpy(w), norm.weight.detach()) for w in weights)
    # eps is the constant added to the variance before Sqrt.
    constants = {node.output[0]: numpy_helper.to_array(node.attribute[0].t)
                 for node in exported.graph.node if node.op_type == "Constant"}
    constants.update(values)
    eps_values = []
    for node in exported.graph.node:
        if node.op_type == "Sqrt":
            add = next(n for n in exported.graph.node if n.output[0] == node.input[0])
            eps_values.append(float(constants[add.input[1]]))
    assert eps_values == pytest.approx([1e-6, 1e-5], rel=1e-5)


@pytest.mark.parametrize("opset", [14, 17])
def test_onnx_export_of_a_gpt_built_from_addnorm_modules(tmp_path, opset):
    model = randomise(GPT())
    tokens = torch.randint(0, 11, (2, 5))
    exported = export(model, tokens, tmp_path, opset)
    op_types = [node.op_type for node in exported.graph.node]
    # first_norm and the two layer_norm AddNorms: LayerNormalization from opset 17; the two
    # rms_norm AddNorms always decompose (no standard RMSNorm before opset 23).
    assert op_types.count("LayerNormalization") == (3 if opset >= 17 else 0)
    assert op_types.count("Sqrt") == (2 if opset >= 17 else 5)
    assert not [node for node in exported.graph.node if node.domain not in ("", "ai.onnx")]
    values = initializers(exported)
    for module in (model.first_norm, model.blocks[1].add_norm_2):
        assert any(v.shape == (WIDTH,) and torch.equal(torch.from_numpy(v), module.weight.detach())
                   for v in values.values())


def test_onnx_export_refuses_active_dropout(tmp_path):
    model = randomise(GPT()).train()
    with pytest.raises(RuntimeError, match=r"dropout with p=0.1 cannot be exported to ONNX"):
        torch.onnx.export(model, torch.randint(0, 11, (2, 5)), str(tmp_path / "m.onnx"),
                          opset_version=17, training=torch.onnx.TrainingMode.TRAINING)


@pytest.mark.parametrize("opset", [13, 17])
def test_training_mode_batch_norm_exports_as_pytorchs(opset):
    # TrainingMode.TRAINING with a dynamic batch: BatchNormalization's training form (five
    # outputs below opset 14, training_mode and three outputs from 14), as torch.nn's exports.
    forms = []
    for module in (torch.nn.BatchNorm2d(3), an.BatchNorm2d(3)):
        buffer = io.BytesIO()
        torch.onnx.export(module.train(), torch.randn(2, 3, 4, 4), buffer, opset_version=opset,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        model = onnx.load_from_string(buffer.getvalue())
        onnx.checker.check_model(model, full_check=True)
        forms.append([(len(node.output), sorted(a.name for a in node.attribute))
                      for node in model.graph.node if node.op_type == "BatchNormalization"])
    assert forms[0] == forms[1] and len(forms[1]) == 1

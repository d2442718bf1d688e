"""addnorm.torch's ONNX exports run in a real runtime: ONNX Runtime's CPU provider (the npm package
onnxruntime-node, installed by scripts/onnx-runtime.sh into tests/onnx/node_modules).

Every operator (LayerNorm as LayerNormalization from opset 17 and as its decomposition below,
RMSNorm, GroupNorm, BatchNorm, pre-norm and post-norm as Add and the norm) and four model kinds
(a pre-norm and a post-norm nn.TransformerEncoder, a GPT with RMSNorm, a CNN with BatchNorm2d
and GroupNorm), patched or built from addnorm's modules, are exported, run once by
tests/onnx/run_models.mjs, and ONNX Runtime's outputs are held against PyTorch's (torch.nn's own
modules and functions; for RMSNorm, which PyTorch 1.13 lacks, the formula a PyTorch user
writes) and against addnorm's, within each dtype's tolerance (float32, and LayerNorm and RMSNorm
in float64 and float16 too). GroupNorm as torch 1.13 exports
nn.GroupNorm itself (InstanceNormalization) runs too, for comparison. (torch 1.13 exports up to
opset 17, so ONNX's GroupNormalization-21 is not emitted.)
"""
import copy
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Tuple

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import addnorm.torch as an

RUNNER = Path(__file__).resolve().parents[1] / "onnx"
WIDTH = 16
# ONNX Runtime and PyTorch sum in different orders (and ORT fuses the decompositions), relative
# to each output's scale: for a float32 norm 1e-5 (about 80 ulps), through a model 1e-4; float16
# about two float16 ulps, since ORT computes float16 decompositions in float16.
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3}
MODEL_TOLERANCE = {torch.float32: 1e-4}
NUMPY_OF = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
            "int64": np.int64}


@dataclass
class Case:
    """One export: the module (addnorm's), its example inputs, the opset, and PyTorch's own
    computation of the same outputs."""
    module: torch.nn.Module
    inputs: Tuple[torch.Tensor, ...]
    opset: int
    pytorch: Callable[..., Tuple[torch.Tensor, ...]]
    dtype: torch.dtype = torch.float32
    model: bool = False


class Function(torch.nn.Module):
    """A function of the inputs with its parameters held as buffers (so they export as
    initializers)."""

    def __init__(self, function, **parameters):
        super().__init__()
        self.function = function
        for name, value in parameters.items():
            self.register_buffer(name, value)

    def forward(self, *inputs):
        return self.function(self, *inputs)


def rms_norm_formula(x, weight, eps, zero_centered=False):
    scale = 1 + weight if zero_centered else weight
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * scale


def pytorchs(function, dtype):
    """PyTorch's answer: function in dtype; for float16, which PyTorch 1.13's CPU LayerNorm and
    rsqrt lack, function in float32 on the float16 values, rounded to float16."""
    if dtype != torch.float16:
        return function
    return lambda *tensors: tuple(out.half() for out in function(*(t.float() for t in tensors)))


def parameters(width, dtype):
    return (torch.randn(width) * 0.5 + 1).to(dtype), (torch.randn(width) * 0.5).to(dtype)


def activations(*shape, dtype=torch.float32):
    return (torch.randn(shape) * 2 + 0.5).to(dtype)


def layer_norm_case(opset, dtype=torch.float32, affine=True):
    weight, bias = parameters(WIDTH, dtype) if affine else (None, None)
    module = Function(lambda m, x: an.layer_norm(x, WIDTH, m.weight, m.bias, 1e-5),
                      weight=weight, bias=bias)
    parameters_given = (weight, bias) if affine else ()

    def pytorch(x, *weight_and_bias):
        return (F.layer_norm(x, (WIDTH,), *weight_and_bias, eps=1e-5),)

    return Case(module, (activations(3, 5, WIDTH, dtype=dtype),), opset,
                lambda x: pytorchs(pytorch, dtype)(x, *parameters_given), dtype)


def rms_norm_case(zero_centered, dtype=torch.float32):
    weight, _ = parameters(WIDTH, dtype)
    module = Function(lambda m, x: an.rms_norm(x, WIDTH, m.weight, 1e-6, zero_centered),
                      weight=weight)
    def pytorch(x, w):
        return (rms_norm_formula(x, w, 1e-6, zero_centered),)

    return Case(module, (activations(3, 5, WIDTH, dtype=dtype),), 17,
                lambda x: pytorchs(pytorch, dtype)(x, weight), dtype)


def group_norm_case(shape, groups):
    weight, bias = parameters(shape[1], torch.float32)
    module = Function(lambda m, x: an.group_norm(x, groups, m.weight, m.bias, 1e-5),
                      weight=weight, bias=bias)
    return Case(module, (activations(*shape),), 17,
                lambda x: (F.group_norm(x, groups, weight, bias, 1e-5),))


def torch_group_norm_case():
    # nn.GroupNorm exported by torch 1.13's own symbolic; ORT's result is held against
    # addnorm's group_norm as well as PyTorch's (see test_addnorm_agrees).
    module = torch.nn.GroupNorm(4, 8)
    with torch.no_grad():
        module.weight.normal_(1, 0.5)
        module.bias.normal_(0, 0.5)
    return Case(module, (activations(2, 8, 3, 5),), 17, lambda x: (module(x),))


def batch_norm_case(shape):
    channels = shape[1]
    weight, bias = parameters(channels, torch.float32)
    mean, var = torch.randn(channels), torch.rand(channels) + 0.5
    module = Function(lambda m, x: an.batch_norm(x, m.mean, m.var, m.weight, m.bias, False,
                                                 0.1, 1e-5),
                      weight=weight, bias=bias, mean=mean, var=var)
    return Case(module, (activations(*shape),), 17,
                lambda x: (F.batch_norm(x, mean, var, weight, bias, False, 0.1, 1e-5),))


def torch_norm(h, norm, weight, bias, eps):
    if norm == "rms_norm":
        return rms_norm_formula(h, weight, eps)
    return F.layer_norm(h, (WIDTH,), weight, bias, eps)


def add_norm_case(mode, norm, opset, branch_shape=(4, 3, WIDTH), branch_dtype=torch.float32,
                  stream_dtype=torch.float32):
    """The fused op on x of (4, 3, WIDTH) and stream_dtype and a branch of branch_shape and
    branch_dtype, which the sum broadcasts and promotes as x + r does (the parameters in the
    sum's dtype)."""
    x, r = activations(4, 3, WIDTH, dtype=stream_dtype), activations(*branch_shape,
                                                                     dtype=branch_dtype)
    dtype = (x + r).dtype
    weight, bias = parameters(WIDTH, dtype)
    bias = bias if norm == "layer_norm" else None
    fused = an.add_norm_pre if mode == "pre" else an.add_norm_post
    module = Function(lambda m, x, r: fused(x, r, WIDTH, m.weight, m.bias, 1e-5, norm),
                      weight=weight, bias=bias)

    def pytorch(x, r):
        h = x + r
        y = torch_norm(h, norm, weight, bias, 1e-5)
        return (h, y) if mode == "pre" else (y,)

    return Case(module, (x, r), opset, pytorchs(pytorch, dtype), dtype)


def randomised(model):
    torch.manual_seed(11)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.3)
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and \
                    module.track_running_stats:
                module.running_mean.normal_()
                module.running_var.uniform_(0.5, 1.5)
            if (isinstance(module, (torch.nn.LayerNorm, torch.nn.GroupNorm,
                                    torch.nn.modules.batchnorm._BatchNorm)) or
                    type(module).__name__.endswith("RMSNorm")) and module.weight is not None:
                module.weight.normal_(1, 0.2)
    return model.eval()


def patched_case(model, inputs, **patch_options):
    """PyTorch's model as built, and addnorm's: a deep copy patched."""
    ours = an.patch(copy.deepcopy(model), **patch_options)
    assert any(type(m).__module__.startswith("addnorm") for m in ours.modules()), \
        "patch swapped nothing"
    return Case(ours, inputs, 17, lambda *x: (model(*x),), model=True)


def encoder_case(norm_first):
    # silu keeps nn.TransformerEncoderLayer off its fused inference path, which would bypass
    # the patched norms.
    layer = torch.nn.TransformerEncoderLayer(WIDTH, 2, 32, dropout=0.1, batch_first=True,
                                             activation=F.silu, norm_first=norm_first)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    return patched_case(randomised(model), (activations(2, 5, WIDTH),))


class RMSNorm(torch.nn.Module):
    """The RMSNorm a GPT's author writes (patch recognises it by its output)."""

    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return rms_norm_formula(x, self.weight, self.eps)


class GPTBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm_1, self.norm_2 = RMSNorm(WIDTH), RMSNorm(WIDTH)
        self.attention = torch.nn.MultiheadAttention(WIDTH, 2, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(WIDTH, 2 * WIDTH), torch.nn.GELU(),
                                       torch.nn.Linear(2 * WIDTH, WIDTH))

    def forward(self, h):
        y = self.norm_1(h)
        h = h + self.attention(y, y, y, need_weights=False)[0]
        return h + self.mlp(self.norm_2(h))


class GPT(torch.nn.Module):
    def __init__(self, vocabulary=11):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocabulary, WIDTH)
        self.blocks = torch.nn.Sequential(GPTBlock(), GPTBlock())
        self.final_norm = RMSNorm(WIDTH)
        self.head = torch.nn.Linear(WIDTH, vocabulary)

    def forward(self, tokens):
        return self.head(self.final_norm(self.blocks(self.embedding(tokens))))


class AddNormGPT(torch.nn.Module):
    """A GPT built from addnorm's fused modules (no torch.nn counterpart to patch): PyTorch's
    outputs come from the same weights in GPT above."""

    def __init__(self, plain):
        super().__init__()
        self.embedding, self.head = plain.embedding, plain.head
        self.first_norm = an.RMSNorm(WIDTH, eps=1e-6)
        self.first_norm.weight = plain.blocks[0].norm_1.weight
        self.attention = torch.nn.ModuleList(block.attention for block in plain.blocks)
        self.mlp = torch.nn.ModuleList(block.mlp for block in plain.blocks)
        # AddNorm i adds sublayer i's output and normalises with the next norm in order.
        norms = [plain.blocks[0].norm_2, plain.blocks[1].norm_1, plain.blocks[1].norm_2,
                 plain.final_norm]
        self.add_norms = torch.nn.ModuleList()
        for norm in norms:
            add_norm = an.AddNorm(WIDTH, "pre", norm="rms_norm", eps=1e-6, dropout=0.1)
            add_norm.weight = norm.weight
            self.add_norms.append(add_norm)

    def forward(self, tokens):
        h = self.embedding(tokens)
        y = self.first_norm(h)
        for i in range(2):
            h, y = self.add_norms[2 * i](h, self.attention[i](y, y, y, need_weights=False)[0])
            h, y = self.add_norms[2 * i + 1](h, self.mlp[i](y))
        return self.head(y)


def gpt_cases():
    plain = randomised(GPT())
    tokens = torch.randint(0, 11, (2, 7))
    fused = AddNormGPT(plain).eval()
    return {"gpt_rms_norm_patched": patched_case(plain, (tokens,)),
            "gpt_rms_norm_add_norm_modules": Case(fused, (tokens,), 17,
                                                  lambda t: (plain(t),), model=True)}


class CNN(torch.nn.Module):
    def __init__(self, second_norm=None, **batch_norm_options):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8, **batch_norm_options),
            torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, padding=1),
            second_norm or torch.nn.GroupNorm(4, 8), torch.nn.ReLU())
        self.head = torch.nn.Linear(8, 5)

    def forward(self, images):
        return self.head(self.features(images).mean((2, 3)))


def all_cases():
    torch.manual_seed(2026)
    cases = {
        "layer_norm_opset17": layer_norm_case(17),
        "layer_norm_opset14": layer_norm_case(14),
        "layer_norm_no_affine": layer_norm_case(17, affine=False),
        "layer_norm_float64": layer_norm_case(17, torch.float64),
        "layer_norm_float64_opset14": layer_norm_case(14, torch.float64),
        "layer_norm_float16": layer_norm_case(17, torch.float16),
        "layer_norm_float16_opset14": layer_norm_case(14, torch.float16),
        "rms_norm": rms_norm_case(False),
        "rms_norm_float16": rms_norm_case(False, torch.float16),
        "rms_norm_zero_centered": rms_norm_case(True),
        "rms_norm_float64": rms_norm_case(False, torch.float64),
        "group_norm_4d": group_norm_case((2, 8, 3, 5), 4),
        "group_norm_3d": group_norm_case((3, 6, 7), 3),
        "group_norm_as_torch_exports_it": torch_group_norm_case(),
        "batch_norm_2d": batch_norm_case((6, 8)),
        "batch_norm_4d": batch_norm_case((2, 8, 3, 5)),
    }
    for mode in ("pre", "post"):
        for norm in ("layer_norm", "rms_norm"):
            cases[f"add_norm_{mode}_{norm}"] = add_norm_case(mode, norm, 17)
        cases[f"add_norm_{mode}_layer_norm_opset14"] = add_norm_case(mode, "layer_norm", 14)
        # a branch broadcast (a position table's row, or one for every sample) and one promoted
        cases[f"add_norm_{mode}_broadcast_branch"] = add_norm_case(mode, "layer_norm", 17,
                                                                   (WIDTH,))
        cases[f"add_norm_{mode}_broadcast_rms_norm"] = add_norm_case(mode, "rms_norm", 17,
                                                                     (1, 3, WIDTH))
        cases[f"add_norm_{mode}_float64_branch"] = add_norm_case(mode, "layer_norm", 17,
                                                                 branch_dtype=torch.float64)
        # addends that do not widen the stream: an integer branch, a 0-dim float64 one
        cases[f"add_norm_{mode}_int64_branch"] = add_norm_case(mode, "layer_norm", 17,
                                                               branch_dtype=torch.int64)
        cases[f"add_norm_{mode}_scalar_float64_branch"] = add_norm_case(
            mode, "rms_norm", 17, (), torch.float64, torch.float16)
    cases["transformer_encoder_pre_norm"] = encoder_case(True)
    cases["transformer_encoder_post_norm"] = encoder_case(False)
    cases.update(gpt_cases())
    cases["cnn_batch_norm_group_norm"] = patched_case(randomised(CNN()), (activations(2, 3, 6, 6),),
                                                      batch_norm=True)
    # BatchNorm without parameters, and without running statistics (batch statistics in eval
    # mode too), as PyTorch exports them.
    cnn = CNN(torch.nn.BatchNorm2d(8, track_running_stats=False), affine=False)
    cases["cnn_batch_norm_without_affine_or_running_stats"] = patched_case(
        randomised(cnn), (activations(2, 3, 6, 6),), batch_norm=True)
    return cases


CASE_NAMES = list(all_cases())


def write_tensor(tensor, path):
    array = tensor.detach().numpy()
    path.write_bytes(np.ascontiguousarray(array).tobytes())
    return {"dtype": str(array.dtype), "dims": list(array.shape), "file": str(path)}


@pytest.fixture(scope="module")
def onnx_runtime(tmp_path_factory):
    """Exports every case, runs them all in one ONNX Runtime process, and returns
    {name: (case, ORT's outputs as tensors)}."""
    if not (RUNNER / "node_modules" / "onnxruntime-node").is_dir():
        pytest.fail("ONNX Runtime is not installed: run `bash scripts/onnx-runtime.sh` "
                    "(the README's test command does)")
    node = shutil.which("node")
    assert node, "node is not on PATH: run `bash scripts/onnx-runtime.sh`"
    folder = tmp_path_factory.mktemp("onnx_runtime")
    cases, manifest = all_cases(), []
    for name, case in cases.items():
        model_path = folder / f"{name}.onnx"
        input_names = [f"input_{i}" for i in range(len(case.inputs))]
        torch.onnx.export(case.module.eval(), case.inputs, str(model_path),
                          opset_version=case.opset, input_names=input_names)
        inputs = [dict(name=input_name, **write_tensor(tensor, folder / f"{name}.{input_name}"))
                  for input_name, tensor in zip(input_names, case.inputs)]
        manifest.append({"name": name, "model": str(model_path), "inputs": inputs})
    (folder / "manifest.json").write_text(json.dumps({"cases": manifest}))
    done = subprocess.run([node, str(RUNNER / "run_models.mjs"), str(folder / "manifest.json")],
                          capture_output=True, text=True, timeout=300, cwd=RUNNER,
                          env={**os.environ, "NODE_PATH": str(RUNNER / "node_modules")})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    version = lines[0]["onnxruntime"]
    results = {}
    for line in lines[1:]:
        if "error" in line:
            results[line["name"]] = (cases[line["name"]], line["error"])
            continue
        outputs = tuple(
            torch.from_numpy(np.fromfile(out["file"], dtype=NUMPY_OF[out["dtype"]])
                             .reshape(out["dims"]))
            for out in line["outputs"])
        results[line["name"]] = (cases[line["name"]], outputs)
    assert set(results) == set(cases), f"ONNX Runtime {version} ran {sorted(results)}"
    return results


def ort_outputs(onnx_runtime, name):
    case, outputs = onnx_runtime[name]
    assert not isinstance(outputs, str), f"ONNX Runtime refused {name}: {outputs}"
    return case, outputs


def assert_agree(got, expected, case):
    tolerance = (MODEL_TOLERANCE if case.model else TOLERANCE)[case.dtype]
    assert got.dtype == expected.dtype and got.shape == expected.shape
    scale = expected.abs().max().item()
    torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance * max(scale, 1))


@pytest.mark.parametrize("name", CASE_NAMES)
def test_onnx_runtime_agrees_with_pytorch(onnx_runtime, name):
    case, outputs = ort_outputs(onnx_runtime, name)
    with torch.no_grad():
        expected = case.pytorch(*case.inputs)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert_agree(got, want, case)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_onnx_runtime_agrees_with_addnorm(onnx_runtime, name):
    case, outputs = ort_outputs(onnx_runtime, name)
    with torch.no_grad():
        if name == "group_norm_as_torch_exports_it":
            module = case.module
            ours = (an.group_norm(case.inputs[0], 4, module.weight, module.bias, module.eps),)
        else:
            ours = case.module(*case.inputs)
    ours = ours if isinstance(ours, tuple) else (ours,)
    assert len(outputs) == len(ours)
    for got, want in zip(outputs, ours):
        assert_agree(got, want, case)

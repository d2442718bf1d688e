"""addnorm.torch.diagnose on models people own (issue 35): torch.nn.TransformerEncoder in both
placements, a GPT-style pre-norm model with its own RMSNorm, fused AddNorm blocks, models with
no norm or no residual, 16-bit and patched models; the model left bit for bit as it was; the
command line. Expected values come from the models' construction and from the lab's results
(python/addnorm/_diagnose_reference.py, generated from `addnorm lab-run`)."""
import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
import addnorm.torch as at  # noqa: E402
from addnorm import _diagnose_probe as probe  # noqa: E402


def encoder(depth, norm_first, d=64, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.1, batch_first=True,
                                             norm_first=norm_first)
    return torch.nn.TransformerEncoder(layer, depth, enable_nested_tensor=False).to(dtype)


def tokens(seed=0, d=64, dtype=torch.float32):
    return torch.randn(4, 16, d, generator=torch.Generator().manual_seed(100 + seed)).to(dtype)


class UserRMSNorm(torch.nn.Module):
    """Written the way people write it: no base class diagnose could know by name."""

    def __init__(self, d):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.scale * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class Attention(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.qkv, self.out = heads, torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        attention = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        return self.out((attention @ v).transpose(1, 2).reshape(b, t, d))


class GPTBlock(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1, self.attn = UserRMSNorm(d), Attention(d, heads)
        self.ln_2 = UserRMSNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(torch.nn.Module):
    def __init__(self, depth=6, d=64, heads=4, vocab=50):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(GPTBlock(d, heads) for _ in range(depth))
        self.ln_f = UserRMSNorm(d)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def gpt_batch(seed=0):
    return torch.randint(0, 50, (4, 16), generator=torch.Generator().manual_seed(seed))


# --- what diagnose finds --------------------------------------------------------------------

@pytest.mark.parametrize("norm_first, expected", [(False, "post_norm"), (True, "pre_norm")])
def test_encoder_blocks_norms_and_placement_are_found(norm_first, expected):
    result = at.diagnose(encoder(6, norm_first), tokens())
    assert result.structure["blocks"] == [f"layers.{i}" for i in range(6)]
    assert sorted(result.structure["norms"]) == sorted(
        f"layers.{i}.norm{k}" for i in range(6) for k in (1, 2))
    assert {n["kind"] for n in result.structure["norms"].values()} == {"layer_norm"}
    assert [block["placement"] for block in result.blocks] == [expected] * 6
    assert result.placement == expected
    # Every shortcut passes an input change through: the blocks are residual.
    assert all(block["shortcut"]["median"] > 0.5 for block in result.blocks)


def test_a_users_rms_norm_is_recognised_by_behaviour_and_the_gpt_is_pre_norm():
    torch.manual_seed(0)
    result = at.diagnose(GPT(), gpt_batch())
    norms = result.structure["norms"]
    assert sorted(norms) == sorted([f"blocks.{i}.ln_{k}" for i in range(6) for k in (1, 2)] +
                                   ["ln_f"])
    assert {n["kind"] for n in norms.values()} == {"rms_norm"}  # scales, does not centre
    assert result.structure["outside_blocks"] == ["ln_f"]
    assert result.structure["after_blocks"] == ["ln_f"]
    assert result.placement == "pre_norm"
    assert any("ln_f" in verdict for verdict in result.verdicts)
    # Each block's first norm reads the stream entering it.
    for block in result.blocks:
        assert block["norms"][0]["input_rms"]["median"] == pytest.approx(
            block["stream_rms_in"]["median"], rel=1e-6)


def test_fused_addnorm_blocks_are_placed_by_their_mode():
    class Block(torch.nn.Module):
        def __init__(self, d, mode):
            super().__init__()
            self.ffn = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.ReLU(),
                                           torch.nn.Linear(2 * d, d))
            self.add_norm = at.AddNorm(d, mode="post", dropout=0.0)

        def forward(self, x):
            return self.add_norm(x, self.ffn(x))

    torch.manual_seed(1)
    model = torch.nn.Sequential(*[Block(32, "post") for _ in range(4)])
    result = at.diagnose(model, torch.randn(8, 10, 32))
    assert result.placement == "post_norm"
    assert all(n["recognised_by"] == "addnorm.torch.AddNorm"
               for n in result.structure["norms"].values())


# --- the lab's lessons, recovered ------------------------------------------------------------

def test_post_and_pre_norm_show_the_labs_gradient_and_stream_lessons():
    """Xiong et al.'s finding as the lab measures it (docs/lab-results.md, init-gradients): with
    post-norm the top block's gradient is as large as the bottom's or larger, with pre-norm the
    bottom's is larger and the stream grows with depth while post-norm keeps it at one scale.
    Four seeds of 12-block encoders; the pre-norm ratio lands inside the lab's IQR."""
    post = at.diagnose([encoder(12, False, seed=s) for s in range(4)], tokens())
    pre = at.diagnose([encoder(12, True, seed=s) for s in range(4)], tokens())
    assert post.summary["top_to_bottom"]["n"] == 4
    assert post.summary["top_to_bottom"]["median"] > 2 * pre.summary["top_to_bottom"]["median"]
    assert pre.summary["top_to_bottom"]["q75"] < 1.0
    lab = pre.reference
    assert lab["depth"] == 12
    assert lab["top_to_bottom"]["q25"] <= pre.summary["top_to_bottom"]["median"] <= \
        lab["top_to_bottom"]["q75"] * 1.25
    assert post.reference["top_to_bottom"]["q25"] <= post.summary["top_to_bottom"]["median"] \
        <= post.reference["top_to_bottom"]["q75"]
    # The stream: flat through post-norm, growing through pre-norm, as in the lab.
    assert 0.8 < post.summary["stream_growth"]["median"] < 1.25
    assert pre.summary["stream_growth"]["q25"] > 2.0
    assert pre.reference["stream_growth"]["q25"] > 2.0
    # Stream growth with depth: deeper pre-norm stacks grow their stream more.
    deeper = at.diagnose([encoder(24, True, seed=s) for s in range(2)], tokens())
    assert deeper.summary["stream_growth"]["median"] > pre.summary["stream_growth"]["median"]


def test_a_stack_without_norms_and_one_without_residuals_are_reported_not_raised():
    class Residual(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.linear = torch.nn.Linear(d, d)
            torch.nn.init.normal_(self.linear.weight, std=1.4 / math.sqrt(d))

        def forward(self, x):
            return x + self.linear(x)

    torch.manual_seed(2)
    no_norm = torch.nn.Sequential(*[Residual(32) for _ in range(8)])
    result = at.diagnose(no_norm, torch.randn(4, 8, 32))
    assert result.placement == "no_norm"
    assert result.structure["norms"] == {}
    assert result.summary["stream_growth"]["median"] > 3  # (1 + 1.4^2)^(8/2), roughly
    assert any(v.startswith("no norm in the blocks") for v in result.verdicts)

    class PlainPostNorm(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.linear, self.norm = torch.nn.Linear(d, d), torch.nn.LayerNorm(d)

        def forward(self, x):
            return self.norm(self.linear(x))  # no x + ...

    no_residual = torch.nn.Sequential(*[PlainPostNorm(32) for _ in range(8)])
    result = at.diagnose(no_residual, torch.randn(4, 8, 32))
    assert result.placement == "post_norm (no residual)"
    assert all(abs(block["shortcut"]["median"]) < 0.2 for block in result.blocks)
    assert any("no residual path" in v for v in result.verdicts)


def test_rank_collapse_measures_have_their_definitions():
    # Two orthogonal tokens: cosine 0; the nearest rank-1 matrix 1 x^T has x = (1/2, 1/2), so
    # the relative residual is |(1/2)(1, -1; -1, 1)|_F / |I|_F = 1 / sqrt(2).
    cosine, residual = probe.token_geometry(torch.eye(2).unsqueeze(0), batch_first=True)
    assert cosine == pytest.approx(0.0, abs=1e-7)
    assert residual == pytest.approx(1 / math.sqrt(2), rel=1e-6)
    same = torch.randn(1, 1, 8).expand(3, 5, 8)  # every token the same vector
    cosine, residual = probe.token_geometry(same, batch_first=True)
    assert cosine == pytest.approx(1.0, rel=1e-6) and residual == pytest.approx(0.0, abs=1e-6)
    # (tokens, batch, d) when batch_first is False: the same sample read the other way round.
    x = torch.randn(3, 7, 8)
    assert probe.token_geometry(x, True) == pytest.approx(
        probe.token_geometry(x.transpose(0, 1), False), rel=1e-6)


# --- the model is left as it was --------------------------------------------------------------

def test_the_model_is_left_bit_for_bit_as_it_was():
    model = GPT(depth=3)
    model.register_buffer("steps", torch.tensor([7.0]))
    model.train()
    model.head.weight.requires_grad_(False)
    grad = torch.full_like(model.embed.weight, 0.5)
    model.embed.weight.grad = grad
    state = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    at.diagnose(model, gpt_batch(0), batches=[gpt_batch(1)], optimizer=torch.optim.SGD, lr=0.1)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert model.training and all(m.training for m in model.modules())
    assert model.embed.weight.grad is grad and torch.equal(grad, torch.full_like(grad, 0.5))
    assert model.blocks[0].ln_1.scale.grad is None
    assert not model.head.weight.requires_grad
    assert torch.equal(torch.get_rng_state(), rng)


def test_the_one_step_change_is_the_steps_own():
    """With SGD at lr the update is -lr * gradient: the output change after it, measured by hand,
    is what diagnose reports."""
    torch.manual_seed(3)
    model = encoder(4, True)
    x = tokens()
    result = at.diagnose(model, x, optimizer=torch.optim.SGD, lr=0.05, seed=11)
    model.eval()
    out = model(x)
    from addnorm._diagnose import _readout_loss
    _readout_loss(out, 11).backward()
    with torch.no_grad():
        before = out.detach().clone()
        for p in model.parameters():
            p.sub_(0.05 * p.grad)
        after = model(x)
    expected = float((after - before).norm() / before.norm())
    assert result.summary["output_change"]["median"] == pytest.approx(expected, rel=1e-5)


# --- dtypes and patching -----------------------------------------------------------------------

def test_bfloat16_models_are_measured():
    result = at.diagnose(encoder(6, True, dtype=torch.bfloat16), tokens(dtype=torch.bfloat16))
    assert result.placement == "pre_norm"
    assert all(math.isfinite(block["grad_norm"]["median"]) for block in result.blocks)
    full = at.diagnose(encoder(6, True), tokens())
    assert result.summary["top_to_bottom"]["median"] == pytest.approx(
        full.summary["top_to_bottom"]["median"], rel=0.1)


def test_a_patched_model_gives_the_unpatched_models_figures():
    plain = at.diagnose(encoder(6, False), tokens())
    with pytest.warns(UserWarning, match="fast path"):
        patched_model = at.patch(encoder(6, False))
    patched = at.diagnose(patched_model, tokens())
    assert [b["placement"] for b in patched.blocks] == [b["placement"] for b in plain.blocks]
    for key in ("top_to_bottom", "stream_growth", "top_token_cosine", "output_change"):
        assert patched.summary[key]["median"] == pytest.approx(plain.summary[key]["median"],
                                                               rel=1e-4), key


# --- naming the blocks, and models it cannot read ---------------------------------------------

def test_blocks_can_be_named_and_a_model_without_blocks_says_how():
    model = encoder(4, True)
    named = at.diagnose(model, tokens(), blocks=["layers.1", "layers.2"])
    assert named.structure["blocks"] == ["layers.1", "layers.2"]
    assert at.diagnose(model, tokens(), blocks="layers").structure["blocks"] == [
        f"layers.{i}" for i in range(4)]
    with pytest.raises(ValueError, match=r"blocks names \['layer.9'\].*named_modules"):
        at.diagnose(model, tokens(), blocks=["layer.9"])
    with pytest.raises(ValueError, match="cannot find the blocks of Linear.*blocks="):
        at.diagnose(torch.nn.Linear(8, 8), torch.randn(2, 8))
    with pytest.raises(TypeError, match="optimiser object"):
        at.diagnose(model, tokens(), optimizer=torch.optim.SGD(model.parameters(), lr=0.1))


class ScriptableBlock(torch.nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.lin, self.norm = torch.nn.Linear(d, d), torch.nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.lin(x))


def test_torchscript_modules_are_refused_by_name():
    """TorchScript modules' calls cannot be recorded (their forward is compiled): a scripted
    model is refused up front, and a stack whose blocks cannot be found because one of them is
    scripted says which, instead of only that no blocks were found."""
    torch.manual_seed(0)
    x = torch.randn(4, 8, 16)
    eager = torch.nn.Sequential(ScriptableBlock(), ScriptableBlock(), ScriptableBlock())
    assert at.diagnose(eager, x).structure["blocks"] == ["0", "1", "2"]
    with pytest.raises(TypeError, match="model is a TorchScript module"):
        at.diagnose(torch.jit.script(eager), x)
    mixed = torch.nn.Sequential(ScriptableBlock(), torch.jit.script(ScriptableBlock()))
    with pytest.raises(ValueError, match=r"cannot find the blocks.*TorchScript modules cannot be "
                                         r"measured, their calls are not recorded: '1'; pass"):
        at.diagnose(mixed, x)


def test_several_batches_give_a_spread():
    result = at.diagnose(encoder(4, True), tokens(0), batches=[tokens(1), tokens(2)])
    assert result.summary["top_to_bottom"]["n"] == 3
    s = result.summary["top_to_bottom"]
    assert s["q25"] <= s["median"] <= s["q75"]


# --- outputs and the command line -------------------------------------------------------------

def test_table_json_and_figure(tmp_path):
    result = at.diagnose(encoder(4, False), tokens())
    table = result.table()
    assert "layers.3" in table and "gradient top/bottom block" in table and "post_norm" in table
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))  # standard JSON
    assert data["placement"] == "post_norm" and len(data["blocks"]) == 4
    assert data["lab_reference"]["depth"] == 6
    # One token per sample: no pair of tokens, no cosine; written as null, not NaN.
    one_token = at.diagnose(encoder(2, True), tokens()[:, :1]).to_dict()
    assert one_token["blocks"][0]["token_cosine"]["median"] is None
    json.dumps(one_token, allow_nan=False)
    path = result.plot(str(tmp_path / "diagnose.png"))
    assert os.path.getsize(path) > 10_000


FACTORY = textwrap.dedent("""
    import torch

    def build(seed=0):
        torch.manual_seed(seed)
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=True)
        model = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        return model, torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(seed))
""")


def run_cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "addnorm", "diagnose", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_command_line_builds_the_model_per_seed(tmp_path):
    (tmp_path / "my_model.py").write_text(FACTORY)
    done = run_cli("my_model:build", "--seeds", "3", "--json", "out.json", "--plot", "out.svg",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "pre_norm" in done.stdout and "3 run(s)" in done.stdout
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["summary"]["top_to_bottom"]["n"] == 3
    assert (tmp_path / "out.svg").read_text().startswith("<?xml")
    by_path = run_cli(str(tmp_path / "my_model.py") + ":build", cwd=tmp_path)
    assert by_path.returncode == 0, by_path.stderr


@pytest.mark.parametrize("args, message", [
    (["my_model"], "expected 'module:function'"),
    (["my_model:nothing"], "has no function 'nothing'"),
    (["missing.py:build"], "does not exist"),
    (["my_model:build", "--seeds", "0"], "--seeds is 0"),
    (["my_model:unseeded", "--seeds", "2"], "needs a factory with a `seed` argument"),
    (["my_model:raises"], "the factory raised RuntimeError: no data"),
    (["broken:build"], "importing broken raised SyntaxError"),
    (["my_model:wrong_batch"], "running the model raised RuntimeError"),
    (["my_model:build", "--json", "no/such/folder/d.json"], "the folder no/such/folder does not exist"),
    (["my_model:build", "--plot", "d.xyz"], "--plot d.xyz: expected a file ending in one of"),
])
def test_the_command_line_refuses_bad_arguments_by_name(tmp_path, args, message):
    (tmp_path / "my_model.py").write_text(FACTORY + textwrap.dedent("""
        def unseeded():
            return build()

        def raises():
            raise RuntimeError("no data")

        def wrong_batch():
            model, _ = build()
            return [model, torch.randn(2, 8, 31)]
    """))
    (tmp_path / "broken.py").write_text("def build(:\n")
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# --- models as people write them (an independent review's findings) ---------------------------

class NanoGPT(torch.nn.Module):
    """GPT-2's initialisation (std 0.02): the stream is small, so eps is not negligible."""

    def __init__(self, depth=4, d=64, vocab=50):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, d)
        self.h = torch.nn.ModuleList(GPTBlock(d, 4) for _ in range(depth))
        for block in self.h:
            block.ln_1, block.ln_2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.ln_f = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab)
        for module in self.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(module.weight, std=0.02)

    def forward(self, ids):
        x = self.wte(ids)
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x))


def test_norms_reading_a_small_stream_are_found():
    torch.manual_seed(0)
    result = at.diagnose(NanoGPT(), gpt_batch())
    assert len(result.structure["norms"]) == 9
    assert result.blocks[0]["stream_rms_in"]["median"] < 0.05  # eps matters at this scale
    assert [b["placement"] for b in result.blocks] == ["pre_norm"] * 4


def test_a_frozen_encoder_still_shows_its_norms_and_steps_nothing_frozen():
    model = encoder(4, True)
    model.requires_grad_(False)  # torch's fused inference path would skip the norms' calls
    result = at.diagnose(model, tokens())
    assert len(result.structure["norms"]) == 8 and result.placement == "pre_norm"
    assert not any(p.requires_grad for p in model.parameters())

    # Blocks 0-1 frozen: the SGD step moves blocks 2-3 only, as the user's training would.
    model = encoder(4, True)
    for p in model.layers[:2].parameters():
        p.requires_grad_(False)
    x = tokens()
    result = at.diagnose(model, x, optimizer=torch.optim.SGD, lr=0.05, seed=5)
    from addnorm._diagnose import _readout_loss
    model.eval()
    for p in model.parameters():
        p.requires_grad_(True)
    out = model(x)
    _readout_loss(out, 5).backward()
    with torch.no_grad():
        before = model(x).clone()
        for p in model.layers[2:].parameters():
            p.sub_(0.05 * p.grad)
        after = model(x)
    assert result.summary["output_change"]["median"] == pytest.approx(
        float((after - before).norm() / before.norm()), rel=1e-4)


def test_the_step_is_measured_on_one_path_with_a_padding_mask():
    """TransformerEncoder with nested tensors takes another path without autograd: a zero step
    must show no change at all."""
    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, 3, enable_nested_tensor=True)

        def forward(self, x, pad):
            return self.encoder(x, src_key_padding_mask=pad)

    torch.manual_seed(0)
    pad = torch.zeros(2, 8, dtype=torch.bool)
    pad[0, 5:] = True
    result = at.diagnose(Masked(), (torch.randn(2, 8, 32), pad),
                         optimizer=lambda params: torch.optim.SGD(params, lr=0.0))
    assert result.summary["output_change"]["median"] == 0.0


def test_the_blocks_are_the_chain_not_heads_experts_or_a_shared_layer():
    class MultiHead(GPT):
        def __init__(self):
            super().__init__(depth=4)
            self.heads = torch.nn.ModuleList(
                torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 50))
                for _ in range(8))

        def forward(self, ids):
            x = self.embed(ids)
            for block in reversed(self.blocks):  # call order, not container order
                x = block(x)
            return torch.stack([head(x) for head in self.heads])

    torch.manual_seed(0)
    result = at.diagnose(MultiHead(), gpt_batch())
    assert result.structure["blocks"] == [f"blocks.{i}" for i in (3, 2, 1, 0)]

    class MoE(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.experts = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(8))

        def forward(self, x):
            return x + sum(expert(x) for expert in self.experts) / 8

    result = at.diagnose(torch.nn.Sequential(*[MoE(16) for _ in range(4)]), torch.randn(2, 5, 16))
    assert result.structure["blocks"] == ["0", "1", "2", "3"]

    shared = torch.nn.Linear(16, 16)
    with pytest.raises(ValueError, match="shared weights"):
        at.diagnose(torch.nn.Sequential(shared, shared, shared), torch.randn(2, 16))
    mlp = torch.nn.Sequential(torch.nn.Linear(10, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    with pytest.raises(ValueError, match="changes its input's shape"):
        at.diagnose(mlp, torch.randn(8, 10))


def test_blocks_called_with_keywords_and_models_with_dict_outputs():
    class Layer(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln, self.fc = torch.nn.LayerNorm(d), torch.nn.Linear(d, d)

        def forward(self, hidden_states, attention_mask=None, *, scale):
            return hidden_states + scale * self.fc(self.ln(hidden_states))

    class HF(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(Layer(16) for _ in range(3))
            self.head = torch.nn.Linear(16, 4)

        def forward(self, x, labels=None):
            for layer in self.layers:
                x = layer(hidden_states=x, attention_mask=None, scale=0.5)
            logits = self.head(x)
            out = {"logits": logits}
            if labels is not None:  # HuggingFace puts the loss first
                out = {"loss": logits.logsumexp(-1).mean(), "logits": logits}
            return out

    torch.manual_seed(0)
    model, x = HF(), torch.randn(2, 5, 16)
    plain = at.diagnose(model, x)
    assert plain.placement == "pre_norm"
    assert all(block["shortcut"]["median"] > 0.5 for block in plain.blocks)
    with_labels = at.diagnose(model, {"x": x, "labels": torch.zeros(2, dtype=torch.long)})
    # The logits are measured, not the loss.
    assert with_labels.summary["output_change"]["median"] == pytest.approx(
        plain.summary["output_change"]["median"], rel=1e-6)


def test_it_runs_under_no_grad_and_with_a_tuple_batch_for_two_inputs():
    torch.manual_seed(0)
    layer = torch.nn.TransformerDecoderLayer(32, 4, 64, batch_first=True)
    decoder = torch.nn.TransformerDecoder(layer, 3)
    batch = (torch.randn(2, 6, 32), torch.randn(2, 7, 32))
    with torch.no_grad():
        result = at.diagnose(decoder, batch)
    assert result.placement == "post_norm" and result.depth == 3


def test_leaves_with_two_inputs_and_look_alike_modules_are_not_norms():
    class Gate(torch.nn.Module):  # a leaf of two inputs: skipped, not a crash
        def forward(self, x, g):
            return x * torch.sigmoid(g)

    class Block(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm, self.fc, self.gate = torch.nn.LayerNorm(d), torch.nn.Linear(d, d), Gate()
            self.constant = torch.nn.Linear(d, d)  # zero weights: ignores its input
            torch.nn.init.zeros_(self.constant.weight)

        def forward(self, x):
            h = self.fc(self.norm(x))
            scaled = x / x.abs().amax()  # a whole-tensor scaler (invariant to one scale only)
            return x + self.gate(h, h) + self.constant(x) + 0 * scaled

    torch.manual_seed(0)
    result = at.diagnose(torch.nn.Sequential(*[Block(16) for _ in range(3)]),
                         torch.randn(2, 5, 16))
    assert sorted(result.structure["norms"]) == ["0.norm", "1.norm", "2.norm"]

"""A whole SequenceModel (embedding, N transformer blocks, head, cross-entropy) against the same
model written in PyTorch 1.13 with the same weights and tokens.

nn_torch_compare_tool (src/nn) builds the model in addnorm, runs one forward and backward, and
writes tokens, every parameter, the loss, the logits and every gradient as .npy files. Here the
same computation is written with torch operations in float64, from the exported weights, and
torch.autograd gives the reference gradients. Each float32 result from addnorm must agree with
the float64 reference to a relative error that float32 rounding explains (1e-4 of the tensor's
largest magnitude), far below what any wrong formula would give.
"""
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def compare_tool() -> Path:
    build = Path(os.environ.get("ADDNORM_BUILD_DIR", REPO_ROOT / "build"))
    tool = build / "src" / "nn" / "nn_torch_compare_tool"
    if not tool.exists():
        pytest.fail(f"{tool} is missing: build the addnorm_nn targets first")
    return tool


def positional_encoding(seq, d):
    pe = np.zeros((seq, d))
    for pos in range(seq):
        for i in range(d):
            angle = pos / 10000.0 ** ((i - i % 2) / d)
            pe[pos, i] = math.sin(angle) if i % 2 == 0 else math.cos(angle)
    return torch.tensor(pe, dtype=torch.float64)


class TorchModel:
    """The addnorm SequenceModel, written with torch ops (see include/addnorm/nn/block.hpp)."""

    def __init__(self, params, cfg, profile=False):
        self.p = params
        self.cfg = cfg
        # Admin's profiling pass, written from Liu et al.'s definition: each box's omega is the
        # running ratio, which then becomes sqrt(Var[omega x] + Var[F(x)]) (population variances
        # over the whole batch), starting from 1. None: use the omegas in params.
        self.profile = {"ratio": 1.0, "omegas": {}} if profile else None

    def norm(self, x, prefix):
        cfg, p = self.cfg, self.p
        eps = 1e-5
        gamma = p[prefix + ".gamma"]
        if cfg["norm"] == "layer_norm":
            return F.layer_norm(x, (x.shape[-1],), gamma, p[prefix + ".beta"], eps)
        if cfg["norm"] == "rms_norm":
            return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * gamma
        flat = x.reshape(-1, x.shape[-1])
        out = F.batch_norm(flat, None, None, gamma, p[prefix + ".beta"], training=True, eps=eps)
        return out.reshape(x.shape)

    def attention(self, x, prefix, lengths, causal):
        p, heads = self.p, self.cfg["n_heads"]
        batch, seq, d = x.shape
        qkv = x @ p[prefix + ".in_proj.weight"].T + p[prefix + ".in_proj.bias"]
        q, k, v = qkv.split(d, dim=-1)
        split = lambda t: t.reshape(batch, seq, heads, d // heads).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // heads)
        mask = torch.zeros(batch, 1, seq, seq, dtype=torch.bool)
        if lengths:
            for b, length in enumerate(lengths):
                mask[b, :, :, length:] = True
        if causal:
            mask |= torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        context = torch.softmax(scores, dim=-1) @ v
        context = context.transpose(1, 2).reshape(batch, seq, d)
        return context @ p[prefix + ".out_proj.weight"].T + p[prefix + ".out_proj.bias"]

    def ffn(self, x, prefix):
        p = self.p
        hidden = x @ p[prefix + ".linear1.weight"].T + p[prefix + ".linear1.bias"]
        hidden = F.relu(hidden) if self.cfg["activation"] == "relu" else F.gelu(hidden)
        return hidden @ p[prefix + ".linear2.weight"].T + p[prefix + ".linear2.bias"]

    def box(self, x, sublayer, prefix):
        placement = self.cfg["placement"]
        norm = prefix + ".norm"
        if placement == "pre_norm":
            return x + sublayer(self.norm(x, norm))
        if placement == "post_norm":
            return self.norm(x + sublayer(x), norm)
        if placement == "no_norm":
            return x + sublayer(x)
        if placement == "no_residual":
            return self.norm(sublayer(x), norm)
        if placement == "deep_norm":
            alpha = (2 * self.cfg["depth"]) ** 0.25
            return self.norm(alpha * x + sublayer(x), norm)
        if placement == "rezero":
            return x + self.p[prefix + ".alpha"] * sublayer(x)
        if placement == "admin":
            if self.profile is None:
                return self.norm(self.p[prefix + ".omega"] * x + sublayer(x), norm)
            omega = self.profile["ratio"]
            self.profile["omegas"][prefix + ".omega"] = omega
            shortcut, branch = omega * x, sublayer(x)
            self.profile["ratio"] = math.sqrt(float(shortcut.var(unbiased=False)) +
                                              float(branch.var(unbiased=False)))
            return self.norm(shortcut + branch, norm)
        if placement == "bare":
            return sublayer(x)
        raise ValueError(placement)

    def loss(self, tokens, targets, lengths, causal):
        cfg, p = self.cfg, self.p
        d = cfg["d_model"]
        x = p["embedding.weight"][tokens] * math.sqrt(d) + positional_encoding(tokens.shape[1], d)
        for layer in range(cfg["depth"]):
            prefix = f"blocks.{layer}"
            if cfg.get("sublayers", "attn_ffn") != "ffn":
                x = self.box(x, lambda u: self.attention(u, prefix + ".attn", lengths, causal),
                             prefix + ".attn_box")
            if cfg.get("sublayers", "attn_ffn") != "attn":
                x = self.box(x, lambda u: self.ffn(u, prefix + ".ffn"), prefix + ".ffn_box")
        if cfg["placement"] == "pre_norm":
            x = self.norm(x, "final_norm")
        logits = x @ p["head.weight"].T + p["head.bias"]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)), logits


CASES = [
    dict(placement="pre_norm", norm="layer_norm"),
    dict(placement="post_norm", norm="layer_norm"),
    dict(placement="pre_norm", norm="rms_norm"),
    dict(placement="post_norm", norm="rms_norm"),
    dict(placement="pre_norm", norm="layer_norm", causal=1, lengths="4,6", activation="gelu"),
    dict(placement="post_norm", norm="rms_norm", causal=0, lengths="2,6", init="gpt2"),
    dict(placement="post_norm", norm="batch_norm"),
    dict(placement="pre_norm", norm="batch_norm"),
    dict(placement="deep_norm", norm="layer_norm"),
    dict(placement="rezero", norm="layer_norm"),
    dict(placement="no_norm", norm="layer_norm"),
    dict(placement="no_residual", norm="rms_norm"),
    dict(placement="admin", norm="layer_norm"),
    dict(placement="admin", norm="rms_norm", sublayers="ffn"),
    dict(placement="bare", norm="layer_norm", sublayers="attn"),
    dict(placement="pre_norm", norm="layer_norm", sublayers="attn"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_sequence_model_matches_torch(case, compare_tool, tmp_path):
    cfg = dict(depth=3, d_model=16, n_heads=4, d_ff=24, vocab=11, batch=2, seq=6, seed=7,
               activation="relu", causal=0, lengths="")
    cfg.update(case)
    args = [f"{k}={v}" for k, v in cfg.items()]
    subprocess.run([str(compare_tool), str(tmp_path), *args], check=True, capture_output=True)
    params = {}
    for path in tmp_path.glob("param.*.npy"):
        name = path.name[len("param."):-len(".npy")]
        params[name] = torch.tensor(np.load(path).astype(np.float64), requires_grad=True)
    tokens = torch.tensor(np.load(tmp_path / "tokens.npy").astype(np.int64))
    targets = torch.tensor(np.load(tmp_path / "targets.npy").astype(np.int64))
    lengths = [int(v) for v in cfg["lengths"].split(",")] if cfg["lengths"] else []
    model = TorchModel(params, dict(cfg, depth=int(cfg["depth"])))
    loss, logits = model.loss(tokens, targets, lengths, bool(cfg["causal"]))
    loss.backward()

    ours_loss = float(np.load(tmp_path / "loss.npy")[0])
    assert ours_loss == pytest.approx(loss.item(), rel=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "logits.npy"), logits.detach().numpy(),
                               rtol=0, atol=1e-4 * float(logits.abs().max()))
    assert params, "the tool exported no parameters"
    # Some gradients are exactly zero in exact arithmetic (a bias that BatchNorm removes), so
    # each tensor's scale is floored at a thousandth of the largest gradient of the model.
    largest = max(float(param.grad.abs().max()) for param in params.values())
    for name, param in params.items():
        ours = np.load(tmp_path / f"grad.{name}.npy").astype(np.float64)
        want = param.grad.numpy()
        scale = max(float(np.abs(want).max()), 1e-3 * largest)
        error = float(np.abs(ours - want).max())
        assert error <= 1e-4 * scale, f"{name}: max error {error:.3g} vs scale {scale:.3g}"


@pytest.mark.parametrize("sublayers", ["attn_ffn", "ffn"])
def test_admin_profiling_matches_torch(sublayers, compare_tool, tmp_path):
    """The omegas addnorm's profiling pass set are the ones Liu et al.'s recurrence gives when
    PyTorch runs it on the same model and batch."""
    cfg = dict(placement="admin", norm="layer_norm", depth=4, d_model=16, n_heads=4, d_ff=24,
               vocab=11, batch=2, seq=6, seed=3, activation="relu", causal=0, lengths="",
               sublayers=sublayers)
    args = [f"{k}={v}" for k, v in cfg.items()]
    subprocess.run([str(compare_tool), str(tmp_path), *args], check=True, capture_output=True)
    params = {path.name[len("param."):-len(".npy")]: torch.tensor(np.load(path).astype(np.float64))
              for path in tmp_path.glob("param.*.npy")}
    tokens = torch.tensor(np.load(tmp_path / "tokens.npy").astype(np.int64))
    targets = torch.tensor(np.load(tmp_path / "targets.npy").astype(np.int64))
    model = TorchModel(params, cfg, profile=True)
    with torch.no_grad():
        model.loss(tokens, targets, [], False)
    expected = model.profile["omegas"]
    boxes = 4 * (2 if sublayers == "attn_ffn" else 1)
    assert len(expected) == boxes
    assert sorted(expected) == sorted(name for name in params if name.endswith(".omega"))
    assert max(expected.values()) > 1.2  # the profile moved omega away from 1
    for name, omega in expected.items():
        np.testing.assert_allclose(params[name].numpy(), omega, rtol=2e-6, err_msg=name)


@pytest.mark.parametrize("args, message", [
    (["dmodel=16"], 'argument "dmodel=16": unknown key, expected one of placement, norm'),
    (["depth=2", "depth=3"], 'argument "depth=3": depth is given twice'),
    (["seed=7x"], 'seed is "7x", expected an integer'),
    (["depth"], 'argument "depth" is not key=value'),
    (["lengths=4,x"], 'lengths is "x", expected an integer'),
    (["init=gtp2"], 'init is "gtp2", expected one of xavier, gpt2'),
    (["causal=true"], 'causal is "true", expected one of 0, 1'),
])
def test_compare_tool_refuses_bad_arguments(args, message, compare_tool, tmp_path):
    """A typo is an error that names it, not a silently ignored key or a default used instead,
    and nothing is written."""
    result = subprocess.run([str(compare_tool), str(tmp_path / "out"), *args],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert message in result.stderr
    assert not (tmp_path / "out").exists()

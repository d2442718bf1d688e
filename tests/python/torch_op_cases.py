"""The one table of torch.ops.addnorm cases the PyTorch tests share: each is (our operator on
(x, r, weight, bias), PyTorch's definition of the same op), x and r shaped (..., d) and the
parameters (d,). test_torch_ops_numerics.py runs them in float32 and 16 bits,
test_torch_higher_order.py under forward-mode AD, functorch and double backward."""
import torch
import torch.nn.functional as F

import addnorm
import addnorm.torch  # noqa: F401  (loads torch.ops.addnorm)

ops = torch.ops.addnorm


def rms_reference(x, weight, eps, zero_centered=False):
    scale = (1 + weight) if zero_centered else weight
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * scale


def dropout_reference(s, p, seed, offset=0):
    keep = torch.from_numpy(addnorm.dropout_mask(tuple(s.shape), p, seed, offset))
    return torch.where(keep, s / (1 - p), s * 0)  # s * 0: NaN stays NaN, as s * mask


def row_norm_cases(d):
    """The row norms, both Add & Norm placements (post-norm with and without dropout) and
    training BatchNorm over x's middle axis as channels."""
    return {
        "layer_norm": (lambda x, r, w, b: ops.layer_norm(x, [d], w, b, 1e-5),
                       lambda x, r, w, b: F.layer_norm(x, (d,), w, b, 1e-5)),
        "rms_norm": (lambda x, r, w, b: ops.rms_norm(x, [d], w, 1e-6, False),
                     lambda x, r, w, b: rms_reference(x, w, 1e-6)),
        "rms_norm_zero_centered": (lambda x, r, w, b: ops.rms_norm(x, [d], w, 1e-6, True),
                                   lambda x, r, w, b: rms_reference(x, w, 1e-6, True)),
        "add_norm_pre": (lambda x, r, w, b: torch.cat(ops.add_norm_pre(x, r, [d], w, b, 1e-5)),
                         lambda x, r, w, b: torch.cat([x + r, F.layer_norm(x + r, (d,), w, b)])),
        "add_norm_pre_rms": (
            lambda x, r, w, b: torch.cat(ops.add_norm_pre(x, r, [d], w, None, 1e-6, "rms_norm")),
            lambda x, r, w, b: torch.cat([x + r, rms_reference(x + r, w, 1e-6)])),
        "add_norm_post": (lambda x, r, w, b: ops.add_norm_post(x, r, [d], w, b, 1e-5),
                          lambda x, r, w, b: F.layer_norm(x + r, (d,), w, b)),
        "add_norm_post_dropout": (
            lambda x, r, w, b: ops.add_norm_post(x, r, [d], w, b, 1e-5, "layer_norm", False, 0.25,
                                                 77, 5),
            lambda x, r, w, b: F.layer_norm(x + dropout_reference(r, 0.25, 77, 5), (d,), w, b)),
        "batch_norm": (
            lambda x, r, w, b: ops.batch_norm(x.transpose(1, 2), w, b, None, None, True, 0.1,
                                              1e-5),
            lambda x, r, w, b: F.batch_norm(x.transpose(1, 2), None, None, w, b, True, 0.1,
                                            1e-5)),
    }

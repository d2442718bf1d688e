"""Differentiable functions on PyTorch tensors, each one call to an operator registered with
PyTorch's dispatcher (torch.ops.addnorm.*, loaded by _torch_library): CPU kernels for float32,
bfloat16, float16 and float64 tensors that run addnorm's library on the tensors' memory, with
autograd, CPU autocast, TorchScript and ONNX export. Strided tensors are made contiguous (a
copy) first, as PyTorch's own ops do.

The functions only adapt Python arguments (an int normalized_shape, seed=None); scripted code
calls torch.ops.addnorm.* directly with the same arguments.
"""
import torch

from . import _torch_library  # noqa: F401  (loads the operators)

def fresh_seed() -> int:
    """A dropout seed drawn from torch's default generator, so torch.manual_seed fixes it.
    Seeds lie in [0, 2**62) so that seed + element offsets stay within int64. (Scriptable: the
    literal is 2**62.)"""
    return int(torch.randint(0, 4611686018427387904, [1]).item())


def _shape(normalized_shape):
    if isinstance(normalized_shape, int):
        return [normalized_shape]
    return [int(d) for d in normalized_shape]


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.layer_norm, computed by addnorm (differentiable)."""
    return torch.ops.addnorm.layer_norm(input, _shape(normalized_shape), weight, bias,
                                        float(eps))


def rms_norm(input, normalized_shape, weight=None, eps=None, zero_centered_weight=False):
    """torch.nn.functional.rms_norm (PyTorch >= 2.4), computed by addnorm. eps=None means the
    input dtype's machine epsilon, as in PyTorch."""
    return torch.ops.addnorm.rms_norm(input, _shape(normalized_shape), weight,
                                      None if eps is None else float(eps),
                                      bool(zero_centered_weight))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm, computed by addnorm; running statistics are updated in
    place in training, as PyTorch does. 16-bit input is computed in float32 (the library has no
    16-bit BatchNorm) and rounded once."""
    return torch.ops.addnorm.batch_norm(input, weight, bias, running_mean, running_var,
                                        bool(training), float(momentum), float(eps))


def dropout(input, p=0.5, training=True, seed=None, offset=0):
    """Dropout with addnorm's counter-based mask. seed=None draws one from torch's generator."""
    if not training or p == 0:
        return input
    return torch.ops.addnorm.dropout(input, float(p), fresh_seed() if seed is None else seed,
                                     offset)


def add_norm_pre(x, r, normalized_shape, weight=None, bias=None, eps=1e-5, norm="layer_norm",
                 zero_centered_weight=False):
    """Pre-norm Add & Norm: returns (h, y) with h = x + r and y = Norm(h)."""
    return torch.ops.addnorm.add_norm_pre(x, r, _shape(normalized_shape), weight, bias,
                                          float(eps), norm, bool(zero_centered_weight))


def add_norm_post(x, s, normalized_shape, weight=None, bias=None, eps=1e-5, norm="layer_norm",
                  zero_centered_weight=False, p=0.0, seed=None, offset=0):
    """Post-norm Add & Norm: Norm(x + Dropout(s)). seed=None draws one from torch's generator
    when p > 0; the backward regenerates the same mask from it. 16-bit tensors run in the
    library's 16-bit post-norm: float32 inside, each output rounded once."""
    if seed is None:
        seed = fresh_seed() if p > 0 else 0
    return torch.ops.addnorm.add_norm_post(x, s, _shape(normalized_shape), weight, bias,
                                           float(eps), norm, bool(zero_centered_weight),
                                           float(p), seed, offset)

"""torch.autograd.Function wrappers around the NumPy functions, and functional forms of them.

Tensors cross to NumPy without a copy (tensor.detach().numpy() shares memory) when they are
contiguous CPU float32/float64 tensors; a strided tensor is made contiguous first (a copy), which
PyTorch users expect. Outputs come back with torch.from_numpy, again without a copy.
"""
import torch

from . import _batch_norm, _norms, _residual

_DTYPES = (torch.float32, torch.float64)


def to_numpy(name, tensor):
    """A NumPy array sharing the tensor's memory (after .contiguous()); None stays None."""
    if tensor is None:
        return None
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} is a {type(tensor).__name__}, expected a torch.Tensor")
    if tensor.device.type != "cpu":
        raise TypeError(f"{name} is on device {tensor.device}, expected a CPU tensor (addnorm "
                        "runs on the CPU)")
    if tensor.dtype not in _DTYPES:
        raise TypeError(f"{name} has dtype {tensor.dtype}, expected torch.float32 or "
                        "torch.float64")
    return tensor.detach().contiguous().numpy()


def in_place_numpy(name, tensor):
    """The NumPy view of a buffer updated in place (running statistics): no copy allowed."""
    if tensor is None:
        return None
    if not tensor.is_contiguous():
        raise ValueError(f"{name} is not contiguous, expected a contiguous tensor (it is "
                         "updated in place)")
    return to_numpy(name, tensor)


def _tensor(array, wanted=True):
    return torch.from_numpy(array) if wanted and array is not None else None


def fresh_seed():
    """A dropout seed drawn from torch's default generator, so torch.manual_seed fixes it."""
    return int(torch.randint(0, 2**62, ()).item())


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, normalized_shape, eps):
        y = _norms.layer_norm(to_numpy("x", x), normalized_shape, to_numpy("weight", weight),
                              to_numpy("bias", bias), eps)
        ctx.save_for_backward(x, weight, bias)
        ctx.normalized_shape, ctx.eps = normalized_shape, eps
        return torch.from_numpy(y)

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias = ctx.saved_tensors
        dx, dweight, dbias = _norms.layer_norm_backward(
            to_numpy("dy", dy), to_numpy("x", x), ctx.normalized_shape,
            to_numpy("weight", weight), to_numpy("bias", bias), ctx.eps)
        wants = ctx.needs_input_grad
        return _tensor(dx, wants[0]), _tensor(dweight, wants[1]), _tensor(dbias, wants[2]), \
            None, None


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, normalized_shape, eps, zero_centered_weight):
        y = _norms.rms_norm(to_numpy("x", x), normalized_shape, to_numpy("weight", weight), eps,
                            zero_centered_weight)
        ctx.save_for_backward(x, weight)
        ctx.args = (normalized_shape, eps, zero_centered_weight)
        return torch.from_numpy(y)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        normalized_shape, eps, zero_centered_weight = ctx.args
        dx, dweight = _norms.rms_norm_backward(to_numpy("dy", dy), to_numpy("x", x),
                                               normalized_shape, to_numpy("weight", weight), eps,
                                               zero_centered_weight)
        wants = ctx.needs_input_grad
        return _tensor(dx, wants[0]), _tensor(dweight, wants[1]), None, None, None


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps):
        running = (in_place_numpy("running_mean", running_mean),
                   in_place_numpy("running_var", running_var))
        y = _batch_norm.batch_norm(to_numpy("x", x), *running, to_numpy("weight", weight),
                                   to_numpy("bias", bias), training, momentum, eps)
        ctx.save_for_backward(x, weight, bias)
        # Inference's backward needs the statistics the forward used; a later training step
        # could change the buffers before this backward runs, so keep a copy (C values).
        ctx.running = (None, None) if training else (running[0].copy(), running[1].copy())
        ctx.training, ctx.eps = training, eps
        return torch.from_numpy(y)

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias = ctx.saved_tensors
        dx, dweight, dbias = _batch_norm.batch_norm_backward(
            to_numpy("dy", dy), to_numpy("x", x), *ctx.running, to_numpy("weight", weight),
            to_numpy("bias", bias), ctx.training, ctx.eps)
        wants = ctx.needs_input_grad
        return (_tensor(dx, wants[0]), _tensor(dweight, wants[1]), _tensor(dbias, wants[2]),
                None, None, None, None, None)


class DropoutFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p, seed, offset):
        ctx.args = (p, seed, offset)
        return torch.from_numpy(_residual.dropout(to_numpy("x", x), p, seed, offset))

    @staticmethod
    def backward(ctx, dy):
        return torch.from_numpy(_residual.dropout_backward(to_numpy("dy", dy), *ctx.args)), \
            None, None, None


class AddNormPreFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, r, weight, bias, normalized_shape, eps, norm, zero_centered_weight):
        h, y = _residual.add_norm_pre(to_numpy("x", x), to_numpy("r", r), normalized_shape,
                                      to_numpy("weight", weight), to_numpy("bias", bias), eps,
                                      norm, zero_centered_weight)
        h, y = torch.from_numpy(h), torch.from_numpy(y)
        ctx.save_for_backward(h, weight, bias)
        ctx.args = (normalized_shape, eps, norm, zero_centered_weight)
        return h, y

    @staticmethod
    def backward(ctx, dh_next, dy):
        h, weight, bias = ctx.saved_tensors
        dh, dweight, dbias = _residual.add_norm_pre_backward(
            to_numpy("dy", dy), to_numpy("dh_next", dh_next), to_numpy("h", h), ctx.args[0],
            to_numpy("weight", weight), to_numpy("bias", bias), *ctx.args[1:])
        wants = ctx.needs_input_grad
        dh = torch.from_numpy(dh)
        # dx and dr are equal; give each its own tensor so that accumulating into one (x.grad)
        # never changes the other.
        dr = dh.clone() if wants[0] and wants[1] else dh
        return (dh if wants[0] else None, dr if wants[1] else None, _tensor(dweight, wants[2]),
                _tensor(dbias, wants[3]), None, None, None, None)


class AddNormPostFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s, weight, bias, normalized_shape, eps, norm, zero_centered_weight, p,
                seed, offset):
        ctx.args = (normalized_shape, to_numpy("weight", weight), to_numpy("bias", bias), eps,
                    norm, zero_centered_weight, p, seed, offset)
        y = _residual.add_norm_post(to_numpy("x", x), to_numpy("s", s), *ctx.args)
        ctx.save_for_backward(x, s, weight, bias)
        ctx.args = (normalized_shape, eps, norm, zero_centered_weight, p, seed, offset)
        return torch.from_numpy(y)

    @staticmethod
    def backward(ctx, dy):
        x, s, weight, bias = ctx.saved_tensors
        normalized_shape, eps, norm, zero_centered_weight, p, seed, offset = ctx.args
        dx, ds, dweight, dbias = _residual.add_norm_post_backward(
            to_numpy("dy", dy), to_numpy("x", x), to_numpy("s", s), normalized_shape,
            to_numpy("weight", weight), to_numpy("bias", bias), eps, norm, zero_centered_weight,
            p, seed, offset)
        wants = ctx.needs_input_grad
        return (_tensor(dx, wants[0]), _tensor(ds, wants[1]), _tensor(dweight, wants[2]),
                _tensor(dbias, wants[3])) + (None,) * 7


def _shape(normalized_shape):
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(int(d) for d in normalized_shape)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.layer_norm, computed by addnorm (differentiable)."""
    return LayerNormFunction.apply(input, weight, bias, _shape(normalized_shape), float(eps))


def rms_norm(input, normalized_shape, weight=None, eps=None, zero_centered_weight=False):
    """torch.nn.functional.rms_norm (PyTorch >= 2.4), computed by addnorm. eps=None means the
    input dtype's machine epsilon, as in PyTorch."""
    eps = torch.finfo(input.dtype).eps if eps is None else float(eps)
    return RMSNormFunction.apply(input, weight, _shape(normalized_shape), eps,
                                 bool(zero_centered_weight))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm, computed by addnorm; running statistics are updated in
    place in training, as PyTorch does."""
    return BatchNormFunction.apply(input, weight, bias, running_mean, running_var,
                                   bool(training), float(momentum), float(eps))


def dropout(input, p=0.5, training=True, seed=None, offset=0):
    """Dropout with addnorm's counter-based mask. seed=None draws one from torch's generator."""
    if not training or p == 0:
        return input
    return DropoutFunction.apply(input, float(p), fresh_seed() if seed is None else seed, offset)


def add_norm_pre(x, r, normalized_shape, weight=None, bias=None, eps=1e-5, norm="layer_norm",
                 zero_centered_weight=False):
    """Pre-norm Add & Norm: returns (h, y) with h = x + r and y = Norm(h)."""
    return AddNormPreFunction.apply(x, r, weight, bias, _shape(normalized_shape), float(eps),
                                    norm, bool(zero_centered_weight))


def add_norm_post(x, s, normalized_shape, weight=None, bias=None, eps=1e-5, norm="layer_norm",
                  zero_centered_weight=False, p=0.0, seed=None, offset=0):
    """Post-norm Add & Norm: Norm(x + Dropout(s)). seed=None draws one from torch's generator
    when p > 0; it is saved for the backward, which regenerates the same mask."""
    if seed is None:
        seed = fresh_seed() if p > 0 else 0
    return AddNormPostFunction.apply(x, s, weight, bias, _shape(normalized_shape), float(eps),
                                     norm, bool(zero_centered_weight), float(p), seed, offset)

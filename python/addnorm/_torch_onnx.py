"""ONNX symbolics for torch.ops.addnorm.*: torch.onnx.export writes standard ONNX ops, so an
exported model runs in any ONNX runtime without addnorm.

- LayerNorm: LayerNormalization (epsilon attribute, weight and bias as its Scale and B inputs)
  from opset 17; below 17 (or without a weight) the decomposition ReduceMean, Sub, Mul,
  ReduceMean, Add(eps), Sqrt, Div, Mul(weight), Add(bias).
- GroupNorm: Reshape to (N, G, -1), LayerNorm's decomposition over the last axis, Reshape back,
  Mul(weight) and Add(bias) unsqueezed to (C, 1, ...). (ONNX's GroupNormalization-18 has
  per-group scale and bias, and -21 is beyond torch 1.13's exporter.)
- RMSNorm (no standard op before opset 23): Mul, ReduceMean, Add(eps), Sqrt, Div, Mul(weight)
  (Mul(1 + weight) when zero-centred).
- Fused Add & Norm: Add (its operands cast to torch.result_type's dtype where they differ;
  ONNX's Add broadcasts as PyTorch's does), then the norm (pre-norm returns both).
- BatchNorm: BatchNormalization, as PyTorch exports its own (constant weight and bias for
  affine=False; batch statistics computed in the graph in training mode or without running
  statistics).

Dropout is exported only as the identity, i.e. from a model in eval mode (or p = 0); a graph
with active dropout raises, since addnorm's counter-based mask has no ONNX equivalent.
"""
import torch
from torch.onnx import _type_utils, symbolic_helper
from torch.onnx._globals import GLOBALS

_DTYPES = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16,
           "BFloat16": torch.bfloat16}
# RMSNorm's eps=None: the machine epsilon of the compute type (float32 for 16-bit input), as
# kernels.cpp's eps_or_default resolves it.
_MACHINE_EPS = {dtype: torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps
                for dtype in _DTYPES.values()}
# F.layer_norm's default eps.
_LAYER_NORM_EPS = 1e-5


def _dtype(value):
    return _DTYPES.get(symbolic_helper._try_get_scalar_type(value), torch.float32)


def _scalar(g, number, like):
    """A constant of like's dtype (ONNX's binary ops need matching types)."""
    return g.op("Constant", value_t=torch.tensor(number, dtype=_dtype(like)))


def _given(value):
    return value is not None and not symbolic_helper._is_none(value)


def _affine(g, y, weight, bias, zero_centered_weight=False):
    if _given(weight):
        scale = g.op("Add", weight, _scalar(g, 1.0, weight)) if zero_centered_weight else weight
        y = g.op("Mul", y, scale)
    if _given(bias):
        y = g.op("Add", y, bias)
    return y


def _mean_over(g, value, axes):
    return g.op("ReduceMean", value, axes_i=axes, keepdims_i=1)


def _layer_norm(g, x, dims, weight, bias, eps, opset):
    if opset >= 17 and _given(weight):
        inputs = [x, weight] + ([bias] if _given(bias) else [])
        return g.op("LayerNormalization", *inputs, axis_i=-dims, epsilon_f=eps)
    axes = list(range(-dims, 0))
    centred = g.op("Sub", x, _mean_over(g, x, axes))
    variance = _mean_over(g, g.op("Mul", centred, centred), axes)
    std = g.op("Sqrt", g.op("Add", variance, _scalar(g, eps, x)))
    return _affine(g, g.op("Div", centred, std), weight, bias)


def _rms_norm(g, x, dims, weight, eps, zero_centered_weight):
    axes = list(range(-dims, 0))
    mean_square = _mean_over(g, g.op("Mul", x, x), axes)
    rms = g.op("Sqrt", g.op("Add", mean_square, _scalar(g, eps, x)))
    return _affine(g, g.op("Div", x, rms), weight, None, zero_centered_weight)


def _norm(g, h, normalized_shape, weight, bias, eps, norm, zero_centered_weight, opset):
    if norm == "rms_norm":
        return _rms_norm(g, h, len(normalized_shape), weight, eps, zero_centered_weight)
    return _layer_norm(g, h, len(normalized_shape), weight, bias, eps, opset)


def _eps(eps, norm, x):
    """The operators' eps=None, as kernels.cpp's eps_or_default resolves it: layer_norm's
    1e-5 (F.layer_norm), rms_norm's machine epsilon of x's dtype (F.rms_norm)."""
    if not symbolic_helper._is_none(eps):
        return symbolic_helper._get_const(eps, "f", "eps")
    return _MACHINE_EPS[_dtype(x)] if norm == "rms_norm" else _LAYER_NORM_EPS


def _exact_dtype(value):
    """value's dtype as the exporter knows it (any type ONNX has), or None when unknown."""
    name = symbolic_helper._try_get_scalar_type(value)
    return None if name is None else _type_utils.JitScalarType.from_name(name).dtype()


def _example(value, dtype):
    """An empty tensor of dtype with value's rank class (0-dim or not): what torch.result_type
    needs to promote as `x + r` does. Raises where the rank is unknown: the promotion would be
    a guess."""
    rank = symbolic_helper._get_tensor_rank(value)
    if rank is None:
        raise RuntimeError("add_norm: an addend of unknown rank beside one of another dtype "
                           "cannot be promoted as x + r is; export with example inputs of "
                           "known shapes, or give the addends one dtype")
    return torch.empty((1,) * min(rank, 1), dtype=dtype)


def _sum(g, x, r):
    """x + r as PyTorch computes it: ONNX's Add broadcasts as PyTorch does, but takes one type,
    so a mixed pair is cast first to torch.result_type's dtype (a 0-dim addend, or an integer
    or bool one beside a float, does not widen the other)."""
    types = (_exact_dtype(x), _exact_dtype(r))
    if None not in types and types[0] != types[1]:
        promoted = torch.result_type(_example(x, types[0]), _example(r, types[1]))
        onnx_type = _type_utils.JitScalarType.from_dtype(promoted).onnx_type()
        x, r = (value if dtype == promoted else g.op("Cast", value, to_i=onnx_type)
                for value, dtype in zip((x, r), types))
    return g.op("Add", x, r)


def _no_active_dropout(p):
    if p > 0:
        raise RuntimeError(f"addnorm dropout with p={p} cannot be exported to ONNX, expected "
                           "p = 0: export the model in eval mode (model.eval())")


def _symbolics(opset):
    """The symbolic of every forward operator for one opset range."""

    @symbolic_helper.parse_args("v", "is", "v", "v", "f")
    def layer_norm(g, input, normalized_shape, weight, bias, eps):
        return _layer_norm(g, input, len(normalized_shape), weight, bias, eps, opset)

    @symbolic_helper.parse_args("v", "is", "v", "v", "b")
    def rms_norm(g, input, normalized_shape, weight, eps, zero_centered_weight):
        eps = _eps(eps, "rms_norm", input)
        return _rms_norm(g, input, len(normalized_shape), weight, eps, zero_centered_weight)

    @symbolic_helper.parse_args("v", "v", "is", "v", "v", "v", "s", "b")
    def add_norm_pre(g, x, r, normalized_shape, weight, bias, eps, norm, zero_centered_weight):
        h = _sum(g, x, r)
        eps = _eps(eps, norm, h)
        return h, _norm(g, h, normalized_shape, weight, bias, eps, norm, zero_centered_weight,
                        opset)

    @symbolic_helper.parse_args("v", "v", "is", "v", "v", "v", "s", "b", "f", "i", "i")
    def add_norm_post(g, x, s, normalized_shape, weight, bias, eps, norm, zero_centered_weight,
                      p, seed, offset):
        _no_active_dropout(p)
        h = _sum(g, x, s)
        eps = _eps(eps, norm, h)
        return _norm(g, h, normalized_shape, weight, bias, eps, norm,
                     zero_centered_weight, opset)

    @symbolic_helper.parse_args("v", "v", "v", "v", "v", "b", "f", "f")
    def batch_norm(g, input, weight, bias, running_mean, running_var, training, momentum, eps):
        # As PyTorch exports its own batch_norm: an absent weight or bias (affine=False) becomes
        # a constant of ones or zeros, and without running statistics (track_running_stats=
        # False) the batch's are computed in the graph. In training mode BatchNormalization
        # takes its training form, whose running-statistic outputs are left dead, as PyTorch
        # leaves them. ONNX's momentum weights the old value (PyTorch's the new batch).
        symbolic_helper.check_training_mode(training, "batch_norm")
        weight, bias, mean, var = symbolic_helper._batchnorm_helper(g, input, weight, bias,
                                                                    running_mean, running_var)
        if not training:
            return g.op("BatchNormalization", input, weight, bias, mean, var, epsilon_f=eps,
                        momentum_f=1.0 - momentum)
        if GLOBALS.export_onnx_opset_version >= 14:  # training_mode, three outputs
            outputs = g.op("BatchNormalization", input, weight, bias, mean, var, epsilon_f=eps,
                           momentum_f=1.0 - momentum, training_mode_i=1, outputs=3)
        else:  # opsets 9 to 13: five outputs mean training
            outputs = g.op("BatchNormalization", input, weight, bias, mean, var, epsilon_f=eps,
                           momentum_f=1.0 - momentum, outputs=5)
        for running in outputs[1:3]:
            running.setType(mean.type())
        for dead in outputs[3:]:
            dead.setDebugName("batch_norm_dead_output-" + dead.debugName())
        return outputs[0]

    @symbolic_helper.parse_args("v", "i", "v", "v", "f")
    def group_norm(g, input, num_groups, weight, bias, eps):
        # (N, C, *) as (N, G, rest): each row one group, normalised as LayerNorm over its last
        # axis; then back to input's shape, and weight and bias broadcast per channel.
        rank = symbolic_helper._get_tensor_rank(input)
        if rank is None:
            raise RuntimeError("addnorm group_norm needs the input's rank to export to ONNX")
        groups = g.op("Constant", value_t=torch.tensor([0, num_groups, -1], dtype=torch.int64))
        rows = g.op("Reshape", input, groups)
        y = g.op("Reshape", _layer_norm(g, rows, 1, None, None, eps, opset),
                 g.op("Shape", input))
        axes = list(range(1, rank - 1))

        def per_channel(parameter):
            if not _given(parameter) or not axes:
                return parameter
            return symbolic_helper._unsqueeze_helper(g, parameter, axes)

        return _affine(g, y, per_channel(weight), per_channel(bias))

    @symbolic_helper.parse_args("v", "f", "i", "i")
    def dropout(g, input, p, seed, offset):
        _no_active_dropout(p)
        return input

    return {"layer_norm": layer_norm, "rms_norm": rms_norm, "add_norm_pre": add_norm_pre,
            "add_norm_post": add_norm_post, "batch_norm": batch_norm, "group_norm": group_norm,
            "dropout": dropout}


def register():
    """Registers the symbolics: the decompositions from opset 9, LayerNormalization from 17."""
    for opset in (9, 17):
        for name, symbolic in _symbolics(opset).items():
            torch.onnx.register_custom_op_symbolic(f"addnorm::{name}", symbolic, opset)

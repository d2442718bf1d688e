"""Differentiable functions on PyTorch tensors, each one call to an operator registered with
PyTorch's dispatcher (torch.ops.addnorm.*, loaded by _torch_library): CPU kernels for float32,
bfloat16, float16 and float64 tensors that run addnorm's library on the tensors' memory, with
autograd, CPU autocast, TorchScript and ONNX export. Strided tensors are made contiguous (a
copy) first, as PyTorch's own ops do.

The functions only adapt Python arguments (an int normalized_shape, seed=None). Each is typed
as its torch.nn.functional counterpart is, so code that calls them compiles with
torch.jit.script as code calling torch.nn.functional does (a scripted normalized_shape is a list,
as in F.layer_norm).
"""
import functools
import operator
import re
from typing import List, Optional, Tuple

import numpy
import torch

from . import _torch_library  # noqa: F401  (loads the operators)

# The dispatcher's message for an argument of the wrong Python type: torch.ops raises it as a
# RuntimeError where torch.nn.functional's argument parser raises TypeError.
_WRONG_TYPE = re.compile(r"Expected a value of type '(?P<expected>[^']+)' for argument "
                         r"'(?P<argument>\w+)' but instead found type '(?P<found>[^']+)'")
# None for a required tensor: the dispatcher passes it on as an undefined tensor, which the
# operators refuse (kernels.cpp's check_tensor) where torch.nn.functional raises TypeError.
_NONE_TENSOR = re.compile(r"^(?P<argument>\w+) is an undefined tensor, expected a tensor")


def _type_errors_as_pytorchs(function):
    """function, raising TypeError naming the argument where one has the wrong Python type, as
    torch.nn.functional does (the operators' own checks keep their RuntimeError). TorchScript
    compiles function itself: inspect, and so torch.jit.script, follows functools.wraps'
    __wrapped__, so scripted code calls the operators with no wrapper."""
    @functools.wraps(function)
    def checked(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except RuntimeError as error:
            wrong = _WRONG_TYPE.search(str(error))
            if wrong is not None:
                raise TypeError(f"{function.__name__}(): argument '{wrong['argument']}' must be "
                                f"{wrong['expected']}, not {wrong['found']}") from None
            none = _NONE_TENSOR.match(str(error))
            if none is not None:
                raise TypeError(f"{function.__name__}(): argument '{none['argument']}' must be "
                                "Tensor, not NoneType") from None
            raise
    return checked


def fresh_seed() -> int:
    """A dropout seed drawn from torch's default generator, so torch.manual_seed fixes it.
    Seeds lie in [0, 2**62) so that seed + element offsets stay within int64. (Scriptable: the
    literal is 2**62.)"""
    return int(torch.randint(0, 4611686018427387904, [1]).item())


def _shape(normalized_shape: List[int]) -> List[int]:
    """normalized_shape as a list: an int (eager calls, as PyTorch's take one) or a sequence of
    integers (a float or a string among them is a TypeError, as in F.layer_norm)."""
    if not torch.jit.is_scripting():
        return _eager_shape(normalized_shape)
    return normalized_shape


@torch.jit.unused
def _eager_shape(normalized_shape: List[int]) -> List[int]:
    """_shape outside TorchScript (whose compiler takes no try blocks, even in eager-only
    branches; scripted, normalized_shape is typed List[int] already)."""
    # A bool is an int to Python, not to PyTorch's argument parser, which refuses it.
    if isinstance(normalized_shape, int) and not isinstance(normalized_shape, bool):
        return [normalized_shape]
    try:
        # A list or tuple (torch.Size is one), as PyTorch's parser takes: not an iterator, a set
        # or a tensor.
        if not isinstance(normalized_shape, (list, tuple)):
            raise TypeError
        if any(isinstance(d, bool) for d in normalized_shape):
            raise TypeError
        return [operator.index(d) for d in normalized_shape]
    except TypeError:
        raise TypeError(f"normalized_shape is {normalized_shape!r}, expected an int or a "
                        "sequence of ints") from None


def _flag(function: str, argument: str, value: bool) -> bool:
    """value, a bool: PyTorch's argument parser refuses anything else for a bool argument (an
    int, a float, None, numpy.bool_, a tensor) with TypeError, where Python's truth test would
    take it. (Scripted, the argument is typed bool already.)"""
    if not torch.jit.is_scripting():
        _eager_flag(function, argument, value)
    return value


@torch.jit.unused
def _eager_flag(function: str, argument: str, value: bool) -> None:
    """_flag's check outside TorchScript."""
    if not isinstance(value, bool):
        raise TypeError(f"{function}(): argument '{argument}' must be bool, not "
                        f"{type(value).__name__}")


def _number_of_groups(num_groups: int) -> int:
    """num_groups, an integer that is not a bool (PyTorch's argument parser takes an int, a
    NumPy integer or a one-element integer tensor, and refuses True with TypeError)."""
    if not torch.jit.is_scripting():
        _eager_not_bool(num_groups)
    return num_groups


@torch.jit.unused
def _eager_not_bool(num_groups: int) -> None:
    """_number_of_groups' check outside TorchScript."""
    if isinstance(num_groups, (bool, numpy.bool_)):
        raise TypeError("group_norm(): argument 'num_groups' must be int, not "
                        f"{type(num_groups).__name__}")


@_type_errors_as_pytorchs
def layer_norm(input: torch.Tensor, normalized_shape: List[int],
               weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
               eps: float = 1e-5) -> torch.Tensor:
    """torch.nn.functional.layer_norm, computed by addnorm (differentiable)."""
    return torch.ops.addnorm.layer_norm(input, _shape(normalized_shape), weight, bias, eps)


@_type_errors_as_pytorchs
def group_norm(input: torch.Tensor, num_groups: int, weight: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None, eps: float = 1e-5) -> torch.Tensor:
    """torch.nn.functional.group_norm computed by addnorm: (N, C, *) input, num_groups groups
    of consecutive channels, weight and bias per channel. As PyTorch, refuses a group of a
    single value (ValueError)."""
    # PyTorch's own check, written as F.group_norm writes it, so that the same mistakes raise
    # the same errors: a group of one value (ValueError), a rank-1 input (IndexError), no groups
    # (ZeroDivisionError). (Not while tracing: a traced graph keeps no Python checks, and sizes
    # are tensors there.)
    if not torch.jit.is_tracing():
        verify_batch_size([input.size(0) * input.size(1) // num_groups, num_groups]
                          + list(input.shape[2:]))
    # Then the argument parser's type check, as torch.group_norm comes after that check.
    num_groups = _number_of_groups(num_groups)
    # The operator returns the input's suggested memory format (channels-last or
    # channels_last_3d), as PyTorch's group_norm does, decided when it runs (traced graphs too).
    return torch.ops.addnorm.group_norm(input, num_groups, weight, bias, eps)


def _widened(tensor: torch.Tensor) -> torch.Tensor:
    """A 16-bit tensor in float32; float32 and float64 ones as they are."""
    if tensor.dtype == torch.bfloat16 or tensor.dtype == torch.float16:
        return tensor.float()
    return tensor


@_type_errors_as_pytorchs
def instance_norm(input: torch.Tensor, running_mean: Optional[torch.Tensor] = None,
                  running_var: Optional[torch.Tensor] = None,
                  weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                  use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5) -> torch.Tensor:
    """torch.nn.functional.instance_norm computed by addnorm. With the input's statistics and
    no running statistics it is GroupNorm with one channel per group; otherwise, as PyTorch
    does it, each (sample, channel) is a channel of one BatchNorm batch of shape (1, N*C, *),
    and the running statistics updated are the average over the samples."""
    if use_input_stats and not torch.jit.is_tracing() and input.dim() >= 2:
        spatial = 1  # PyTorch's rule: the positions per (sample, channel), whatever N and C
        for size in input.shape[2:]:
            spatial *= size
        if spatial == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input "
                             f"size {input.shape}")
    # The argument parser's type checks, after F.instance_norm's own (the spatial size above).
    if not torch.jit.is_scripting():
        if momentum is None:  # as torch.instance_norm's argument parser refuses it
            raise TypeError("instance_norm(): argument 'momentum' (position 7) must be float, "
                            "not NoneType")
    use_input_stats = _flag("instance_norm", "use_input_stats", use_input_stats)
    if use_input_stats and running_mean is None and running_var is None:
        # One channel a group; no channels is one group of none. PyTorch's instance_norm
        # returns the standard contiguous strides whatever the input's layout (it normalises a
        # contiguous view). So does the operator given the input contiguous (one copy of a
        # channels-last input, instead of the operator's copy of its result into channels-last
        # and another back); one channel stored channels-last counts as contiguous already but
        # keeps other strides, and its result is copied out.
        y = torch.ops.addnorm.group_norm(input.contiguous(), max(input.size(1), 1), weight, bias,
                                         eps)
        if list(y.stride()) != _contiguous_strides(y.size()):
            y = y.clone(memory_format=torch.contiguous_format)
        return y
    if use_input_stats:
        running_mean, running_var = _both_running_statistics(running_mean, running_var)
    n, c = input.size(0), input.size(1)
    shape: List[int] = [1, n * c] + list(input.shape[2:])
    # Each sample's running statistics at least in float32 (the op keeps 16-bit ones so), averaged
    # so below: a 16-bit buffer is rounded once, by the copy back.
    mean = _widened(running_mean).repeat(n) if running_mean is not None else None
    var = _widened(running_var).repeat(n) if running_var is not None else None
    # weight and bias repeated at least in float32 too, so that autograd sums each one's
    # per-sample gradients before it rounds them to a 16-bit parameter, once.
    # From a contiguous input, as PyTorch's instance_norm: its result has the standard strides
    # whatever the input's layout (a channels-last input of one sample would reshape to a view
    # that keeps its own, and the operator would keep them).
    y = torch.ops.addnorm.batch_norm(input.contiguous().reshape(shape),
                                     _widened(weight).repeat(n) if weight is not None else None,
                                     _widened(bias).repeat(n) if bias is not None else None,
                                     mean, var, use_input_stats, momentum, eps)
    if use_input_stats and running_mean is not None and mean is not None:
        running_mean.copy_(mean.view(n, c).mean(0))
    if use_input_stats and running_var is not None and var is not None:
        running_var.copy_(var.view(n, c).mean(0))
    return y.view(input.shape)


def _both_running_statistics(
        running_mean: Optional[torch.Tensor], running_var: Optional[torch.Tensor]
) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """Where only one running statistic is given to a call that updates them, PyTorch updates
    that one: the other becomes a scratch of its kind (the operators take both or neither)."""
    if running_mean is None and running_var is not None:
        return torch.zeros_like(running_var), running_var
    if running_var is None and running_mean is not None:
        return running_mean, torch.ones_like(running_mean)
    return running_mean, running_var


def _contiguous_strides(size: List[int]) -> List[int]:
    """The strides of a contiguous (row-major) tensor of size, each size-1 dimension's too."""
    strides: List[int] = []
    stride = 1
    for dim in range(len(size) - 1, -1, -1):
        strides.insert(0, stride)
        stride *= max(size[dim], 1)
    return strides


@_type_errors_as_pytorchs
def rms_norm(input: torch.Tensor, normalized_shape: List[int],
             weight: Optional[torch.Tensor] = None, eps: Optional[float] = None,
             zero_centered_weight: bool = False) -> torch.Tensor:
    """torch.nn.functional.rms_norm (PyTorch >= 2.4), computed by addnorm. eps=None means the
    machine epsilon of the input's compute type (float32's for 16-bit input), as in PyTorch."""
    return torch.ops.addnorm.rms_norm(input, _shape(normalized_shape), weight,
                                      eps,
                                      bool(zero_centered_weight))


def verify_batch_size(size: List[int]) -> None:
    """PyTorch's rule for batch statistics, raised as F.batch_norm raises it (ValueError, before
    anything is computed): one value per channel has no spread. size is the caller's input size;
    the count, N times the positions, is the same in every view the modules reshape it to.
    (Not while tracing, as group_norm; scriptable, for the modules that script.)"""
    if torch.jit.is_tracing():
        return
    values = size[0]
    for positions in size[2:]:
        values *= positions
    if values == 1:
        raise ValueError("Expected more than 1 value per channel when training, got input size "
                         "{}".format(size))


def _per_channel(parameter: Optional[torch.Tensor], channels: int) -> Optional[torch.Tensor]:
    """A BatchNorm weight or bias of any shape that holds `channels` values, as a vector (a view:
    its gradient takes the parameter's shape). Any other is passed on for the operator to refuse
    by its shape."""
    if parameter is not None and parameter.dim() != 1 and parameter.numel() == channels:
        return parameter.reshape(-1)
    return parameter


@_type_errors_as_pytorchs
def batch_norm(input: torch.Tensor, running_mean: Optional[torch.Tensor],
               running_var: Optional[torch.Tensor], weight: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> torch.Tensor:
    """torch.nn.functional.batch_norm, computed by addnorm; running statistics are updated in
    place in training, as PyTorch does. 16-bit input is read and written in its own dtype,
    computed in float32 with float64 statistics; running statistics are kept in float32.
    weight and bias may be of any shape that holds one value a channel, as in PyTorch."""
    if training:
        verify_batch_size(input.size())
    # The argument parser's type check, after F.batch_norm's own (the batch size above).
    training = _flag("batch_norm", "training", training)
    if input.dim() >= 2:
        weight = _per_channel(weight, input.size(1))
        bias = _per_channel(bias, input.size(1))
    if input.dim() < 2 and input.numel() == 0:
        # PyTorch returns an empty 1-D input as it is, before it looks for channels.
        return input.clone()
    if training:
        running_mean, running_var = _both_running_statistics(running_mean, running_var)
    # The operator keeps a channels-last input's layout in its result where PyTorch does,
    # reading and writing it in place as the (N * positions, C) matrix it is stored as.
    return torch.ops.addnorm.batch_norm(input, weight, bias, running_mean, running_var,
                                        training, momentum, eps)


@_type_errors_as_pytorchs
def dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
            seed: Optional[int] = None, offset: int = 0) -> torch.Tensor:
    """Dropout with addnorm's counter-based mask, F.dropout's arguments first: seed=None draws
    one from torch's generator; offset is where element 0 takes its bits in the seed's stream.
    As F.dropout: p outside [0, 1] is a ValueError (in eval mode too), p = 1 drops every element
    (input * 0, so a NaN stays NaN), and inplace=True writes the result into input and returns
    it."""
    _check_dropout_p(p)
    training = _flag("dropout", "training", training)
    if not training or p == 0:
        return input
    if p == 1:
        return input.mul_(0.0) if inplace else input * 0.0
    result = torch.ops.addnorm.dropout(input, p, fresh_seed() if seed is None else seed, offset)
    return input.copy_(result) if inplace else result


def _check_dropout_p(p: float) -> None:
    """F.dropout's rule and error, before the operators' own ([0, 1), RuntimeError): p = 1 is
    handled by the functions themselves, since a mask drawn at p = 1 would scale by 1 / 0."""
    if p < 0.0 or p > 1.0:
        raise ValueError("dropout probability has to be between 0 and 1, but got {}".format(p))


@_type_errors_as_pytorchs
def add_norm_pre(x: torch.Tensor, r: torch.Tensor, normalized_shape: List[int],
                 weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                 eps: Optional[float] = None, norm: str = "layer_norm",
                 zero_centered_weight: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """Pre-norm Add & Norm: returns (h, y) with h = x + r and y = Norm(h). eps=None is the
    plain function's default for the norm (layer_norm's 1e-5, rms_norm's machine epsilon of the compute type)."""
    return torch.ops.addnorm.add_norm_pre(x, r, _shape(normalized_shape), weight, bias,
                                          eps, norm, bool(zero_centered_weight))


@_type_errors_as_pytorchs
def add_norm_post(x: torch.Tensor, s: torch.Tensor, normalized_shape: List[int],
                  weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                  eps: Optional[float] = None, norm: str = "layer_norm",
                  zero_centered_weight: bool = False, p: float = 0.0, seed: Optional[int] = None,
                  offset: int = 0) -> torch.Tensor:
    """Post-norm Add & Norm: Norm(x + Dropout(s)). seed=None draws one from torch's generator
    when p > 0; the backward regenerates the same mask from it. 16-bit tensors run in the
    library's 16-bit post-norm: float32 inside, each output rounded once."""
    _check_dropout_p(p)
    if p == 1:  # every element of s dropped, as x + F.dropout(s, 1) (s * 0: NaN stays NaN)
        s, p = s * 0.0, 0.0
    if seed is None:
        seed = fresh_seed() if p > 0 else 0
    return torch.ops.addnorm.add_norm_post(x, s, _shape(normalized_shape), weight, bias,
                                           eps, norm, bool(zero_centered_weight),
                                           p, seed, offset)

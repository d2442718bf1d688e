"""Drop-in nn.Modules: LayerNorm and BatchNorm1d subclass torch.nn's own (same constructor,
parameters, buffers, state_dict keys, repr), RMSNorm mirrors torch.nn.RMSNorm (PyTorch >= 2.4),
and AddNorm is the fused residual add + norm (pre-norm or post-norm, with dropout).

Their forwards call addnorm.torch's functions, which TorchScript compiles to the operators
themselves, so the modules script (torch.jit.script), trace, save and export to ONNX, and an
input of the wrong Python type is the TypeError naming it that torch.nn's modules raise (the
functions' _type_errors_as_pytorchs). torch.fx keeps the drop-ins for torch.nn's modules whole,
as it keeps those (_TorchNnLeaf).
"""
import numbers

import torch

from . import _torch_functions as F


# Where an addnorm module made by addnorm.torch.patch keeps the module it replaced, for unpatch.
# Stored in the instance's __dict__, not as a submodule: it stays out of state_dict, parameters()
# and modules().
REPLACED = "_addnorm_replaced"


class _Replacement:
    """What a module that patch may swap in needs: patch hands it the replaced module's very hook
    tables, so that hooks follow the swap (and back). One flag is a plain value, not a table:
    which kind the backward hooks are (full or not), set by the first one registered. Registered
    on the replaced module while patched, it is set there, so it is read from there too."""

    def _get_backward_hooks(self):
        replaced = self.__dict__.get(REPLACED)
        if replaced is not None:
            theirs = replaced._is_full_backward_hook
            if self._is_full_backward_hook is None:
                object.__setattr__(self, "_is_full_backward_hook", theirs)
            elif theirs is not None and theirs != self._is_full_backward_hook:
                # as torch.nn.Module refuses the two kinds on one module
                raise RuntimeError("Cannot use both regular backward hooks and full backward "
                                   "hooks on a single Module. Please use only one of them.")
        return super()._get_backward_hooks()


class _TorchNnLeaf(_Replacement):
    """torch.fx keeps torch.nn's own modules whole, as call_module nodes whose forward runs at
    call time (so train() and eval() still switch a traced graph's BatchNorm), and tells them by
    their __module__. A drop-in answers that test as the module it replaces would: the instance's
    __module__ is the replaced torch.nn class's. The class's own (type(m).__module__, which
    pickling, repr and isinstance use) stays addnorm's."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # addnorm's own classes only: a user's subclass, with a forward of its own, is traced
        # into, as a user's subclass of torch.nn's module is.
        if type(self).__module__.startswith("addnorm."):
            replaced = next(base for base in type(self).__mro__
                            if base.__module__.startswith("torch.nn."))
            self.__dict__["__module__"] = replaced.__module__


class LayerNorm(_TorchNnLeaf, torch.nn.LayerNorm):
    """torch.nn.LayerNorm computed by addnorm; same arguments, parameters and state_dict."""

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class _BatchNorm:
    """The forward of addnorm's BatchNorm modules, over torch.nn's BatchNorm bookkeeping:
    momentum=None (cumulative average) and track_running_stats=False behave as in PyTorch."""

    def forward(self, input):
        """The op on input (N, C, *), with torch.nn's running-statistics bookkeeping. A
        channels-last input's result is stored channels-last, as torch.nn's modules return
        it (the operator decides, with no copy of either)."""
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or (self.running_mean is None and
                                            self.running_var is None)
        if use_batch_stats:
            # After the count, before the op, as torch.nn's module and F.batch_norm do it.
            F.verify_batch_size(input.size())
        keep_running = not self.training or self.track_running_stats
        return torch.ops.addnorm.batch_norm(input, self.weight, self.bias,
                                            self.running_mean if keep_running else None,
                                            self.running_var if keep_running else None,
                                            use_batch_stats, factor, self.eps)


class BatchNorm1d(_TorchNnLeaf, _BatchNorm, torch.nn.BatchNorm1d):
    """torch.nn.BatchNorm1d computed by addnorm: same arguments, parameters (weight, bias),
    buffers (running_mean, running_var, num_batches_tracked) and state_dict."""


class BatchNorm2d(_TorchNnLeaf, _BatchNorm, torch.nn.BatchNorm2d):
    """torch.nn.BatchNorm2d computed by addnorm, (N, C, H, W) input in either memory format
    (channels-last input gives a channels-last result, as torch's module does); as
    BatchNorm1d."""


class BatchNorm3d(_TorchNnLeaf, _BatchNorm, torch.nn.BatchNorm3d):
    """torch.nn.BatchNorm3d computed by addnorm, (N, C, D, H, W) input; as BatchNorm1d."""


class GroupNorm(_TorchNnLeaf, torch.nn.GroupNorm):
    """torch.nn.GroupNorm computed by addnorm; same arguments, parameters and state_dict."""

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)


class _InstanceNorm:
    """addnorm's instance norm under torch.nn's InstanceNorm modules, which keep their own
    argument checks and unbatched-input handling."""

    def _apply_instance_norm(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               self.momentum, self.eps)


class InstanceNorm1d(_TorchNnLeaf, _InstanceNorm, torch.nn.InstanceNorm1d):
    """torch.nn.InstanceNorm1d computed by addnorm."""


class InstanceNorm2d(_TorchNnLeaf, _InstanceNorm, torch.nn.InstanceNorm2d):
    """torch.nn.InstanceNorm2d computed by addnorm."""


class InstanceNorm3d(_TorchNnLeaf, _InstanceNorm, torch.nn.InstanceNorm3d):
    """torch.nn.InstanceNorm3d computed by addnorm."""


def _normalized_shape(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(d) for d in normalized_shape)


class RMSNorm(_Replacement, torch.nn.Module):
    """RMSNorm with torch.nn.RMSNorm's arguments and parameter (weight): y = x / sqrt(mean(x**2)
    + eps) * weight. eps=None means the machine epsilon of the input's compute type
    (float32's for 16-bit input), as in PyTorch.
    zero_centered_weight=True (an addnorm extra) scales by (1 + weight), weight starting at 0."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None, *, zero_centered_weight=False):
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.zero_centered_weight = zero_centered_weight
        if elementwise_affine:
            self.weight = torch.nn.Parameter(
                torch.empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            with torch.no_grad():
                self.weight.fill_(0.0 if self.zero_centered_weight else 1.0)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps,
                          self.zero_centered_weight)

    def extra_repr(self):
        extra = ", zero_centered_weight=True" if self.zero_centered_weight else ""
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}{extra}")


class AddNorm(torch.nn.Module):
    """The fused Add & Norm box.

    mode="post" (the 2017 paper): forward(x, s) = Norm(x + Dropout(s)), s the sub-layer output.
    mode="pre" (GPT-2): forward(x, r) = (h, y), h = x + Dropout(r) the new residual stream and
    y = Norm(h) the next sub-layer's input.
    norm="layer_norm" (parameters weight, bias: a torch.nn.LayerNorm's state_dict loads into it
    and back) or "rms_norm" (weight only). Dropout (p=dropout, active in training only) draws a
    fresh seed from torch's generator on every forward, so torch.manual_seed makes runs
    repeatable, and saves it for the backward, which regenerates the mask.

    dropout_offset (an attribute, default 0) is where in the seed's stream element 0 of the
    input takes its bits: a data-parallel rank holding rows [k, ...) of a global batch sets it
    to k * (elements per row) and then drops exactly what one process would on the whole batch.
    """

    def __init__(self, normalized_shape, mode="post", norm="layer_norm", dropout=0.1, eps=None,
                 elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if mode not in ("pre", "post"):
            raise ValueError(f"mode is {mode!r}, expected 'pre' or 'post'")
        if norm not in ("layer_norm", "rms_norm"):
            raise ValueError(f"norm is {norm!r}, expected 'layer_norm' or 'rms_norm'")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout is {dropout!r}, expected a probability in [0, 1)")
        self.normalized_shape = _normalized_shape(normalized_shape)
        self.mode, self.norm, self.dropout, self.eps = mode, norm, float(dropout), eps
        self.elementwise_affine = elementwise_affine
        self.dropout_offset = 0
        factory = {"device": device, "dtype": dtype}
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.ones(self.normalized_shape, **factory))
        else:
            self.register_parameter("weight", None)
        if elementwise_affine and norm == "layer_norm":
            self.bias = torch.nn.Parameter(torch.zeros(self.normalized_shape, **factory))
        else:
            self.register_parameter("bias", None)

    def __new__(cls, *args, **kwargs):
        # AddNorm(mode=...) builds the subclass for its mode, whose forward has one return type
        # (a tensor for post-norm, a pair for pre-norm), so that torch.jit.script can type it.
        if cls is AddNorm:
            mode = kwargs.get("mode", args[1] if len(args) > 1 else "post")
            cls = _PreNormAddNorm if mode == "pre" else _PostNormAddNorm
        return super().__new__(cls)

    def _get_name(self):
        return "AddNorm"

    def forward(self, x, sublayer_output):
        """Post-norm: Norm(x + Dropout(s)); pre-norm: (h, Norm(h)) with h = x + Dropout(r).
        Every AddNorm is one of the two subclasses below, which define it."""
        raise NotImplementedError("AddNorm is built as its mode's subclass; see AddNorm(mode=...)")

    def extra_repr(self):
        return (f"{self.normalized_shape}, mode={self.mode!r}, norm={self.norm!r}, "
                f"dropout={self.dropout}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class _PostNormAddNorm(AddNorm):
    """AddNorm(mode="post"): forward(x, s) = Norm(x + Dropout(s))."""

    def forward(self, x, sublayer_output):
        p = self.dropout if self.training else 0.0
        return F.add_norm_post(x, sublayer_output, self.normalized_shape, self.weight, self.bias,
                               self.eps, self.norm, False, p, None, self.dropout_offset)


class _PreNormAddNorm(AddNorm):
    """AddNorm(mode="pre"): forward(x, r) = (h, Norm(h)), h = x + Dropout(r)."""

    def forward(self, x, sublayer_output):
        p = self.dropout if self.training else 0.0
        r = F.dropout(sublayer_output, p, p > 0.0, False, None, self.dropout_offset)
        return F.add_norm_pre(x, r, self.normalized_shape, self.weight, self.bias, self.eps,
                              self.norm, False)

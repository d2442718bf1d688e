"""addnorm.torch.patch and unpatch: swap a model's norm layers for addnorm's and back, keeping
the very same parameter objects.

patch plans every swap before it makes one: each candidate's device and dtype are checked and
each RMSNorm-like module is probed, and the model is changed only when every check passes.
"""
import copy
import math
import warnings
from typing import NamedTuple, Optional

import torch

from . import _torch_modules as modules
from ._torch_dtypes import SUPPORTED_DTYPES, describe

_EPS_NAMES = ("eps", "variance_epsilon")
_REPLACED = modules.REPLACED
# The RMSNorm probe's input scales: a module that adds eps outside the root (x / (rms + eps)),
# or inside it with another eps, differs from addnorm's RMSNorm at the small scales; overflow
# and cancellation show at the large ones.
PROBE_SCALES = (1e-4, 1e-2, 1.0, 1e2, 1e4)


class _Swap(NamedTuple):
    """One planned replacement: parent.<name> (parent None for the model itself) is old, to
    become addnorm's module of this kind (see _kind)."""
    parent: Optional[torch.nn.Module]
    name: str
    path: str
    old: torch.nn.Module
    kind: str


# torch.nn.Module's per-module hook tables (PyTorch 1.13). patch hands the replacement the very
# same tables, so hooks registered on the replaced module run on its replacement, and hooks
# registered either side while it is patched stay after unpatch; their handles remove them
# from both.
_HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_state_dict_hooks",
                "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")


def _with_parameters(new, old):
    """new, holding old's very Parameter objects (optimizers that hold them keep working),
    buffers, child modules (an eager-quantization observer, which its hooks call), hooks and
    training mode."""
    for name, parameter in old.named_parameters(recurse=False):
        setattr(new, name, parameter)
    for name, buffer in old.named_buffers(recurse=False):
        setattr(new, name, buffer)
    for name in [name for name in new._modules if name not in old._modules]:
        delattr(new, name)  # removed while patched (quantization's convert drops its observer)
    for name, child in old.named_children():
        setattr(new, name, child)
    for table in _HOOK_TABLES:
        if hasattr(old, table):
            object.__setattr__(new, table, getattr(old, table))
    # Which kind the backward hooks are (full or not), decided by the first one registered on
    # either module (_Replacement reads the replaced module's while new's is unset).
    if getattr(old, "_is_full_backward_hook", None) is not None:
        object.__setattr__(new, "_is_full_backward_hook", old._is_full_backward_hook)
    return new.train(old.training)


def _reparametrized(module):
    """Why module's weight or bias is not simply its Parameter (pruning, weight_norm,
    spectral_norm or torch.nn.utils.parametrize compute it from others, which addnorm's module
    would not see), or None. A parametrized module is named whatever tensor parametrize computes
    (a running_var kept positive, say): its originals live in module.parametrizations, which
    addnorm's module would not copy."""
    if torch.nn.utils.parametrize.is_parametrized(module):
        names = list(module.parametrizations.keys())
        verb = "is" if len(names) == 1 else "are"
        return (f"its {', '.join(names)} {verb} computed by torch.nn.utils.parametrize, which "
                "addnorm's module would not see")
    for name in ("weight", "bias"):
        value = getattr(module, name, None)  # a tensor, or None, or a flag (bias=False)
        if isinstance(value, torch.Tensor) and module._parameters.get(name) is not value:
            return (f"its {name} is computed from other tensors (pruning, weight_norm, "
                    "spectral_norm or a parametrization), not a Parameter of its own")
    return None


def _rms_norm_like(module):
    """(weight, eps) when module looks like an RMSNorm (torch.nn.RMSNorm, or a class named
    *RMSNorm with a 1-D weight Parameter and a numeric eps or variance_epsilon), else None."""
    rms_type = getattr(torch.nn, "RMSNorm", None)
    if type(module) is not rms_type and not type(module).__name__.endswith("RMSNorm"):
        return None
    if isinstance(module, modules.RMSNorm):  # already addnorm's: a second patch keeps it
        return None
    weight = getattr(module, "weight", None)
    if not isinstance(weight, torch.nn.Parameter) or weight.dim() != 1:
        return None
    eps = next((getattr(module, name) for name in _EPS_NAMES if hasattr(module, name)), None)
    if eps is not None and (isinstance(eps, bool) or not isinstance(eps, (int, float))):
        return None
    return weight, eps


# torch.nn's module -> addnorm's, for the kinds that take the same constructor arguments.
_BATCH_NORMS = {torch.nn.BatchNorm1d: modules.BatchNorm1d, torch.nn.BatchNorm2d: modules.BatchNorm2d,
                torch.nn.BatchNorm3d: modules.BatchNorm3d}
_INSTANCE_NORMS = {torch.nn.InstanceNorm1d: modules.InstanceNorm1d,
                   torch.nn.InstanceNorm2d: modules.InstanceNorm2d,
                   torch.nn.InstanceNorm3d: modules.InstanceNorm3d}


def _own_class(module):
    """module's class, or for a parametrized module the class it had before: parametrize makes
    each a subclass of its own (ParametrizedLayerNorm), which patch must still see as torch's
    norm so that it can say why it leaves it alone (_reparametrized). Only a class parametrize
    made counts: a user's subclass that merely holds a `parametrizations` child stays itself."""
    cls = type(module)
    if (cls.__module__ == torch.nn.utils.parametrize.__name__
            and torch.nn.utils.parametrize.is_parametrized(module)):
        return cls.__bases__[0]
    return cls


def _kind(module, rms_norm, batch_norm):
    """Which addnorm module module would become: 'layer_norm', 'group_norm', 'instance_norm',
    'batch_norm', 'rms_norm' or None. Exact types only: a subclass of torch's module may compute
    something else."""
    own_class = _own_class(module)
    if own_class is torch.nn.LayerNorm:
        return "layer_norm"
    if own_class is torch.nn.GroupNorm:
        return "group_norm"
    if own_class in _INSTANCE_NORMS:
        return "instance_norm"
    if batch_norm and own_class in _BATCH_NORMS:
        return "batch_norm"
    if batch_norm and own_class is torch.nn.SyncBatchNorm:
        warnings.warn(f"{type(module).__name__} is left to PyTorch: addnorm does not synchronise "
                      "batch statistics across processes", stacklevel=4)
    if rms_norm and _rms_norm_like(module) is not None:
        return "rms_norm"
    return None


def _placement_problem(module):
    """Why addnorm's module could not run with module's tensors (device, dtype), or None."""
    tensors = list(module.parameters(recurse=False)) + list(module.buffers(recurse=False))
    devices = sorted({str(t.device) for t in tensors if t.device.type not in ("cpu", "meta")})
    if devices:
        return (f"is on device {', '.join(devices)}, expected cpu or meta (addnorm's kernels run "
                "on the CPU; a meta model is swapped before it is materialised)")
    dtypes = sorted({str(t.dtype) for t in tensors
                     if (t.is_floating_point() or t.is_complex())
                     and t.dtype not in SUPPORTED_DTYPES})
    if dtypes:
        return f"has dtype {', '.join(dtypes)}, expected {describe()}"
    return None


def _probe_scales(dtype):
    """PROBE_SCALES whose probe inputs (standard normal times the scale) the dtype holds."""
    return [s for s in PROBE_SCALES if 8 * s < torch.finfo(dtype).max]


def _probed_rms_norm(old, weight, eps):
    """(addnorm's RMSNorm computing what old computes, None) or (None, why not).

    The probe runs old and addnorm's RMSNorm (plain weight, then zero-centred 1 + weight) on
    the same random rows at every scale of PROBE_SCALES, in the module's own dtype and with its
    own weight; a candidate must agree at every scale to within a few units of the dtype's
    epsilon (relative to the largest output).
    """
    dtype = weight.dtype
    module_weight = weight
    if weight.is_meta:
        # A meta module has no values to run: its twin on the CPU computes what it would, with
        # every floating-point parameter and buffer drawn (seeded; to_empty's memory is
        # arbitrary), the weight near 1: state an RMSNorm lacks (a bias, a gain) then shows in
        # the probe as it would on the CPU.
        old = copy.deepcopy(old).to_empty(device="cpu")
        generator = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for tensor in list(old.parameters()) + list(old.buffers()):
                if tensor.is_floating_point():
                    tensor.copy_(torch.randn(tensor.shape, generator=generator,
                                             dtype=torch.float64))
            old.weight.mul_(0.2).add_(1)
        weight = old.weight
    tolerance = max(1e-4, 4 * torch.finfo(dtype).eps)
    rows = torch.randn(4, weight.shape[0], generator=torch.Generator().manual_seed(0),
                       dtype=torch.float64)
    probes = [(scale, (rows * scale).to(dtype)) for scale in _probe_scales(dtype)]
    with torch.no_grad():
        try:
            # forward, not __call__: the probe must not run hooks registered on old
            expected = [old.forward(probe) for _, probe in probes]
        except Exception as error:  # noqa: BLE001 - any failure means "not a plain RMSNorm"
            return None, f"it raised {type(error).__name__} on a probe input of shape (4, D)"
        disagreements = []
        for zero_centered in (False, True):
            new = modules.RMSNorm(weight.shape, eps, zero_centered_weight=zero_centered,
                                  dtype=dtype)
            new.weight = weight
            differences = [(scale, _relative_difference(new(probe), wanted))
                           for (scale, probe), wanted in zip(probes, expected)]
            failed = [(scale, d) for scale, d in differences if not d <= tolerance]
            if not failed:
                new.weight = module_weight
                return new.train(old.training), None
            disagreements.append(failed[0])
    scale, difference = disagreements[0]
    return None, (f"its output differs from addnorm's RMSNorm (relative difference "
                  f"{difference:.2g} at input scale {scale:g}, tolerance {tolerance:.1g}; "
                  "zero-centred weight differs too)")


def _relative_difference(actual, expected):
    """max |actual - expected| / max |expected| in float64; inf when shapes or finiteness differ."""
    if not isinstance(expected, torch.Tensor) or actual.shape != expected.shape:
        return math.inf
    actual, expected = actual.double(), expected.double()
    if not torch.equal(torch.isfinite(actual), torch.isfinite(expected)):
        return math.inf
    finite = torch.isfinite(expected)
    scale = expected[finite].abs().max().item() if finite.any() else 0.0
    error = (actual[finite] - expected[finite]).abs().max().item() if finite.any() else 0.0
    return error / scale if scale > 0 else error


def _replacement(old, kind):
    """(addnorm's module for old, None) or (None, why old is left alone)."""
    why_not = _reparametrized(old)
    if why_not is not None:
        return None, why_not
    if kind == "layer_norm":
        new = modules.LayerNorm(old.normalized_shape, old.eps, old.elementwise_affine)
    elif kind == "group_norm":
        new = modules.GroupNorm(old.num_groups, old.num_channels, old.eps, old.affine)
    elif kind in ("batch_norm", "instance_norm"):
        cls = (_BATCH_NORMS if kind == "batch_norm" else _INSTANCE_NORMS)[_own_class(old)]
        new = cls(old.num_features, old.eps, old.momentum, old.affine, old.track_running_stats)
    else:
        new, why_not = _probed_rms_norm(old, *_rms_norm_like(old))
        if new is None:
            return None, why_not
    return _with_parameters(new, old), None


def _candidates(model, rms_norm, batch_norm):
    """Every place in model holding a module patch would swap, as _Swap, in the order of
    model.named_modules() (a module registered under two parents appears twice)."""
    own = _kind(model, rms_norm, batch_norm)
    if own is not None:
        return [_Swap(None, "", "model", model, own)]
    found = []

    def visit(parent, prefix):
        # Every name, not named_children's first one per module: a norm registered twice in one
        # parent (m.norm and m.alias, or a Sequential that reuses a layer) is swapped under each,
        # for one replacement (patch's memo), so the two names stay one module.
        for name, child in _children(parent):
            kind = _kind(child, rms_norm, batch_norm)
            if kind is not None:
                found.append(_Swap(parent, name, prefix + name, child, kind))
            else:
                visit(child, f"{prefix}{name}.")

    visit(model, "")
    return found


def _children(parent):
    """(name, child) for every registered name of parent, a module under two names twice."""
    return [(name, child) for name, child in parent._modules.items() if child is not None]


def _label(swap):
    """'encoder.layers.0.norm1' (LayerNorm): the module's name in model.named_modules()."""
    return f"{swap.path!r} ({type(swap.old).__name__})"


def fast_path_layers(model, norms):
    """The paths of model's nn.TransformerEncoderLayers whose norm1 or norm2 is in norms and
    whose forward can take PyTorch's fused inference path, which computes both LayerNorms itself
    (torch._transformer_encoder_layer_fwd) and never calls the norm modules.

    These are the conditions of torch 1.13's TransformerEncoderLayer.forward that depend on the
    layer alone: its forward is torch's, self_attn.batch_first, self_attn._qkv_same_embed_dim,
    activation relu or gelu, norm1.eps == norm2.eps and an even number of heads. The others
    depend on the call (see patch).
    """
    fastpath_enabled = getattr(getattr(torch.backends, "mha", None), "get_fastpath_enabled",
                               lambda: True)
    if not fastpath_enabled():
        return []
    ids = {id(norm) for norm in norms}
    layers = []
    for path, layer in model.named_modules():
        if not isinstance(layer, torch.nn.TransformerEncoderLayer):
            continue
        attention = layer.self_attn
        if (type(layer).forward is torch.nn.TransformerEncoderLayer.forward
                and (id(layer.norm1) in ids or id(layer.norm2) in ids)
                and attention.batch_first and attention._qkv_same_embed_dim
                and getattr(layer, "activation_relu_or_gelu", 0)
                and layer.norm1.eps == layer.norm2.eps and attention.num_heads % 2 == 0):
            layers.append(path or "model")
    return layers


def _warn_fast_path(layers):
    warnings.warn(
        "addnorm.torch.patch: PyTorch's TransformerEncoderLayer inference fast path bypasses "
        f"addnorm's LayerNorms in {', '.join(layers)}. When such a layer runs in eval mode with "
        "autograd off (under torch.no_grad() or torch.inference_mode(), or with no parameter "
        "requiring grad), on a batched 3-D input, without src_mask and outside autocast, "
        "PyTorch calls torch._transformer_encoder_layer_fwd, which computes norm1 and norm2 "
        "itself from their weight, bias and eps. Training mode, autograd on with trainable "
        "parameters, or a src_mask keep addnorm's norms in use.", stacklevel=3)


def patch(model, rms_norm=True, batch_norm=False):
    """Swap, in place, every torch.nn.LayerNorm, GroupNorm and InstanceNorm1d/2d/3d in model
    (and every RMSNorm-like module when rms_norm=True, every torch.nn.BatchNorm1d, BatchNorm2d
    and BatchNorm3d when batch_norm=True; a SyncBatchNorm is left to PyTorch with a warning) for
    addnorm's module, keeping the very same parameters and buffers. Returns the model (or its
    replacement, when model itself is such a layer). unpatch(model) undoes it.

    All or nothing: every candidate is checked before anything changes. A candidate on another
    device than the CPU or meta (a model built on meta is patched before it is materialised:
    its RMSNorm-like modules are probed through a CPU copy with a random weight), or with a
    dtype addnorm.torch does not compute in (see
    addnorm._torch_dtypes.SUPPORTED_DTYPES), raises TypeError naming every such module, and the
    model is left as it was.

    RMSNorm-like means torch.nn.RMSNorm or a class whose name ends in "RMSNorm" with a 1-D
    weight and an eps (or variance_epsilon) attribute. Such a module is swapped only when its
    output matches addnorm's RMSNorm (plain weight, or zero-centred 1 + weight) on probe rows
    at every input scale from 1e-4 to 1e4, in its own dtype; otherwise it is left alone and a
    warning says why.

    A UserWarning names the nn.TransformerEncoderLayers whose patched norms PyTorch's fused
    inference path would bypass (eval mode, autograd off, no src_mask: see fast_path_layers).

    Hooks registered on a replaced module (forward, forward pre-, backward, state_dict) run on
    its replacement: the two share the hook tables, so a hook registered on either while
    patched stays after unpatch, and its handle removes it. Its child modules (an eager
    quantization observer) move with it. A load_state_dict pre-hook registered with
    with_module=True is still handed the replaced module (PyTorch binds it at registration).
    A module whose weight or bias is computed in a hook (pruning, weight_norm, spectral_norm,
    parametrizations) is left alone, with a warning.

    >>> import torch, addnorm.torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    >>> model = addnorm.torch.patch(model)
    >>> type(model[1]).__module__, type(model[1]).__name__
    ('addnorm._torch_modules', 'LayerNorm')
    """
    swaps = _candidates(model, rms_norm, batch_norm)
    # A module patch leaves alone anyway (_reparametrized) may sit anywhere.
    problems = [f"{_label(s)} {why}" for s in swaps
                if not _reparametrized(s.old) and (why := _placement_problem(s.old))]
    if problems:
        raise TypeError(f"patch changed nothing: {len(problems)} module(s) cannot run on "
                        f"addnorm: {'; '.join(problems)}")
    replacements, left_alone = {}, []
    for swap in swaps:
        if id(swap.old) not in replacements:
            new, why_not = _replacement(swap.old, swap.kind)
            replacements[id(swap.old)] = new
            if new is None:
                left_alone.append(f"{_label(swap)}: {why_not}")
    if left_alone:
        warnings.warn("addnorm.torch.patch left these modules alone: " + "; ".join(left_alone),
                      stacklevel=2)
    swapped = [s for s in swaps if replacements[id(s.old)] is not None]
    layers = fast_path_layers(model, [s.old for s in swapped])
    if layers:
        _warn_fast_path(layers)
    for swap in swapped:
        new = replacements[id(swap.old)]
        new.__dict__[_REPLACED] = swap.old
        if swap.parent is None:
            return new
        setattr(swap.parent, swap.name, new)
    return model


def _restored(module):
    """The module patch replaced with module, holding module's current parameters and buffers
    (the same objects), training mode and settings (eps, momentum, ... as set on module while
    patched); None for a module patch did not make."""
    original = module.__dict__.get(_REPLACED)
    if original is None:
        return None
    # A setting of the same name and type only: an RMSNorm-like class of the model's own may keep
    # normalized_shape as an int where addnorm's keeps a tuple, or mean something else by it.
    for name in _settings(original):
        if name in module.__dict__ and type(module.__dict__[name]) is type(original.__dict__[name]):
            original.__dict__[name] = module.__dict__[name]
    # An RMSNorm-like class of the model's own may call its eps by another name.
    eps_name = next((name for name in _EPS_NAMES if name in original.__dict__), None)
    if eps_name not in (None, "eps") and "eps" in module.__dict__:
        original.__dict__[eps_name] = module.eps
    return _with_parameters(original, module)


def _settings(module):
    """The names of module's plain settings: public attributes of its own that are not
    parameters, buffers, child modules or its training flag (eps, momentum, affine, ...)."""
    return [name for name, value in module.__dict__.items()
            if not name.startswith("_") and name != "training"
            and not isinstance(value, (torch.Tensor, torch.nn.Module))]


def unpatch(model):
    """Undo patch: every addnorm module patch swapped in goes back to the module it replaced
    (torch's LayerNorm, GroupNorm, InstanceNorm1d/2d/3d, BatchNorm1d/2d/3d, or the model's own
    RMSNorm class), holding the addnorm
    module's current parameter objects and buffers, so state_dict, outputs and optimizers carry
    on. Returns the model (or the restored module, when model itself was swapped). Modules made
    directly (addnorm.torch.LayerNorm(...)) are left as they are.

    >>> import torch, addnorm.torch
    >>> model = addnorm.torch.patch(torch.nn.Sequential(torch.nn.LayerNorm(4)))
    >>> type(addnorm.torch.unpatch(model)[0]) is torch.nn.LayerNorm
    True
    """
    # Innermost first: a replacement's children move to the module it replaced, so a patched
    # module inside another (a second patch reaches into the first's children) is restored
    # where it now lives before its parent moves it.
    for parent in reversed(list(model.modules())):
        for name, child in _children(parent):
            original = _restored(child)
            if original is not None:
                setattr(parent, name, original)
    own = _restored(model)
    if own is not None:
        return own
    return model

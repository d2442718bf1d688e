"""addnorm.torch.patch: swap a model's norm layers for addnorm's, keeping their parameters."""
import torch

from . import _torch_modules as modules

_EPS_NAMES = ("eps", "variance_epsilon")


def _with_parameters(new, old):
    """new, holding old's very Parameter objects (optimizers that hold them keep working),
    buffers, device, dtype and training mode."""
    for name, parameter in old.named_parameters(recurse=False):
        setattr(new, name, parameter)
    for name, buffer in old.named_buffers(recurse=False):
        setattr(new, name, buffer)
    return new.train(old.training)


def _layer_norm(old):
    new = modules.LayerNorm(old.normalized_shape, old.eps, old.elementwise_affine)
    return _with_parameters(new, old)


def _batch_norm(old):
    new = modules.BatchNorm1d(old.num_features, old.eps, old.momentum, old.affine,
                              old.track_running_stats)
    return _with_parameters(new, old)


def _rms_norm(old):
    """addnorm's RMSNorm for a module that looks like an RMSNorm (torch.nn.RMSNorm, or a class
    named *RMSNorm with a 1-D weight and an eps), if it computes what addnorm's would: a probe
    input goes through both, plain and zero-centred (Gemma-style 1 + weight), and the module is
    swapped only when one agrees. Returns None for a module left alone."""
    rms_type = getattr(torch.nn, "RMSNorm", None)
    named_like = type(old).__name__.endswith("RMSNorm")
    if not (rms_type is not None and type(old) is rms_type) and not named_like:
        return None
    weight = getattr(old, "weight", None)
    eps = next((getattr(old, name) for name in _EPS_NAMES if hasattr(old, name)), None)
    if not isinstance(weight, torch.nn.Parameter) or weight.dim() != 1:
        return None
    if eps is not None and not isinstance(eps, (int, float)):
        return None
    generator = torch.Generator().manual_seed(0)
    probe = torch.randn(3, weight.shape[0], generator=generator).to(weight.dtype)
    with torch.no_grad():
        expected = old(probe)
        for zero_centered in (False, True):
            new = modules.RMSNorm(weight.shape, eps, zero_centered_weight=zero_centered,
                                  dtype=weight.dtype)
            new.weight = weight
            if torch.allclose(new(probe), expected, rtol=1e-4, atol=1e-5):
                return new.train(old.training)
    return None


def _replacement(module, rms_norm, batch_norm):
    if type(module) is torch.nn.LayerNorm:
        return _layer_norm(module)
    if batch_norm and type(module) is torch.nn.BatchNorm1d:
        return _batch_norm(module)
    if rms_norm:
        return _rms_norm(module)
    return None


def patch(model, rms_norm=True, batch_norm=False):
    """Swap, in place, every torch.nn.LayerNorm in model (and every RMSNorm-like module when
    rms_norm=True, every torch.nn.BatchNorm1d when batch_norm=True) for addnorm's module,
    keeping the very same parameters and buffers. Returns the model (or its replacement, when
    model itself is such a layer).

    RMSNorm-like means torch.nn.RMSNorm or a class whose name ends in "RMSNorm" with a 1-D
    weight and an eps (or variance_epsilon) attribute, whose output on a probe input matches
    addnorm's RMSNorm (plain or zero-centred weight); anything else is left alone.

    >>> import torch, addnorm.torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    >>> model = addnorm.torch.patch(model)
    >>> type(model[1]).__module__, type(model[1]).__name__
    ('addnorm._torch_modules', 'LayerNorm')
    """
    own = _replacement(model, rms_norm, batch_norm)
    if own is not None:
        return own
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            new = _replacement(child, rms_norm, batch_norm)
            if new is not None:
                setattr(parent, name, new)
    return model

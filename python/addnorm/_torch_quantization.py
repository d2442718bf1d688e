"""Eager-mode quantization for addnorm's BatchNorm modules. The fuser
(torch.ao.quantization.fuse_modules and fuse_modules_qat): every fusion PyTorch lists for a
torch.nn.BatchNorm1d/2d/3d
(conv + bn, conv + bn + relu, linear + bn, bn + relu, conv-transpose + bn) is listed for
addnorm's module of the same rank too, so a model patched with batch_norm=True fuses as the
unpatched one does. Torch's own fuser method then runs on a torch.nn twin of addnorm's module
holding the very same parameters and buffers: the fused modules (a folded convolution,
ConvBn2d, BNReLU2d, ...) are PyTorch's own, as they would be without addnorm, and they assert
torch.nn's BatchNorm classes by type. Static quantization's module mapping
(prepare and convert): a BatchNorm2d/3d left unfused becomes PyTorch's quantized BatchNorm, as
torch.nn's does.

FX graph mode (torch.ao.quantization.quantize_fx) is not covered: its backend configuration
matches modules by exact class and is built anew on every call, so prepare_fx leaves a patched
BatchNorm in float (docs/torch.md: unpatch first).
"""
import torch
from torch.ao.quantization import fuser_method_mappings, quantization_mappings

from . import _torch_modules as modules

_OURS = {
    torch.nn.BatchNorm1d: modules.BatchNorm1d,
    torch.nn.BatchNorm2d: modules.BatchNorm2d,
    torch.nn.BatchNorm3d: modules.BatchNorm3d,
}


def _torch_twin(module):
    """For one of addnorm's BatchNorm modules, torch.nn's module of its rank holding the same
    Parameter and buffer objects, in the same training mode; any other module as it is."""
    if not isinstance(module, modules._BatchNorm):
        return module
    cls = next(base for base in type(module).__mro__ if base in _OURS)
    twin = cls(module.num_features, module.eps, module.momentum, module.affine,
               module.track_running_stats)
    for name, parameter in module.named_parameters(recurse=False):
        setattr(twin, name, parameter)
    for name, buffer in module.named_buffers(recurse=False):
        setattr(twin, name, buffer)
    return twin.train(module.training)


def _on_torch_twins(fuser_method):
    """fuser_method(is_qat, *modules), called with addnorm's BatchNorm modules as their twins."""
    def fuse(is_qat, *mods):
        return fuser_method(is_qat, *(_torch_twin(m) for m in mods))
    fuse.__name__ = getattr(fuser_method, "__name__", "fuse")
    return fuse


def register():
    """Adds addnorm's entries to PyTorch's default fuser table and static-quantization module
    mapping (idempotent: an entry already there is kept)."""
    table = fuser_method_mappings.DEFAULT_OP_LIST_TO_FUSER_METHOD
    for op_list, fuser_method in list(table.items()):
        if any(op in _OURS for op in op_list):
            ours = tuple(_OURS.get(op, op) for op in op_list)
            table.setdefault(ours, _on_torch_twins(fuser_method))
    mapping = quantization_mappings.DEFAULT_STATIC_QUANT_MODULE_MAPPINGS
    for theirs, ours in _OURS.items():
        if theirs in mapping:
            mapping.setdefault(ours, mapping[theirs])

"""addnorm for PyTorch: operators registered with PyTorch's dispatcher (torch.ops.addnorm.*),
differentiable functions over them, drop-in nn.Modules and patch().

    import addnorm.torch
    model = addnorm.torch.patch(model)       # every nn.LayerNorm (and RMSNorm) -> addnorm's
    model = addnorm.torch.unpatch(model)     # and back to torch's, same parameter objects

Importing this module loads the operators (the C++ extension _addnorm_torch_ops.so, built
against libtorch): torch.ops.addnorm.layer_norm, rms_norm, add_norm_pre, add_norm_post,
batch_norm, dropout, and the *_backward of each norm. They run on CPU tensors of float32,
bfloat16, float16 and float64, with autograd of every order, forward-mode AD and functorch's
transforms (grad, vmap, jacrev, jacfwd), CPU autocast (PyTorch's policy: each norm in its
input's dtype, float32 parameters accepted beside bfloat16 activations), torch.jit.script/trace/save/load and torch.onnx.export (standard ONNX ops).

Modules: LayerNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d/2d/3d
(subclasses of torch.nn's, so the same constructor arguments, parameters, buffers and
state_dict keys), RMSNorm (torch.nn.RMSNorm's interface), AddNorm (fused residual add + norm,
pre-norm or post-norm, with dropout). Functions: layer_norm, rms_norm, batch_norm, group_norm,
instance_norm, dropout, add_norm_pre, add_norm_post (differentiable, torch.nn.functional's
arguments). diagnose(model, batch): the lab's Add & Norm measurements on any PyTorch model
(docs/diagnose.md). Eager quantization fuses and quantizes addnorm's BatchNorm modules as it does
torch.nn's (registered on import: _torch_quantization).
"""
from ._torch_functions import (add_norm_post, add_norm_pre, batch_norm, dropout, group_norm,
                               instance_norm, layer_norm, rms_norm)
from ._torch_modules import (AddNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm,
                             InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LayerNorm, RMSNorm)
from ._torch_patch import patch, unpatch
from ._torch_quantization import register as _register_quantization
from ._diagnose import diagnose, diagnose_pairs
from ._diagnose_report import Diagnosis

_register_quantization()

__all__ = [
    "AddNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "Diagnosis", "GroupNorm",
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LayerNorm", "RMSNorm", "add_norm_post",
    "add_norm_pre",
    "batch_norm", "diagnose", "diagnose_pairs", "dropout", "group_norm", "instance_norm",
    "layer_norm", "patch", "rms_norm", "unpatch",
]

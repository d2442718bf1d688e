"""Modules on a device addnorm does not run on, without that device: PyTorch here is CPU-only,
so a CUDA tensor cannot be made, but a wrapper subclass can say it is one. Its data cannot be
read (every op but detach raises), which is all patch's device check needs to see."""
import torch


class CudaStandIn(torch.Tensor):
    """A tensor that reports device cuda and has no data."""

    @staticmethod
    def __new__(cls, size, dtype):
        return torch.Tensor._make_wrapper_subclass(cls, size, device="cuda", dtype=dtype)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func.overloadpacket in (torch.ops.aten.detach, torch.ops.aten.alias):
            return CudaStandIn(args[0].shape, args[0].dtype)
        raise RuntimeError(f"{func} called on a stand-in for a CUDA tensor")


def on_cuda(module):
    """module with every parameter and buffer of its own replaced by a CUDA stand-in."""
    for name, parameter in list(module.named_parameters(recurse=False)):
        setattr(module, name, torch.nn.Parameter(CudaStandIn(parameter.shape, parameter.dtype),
                                                 parameter.requires_grad))
    for name, buffer in list(module.named_buffers(recurse=False)):
        module._buffers[name] = CudaStandIn(buffer.shape, buffer.dtype)
    return module

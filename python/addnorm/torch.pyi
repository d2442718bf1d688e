# Type stubs for addnorm.torch: the differentiable functions, the drop-in modules, patch and
# unpatch. Tensors are CPU tensors of a dtype in addnorm._torch_dtypes.SUPPORTED_DTYPES.
from typing import Any, Callable, Literal, Sequence

import torch
from torch import Tensor

Shape = int | Sequence[int]
Norm = Literal["layer_norm", "rms_norm"]


def layer_norm(input: Tensor, normalized_shape: Shape, weight: Tensor | None = ...,
               bias: Tensor | None = ..., eps: float = ...) -> Tensor: ...
def rms_norm(input: Tensor, normalized_shape: Shape, weight: Tensor | None = ...,
             eps: float | None = ..., zero_centered_weight: bool = ...) -> Tensor: ...
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = ..., bias: Tensor | None = ..., training: bool = ...,
               momentum: float = ..., eps: float = ...) -> Tensor: ...
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = ...,
               bias: Tensor | None = ..., eps: float = ...) -> Tensor: ...
def instance_norm(input: Tensor, running_mean: Tensor | None = ...,
                  running_var: Tensor | None = ..., weight: Tensor | None = ...,
                  bias: Tensor | None = ..., use_input_stats: bool = ..., momentum: float = ...,
                  eps: float = ...) -> Tensor: ...
def dropout(input: Tensor, p: float = ..., training: bool = ..., inplace: bool = ...,
            seed: int | None = ..., offset: int = ...) -> Tensor: ...
def add_norm_pre(x: Tensor, r: Tensor, normalized_shape: Shape, weight: Tensor | None = ...,
                 bias: Tensor | None = ..., eps: float | None = ..., norm: Norm = ...,
                 zero_centered_weight: bool = ...) -> tuple[Tensor, Tensor]: ...
def add_norm_post(x: Tensor, s: Tensor, normalized_shape: Shape, weight: Tensor | None = ...,
                  bias: Tensor | None = ..., eps: float | None = ..., norm: Norm = ...,
                  zero_centered_weight: bool = ..., p: float = ..., seed: int | None = ...,
                  offset: int = ...) -> Tensor: ...

class LayerNorm(torch.nn.LayerNorm):
    def forward(self, input: Tensor) -> Tensor: ...

class BatchNorm1d(torch.nn.BatchNorm1d):
    def forward(self, input: Tensor) -> Tensor: ...

class BatchNorm2d(torch.nn.BatchNorm2d):
    def forward(self, input: Tensor) -> Tensor: ...

class BatchNorm3d(torch.nn.BatchNorm3d):
    def forward(self, input: Tensor) -> Tensor: ...

class GroupNorm(torch.nn.GroupNorm):
    def forward(self, input: Tensor) -> Tensor: ...

class InstanceNorm1d(torch.nn.InstanceNorm1d): ...

class InstanceNorm2d(torch.nn.InstanceNorm2d): ...

class InstanceNorm3d(torch.nn.InstanceNorm3d): ...

class RMSNorm(torch.nn.Module):
    normalized_shape: tuple[int, ...]
    eps: float | None
    elementwise_affine: bool
    zero_centered_weight: bool
    weight: torch.nn.Parameter | None
    def __init__(self, normalized_shape: Shape, eps: float | None = ...,
                 elementwise_affine: bool = ..., device: torch.device | str | None = ...,
                 dtype: torch.dtype | None = ..., *, zero_centered_weight: bool = ...) -> None: ...
    def reset_parameters(self) -> None: ...
    def forward(self, input: Tensor) -> Tensor: ...

class AddNorm(torch.nn.Module):
    normalized_shape: tuple[int, ...]
    mode: Literal["pre", "post"]
    norm: Norm
    dropout: float
    eps: float | None
    elementwise_affine: bool
    dropout_offset: int
    weight: torch.nn.Parameter | None
    bias: torch.nn.Parameter | None
    def __init__(self, normalized_shape: Shape, mode: Literal["pre", "post"] = ...,
                 norm: Norm = ..., dropout: float = ..., eps: float | None = ...,
                 elementwise_affine: bool = ..., device: torch.device | str | None = ...,
                 dtype: torch.dtype | None = ...) -> None: ...
    def forward(self, x: Tensor, sublayer_output: Tensor) -> Tensor | tuple[Tensor, Tensor]: ...

def patch(model: torch.nn.Module, rms_norm: bool = ...,
          batch_norm: bool = ...) -> torch.nn.Module: ...
def unpatch(model: torch.nn.Module) -> torch.nn.Module: ...


class Diagnosis:
    structure: dict[str, Any]
    settings: dict[str, Any]
    runs: list[dict[str, Any]]
    depth: int
    placement: str
    summary: dict[str, dict[str, float]]
    blocks: list[dict[str, Any]]
    reference: dict[str, Any] | None
    verdicts: list[str]
    def table(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...
    def plot(self, path: str) -> str: ...

def diagnose(model: torch.nn.Module | Sequence[torch.nn.Module], batch: Any,
             loss_fn: Callable[[Any, Any], Tensor] | None = ..., *,
             batches: Sequence[Any] | None = ...,
             blocks: str | Sequence[str] | None = ...,
             optimizer: type[torch.optim.Optimizer] | Callable[..., torch.optim.Optimizer]
             | None = ...,
             lr: float = ..., seed: int = ...) -> Diagnosis: ...
def diagnose_pairs(pairs: Sequence[tuple[torch.nn.Module, Sequence[Any]]],
                   loss_fn: Callable[[Any, Any], Tensor] | None = ..., *,
                   blocks: str | Sequence[str] | None = ...,
                   optimizer: type[torch.optim.Optimizer]
                   | Callable[..., torch.optim.Optimizer] | None = ...,
                   lr: float = ..., seed: int = ...) -> Diagnosis: ...

# Type stubs for addnorm's NumPy API (python/addnorm/__init__.py and the modules it re-exports).
# Arrays are float32 or float64 ndarrays; every array of one call has x's dtype.
from typing import Any, Literal, Sequence, overload

import numpy as np
import numpy.typing as npt

__version__: str

Array = npt.NDArray[np.floating[Any]]
Shape = int | Sequence[int]
Norm = Literal["layer_norm", "rms_norm"]

def simd_target() -> str: ...
def simd_targets() -> list[str]: ...

@overload
def layer_norm(x: Array, normalized_shape: Shape, weight: Array | None = ...,
               bias: Array | None = ..., eps: float | None = ...,
               return_stats: Literal[False] = ...) -> Array: ...
@overload
def layer_norm(x: Array, normalized_shape: Shape, weight: Array | None = ...,
               bias: Array | None = ..., eps: float | None = ..., *,
               return_stats: Literal[True]) -> tuple[Array, Array, Array]: ...
def layer_norm_backward(dy: Array, x: Array, normalized_shape: Shape, weight: Array | None = ...,
                        bias: Array | None = ..., eps: float | None = ...
                        ) -> tuple[Array, Array | None, Array | None]: ...

@overload
def rms_norm(x: Array, normalized_shape: Shape, weight: Array | None = ..., eps: float | None = ...,
             zero_centered_weight: bool = ..., return_stats: Literal[False] = ...) -> Array: ...
@overload
def rms_norm(x: Array, normalized_shape: Shape, weight: Array | None = ..., eps: float | None = ...,
             zero_centered_weight: bool = ..., *,
             return_stats: Literal[True]) -> tuple[Array, Array]: ...
def rms_norm_backward(dy: Array, x: Array, normalized_shape: Shape, weight: Array | None = ...,
                      eps: float | None = ..., zero_centered_weight: bool = ...
                      ) -> tuple[Array, Array | None]: ...

@overload
def batch_norm(x: Array, running_mean: Array | None, running_var: Array | None,
               weight: Array | None = ..., bias: Array | None = ..., training: bool = ...,
               momentum: float = ..., eps: float | None = ...,
               convention: Literal["pytorch", "onnx"] = ...,
               return_stats: Literal[False] = ...) -> Array: ...
@overload
def batch_norm(x: Array, running_mean: Array | None, running_var: Array | None,
               weight: Array | None = ..., bias: Array | None = ..., training: bool = ...,
               momentum: float = ..., eps: float | None = ...,
               convention: Literal["pytorch", "onnx"] = ..., *,
               return_stats: Literal[True]) -> tuple[Array, Array, Array]: ...
def batch_norm_backward(dy: Array, x: Array, running_mean: Array | None,
                        running_var: Array | None, weight: Array | None = ...,
                        bias: Array | None = ..., training: bool = ..., eps: float | None = ...
                        ) -> tuple[Array, Array | None, Array | None]: ...

@overload
def group_norm(x: Array, num_groups: int, weight: Array | None = ..., bias: Array | None = ...,
               eps: float | None = ..., return_stats: Literal[False] = ...) -> Array: ...
@overload
def group_norm(x: Array, num_groups: int, weight: Array | None = ..., bias: Array | None = ...,
               eps: float | None = ..., *, return_stats: Literal[True]) -> tuple[Array, Array, Array]: ...
def group_norm_backward(dy: Array, x: Array, num_groups: int, weight: Array | None = ...,
                        bias: Array | None = ..., eps: float | None = ...
                        ) -> tuple[Array, Array | None, Array | None]: ...
def instance_norm(x: Array, weight: Array | None = ..., bias: Array | None = ...,
                  eps: float | None = ...) -> Array: ...

def add(x: Array, r: Array) -> Array: ...
def dropout(x: Array, p: float = ..., seed: int = ..., offset: int = ...) -> Array: ...
def dropout_backward(dy: Array, p: float = ..., seed: int = ..., offset: int = ...) -> Array: ...
def dropout_mask(shape: Shape, p: float = ..., seed: int = ...,
                 offset: int = ...) -> npt.NDArray[np.bool_]: ...

@overload
def add_norm_pre(x: Array, r: Array, normalized_shape: Shape, weight: Array | None = ...,
                 bias: Array | None = ..., eps: float | None = ..., norm: Norm = ...,
                 zero_centered_weight: bool = ...,
                 return_stats: Literal[False] = ...) -> tuple[Array, Array]: ...
@overload
def add_norm_pre(x: Array, r: Array, normalized_shape: Shape, weight: Array | None = ...,
                 bias: Array | None = ..., eps: float | None = ..., norm: Norm = ...,
                 zero_centered_weight: bool = ..., *, return_stats: Literal[True]
                 ) -> tuple[Array, Array, Array | None, Array]: ...
def add_norm_pre_backward(dy: Array, dh_next: Array | None, h: Array, normalized_shape: Shape,
                          weight: Array | None = ..., bias: Array | None = ...,
                          eps: float | None = ..., norm: Norm = ..., zero_centered_weight: bool = ...
                          ) -> tuple[Array, Array | None, Array | None]: ...

@overload
def add_norm_post(x: Array, s: Array, normalized_shape: Shape, weight: Array | None = ...,
                  bias: Array | None = ..., eps: float | None = ..., norm: Norm = ...,
                  zero_centered_weight: bool = ..., p: float = ..., seed: int = ...,
                  offset: int = ..., return_stats: Literal[False] = ...) -> Array: ...
@overload
def add_norm_post(x: Array, s: Array, normalized_shape: Shape, weight: Array | None = ...,
                  bias: Array | None = ..., eps: float | None = ..., norm: Norm = ...,
                  zero_centered_weight: bool = ..., p: float = ..., seed: int = ...,
                  offset: int = ..., *, return_stats: Literal[True]
                  ) -> tuple[Array, Array | None, Array]: ...
def add_norm_post_backward(dy: Array, x: Array, s: Array, normalized_shape: Shape,
                           weight: Array | None = ..., bias: Array | None = ...,
                           eps: float | None = ..., norm: Norm = ..., zero_centered_weight: bool = ...,
                           p: float = ..., seed: int = ..., offset: int = ...
                           ) -> tuple[Array, Array, Array | None, Array | None]: ...

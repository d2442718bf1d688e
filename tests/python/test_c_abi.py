"""The C ABI (include/addnorm/addnorm.h) through ctypes, as a Rust, Go, Julia or C# binding
reaches it: libaddnorm.so from $ADDNORM_BUILD_DIR (the CMake target addnorm_shared).

Its outputs equal the NumPy face's bit for bit (both call the same C++ ops, float32 and
float64), and are close to the float64 NumPy references (python_references.py); 16-bit storage,
which the NumPy face has not, is checked against the reference alone. A bad argument gives
ADDNORM_ERROR_INVALID_ARGUMENT, a message naming it, and untouched outputs; the message is
per thread. The ctypes declarations below are checked against the header's.
"""
import ctypes
import os
import re
import threading
from pathlib import Path

import numpy as np
import pytest

import addnorm
import python_references as ref

HEADER = Path(__file__).resolve().parents[2] / "include" / "addnorm" / "addnorm.h"

OK, INVALID_ARGUMENT = 0, 1
# addnorm.h's addnorm_error_kind.
KIND_NONE, KIND_VALUE, KIND_SHAPE, KIND_TYPE, KIND_OVERLAP = 0, 1, 2, 3, 4
FLOAT32, BFLOAT16, FLOAT16, FLOAT64 = 0, 1, 2, 3
LAYER_NORM, RMS_NORM = 0, 1
MOMENTUM_PYTORCH, MOMENTUM_ONNX = 0, 1
DEFAULT_EPS = -1.0
CODES = {np.dtype(np.float32): FLOAT32, np.dtype(np.float16): FLOAT16,
         np.dtype(np.float64): FLOAT64}
NORMS = {"layer_norm": LAYER_NORM, "rms_norm": RMS_NORM}


class Tensor(ctypes.Structure):
    """addnorm_tensor."""
    _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("rank", ctypes.c_int32), ("dtype", ctypes.c_int32)]


T = ctypes.POINTER(Tensor)
I32, I64, U64, F64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_double
# Every op returns an addnorm_status (a C int).
OPS = {
    "addnorm_layer_norm": [T, I32, T, T, F64, T, T, T],
    "addnorm_layer_norm_backward": [T, T, I32, T, T, F64, T, T, T, T, T],
    "addnorm_rms_norm": [T, I32, T, I32, F64, T, T],
    "addnorm_rms_norm_backward": [T, T, I32, T, I32, F64, T, T, T],
    "addnorm_group_norm": [T, I64, T, T, F64, T, T, T],
    "addnorm_group_norm_backward": [T, T, I64, T, T, F64, T, T, T],
    "addnorm_batch_norm": [T, T, T, I32, F64, I32, F64, I32, T, T, T, T, T],
    "addnorm_batch_norm_backward": [T, T, T, T, I32, F64, I32, T, T, T, T, T],
    "addnorm_add_norm_pre": [T, T, I32, I32, T, T, I32, F64, T, T, T, T],
    "addnorm_add_norm_pre_backward": [T, T, T, I32, I32, T, T, I32, F64, T, T, T, T, T],
    "addnorm_add_norm_post": [T, T, I32, I32, T, T, I32, F64, F64, U64, U64, T, T, T],
    "addnorm_add_norm_post_backward": [T, T, T, I32, I32, T, T, I32, F64, F64, U64, U64, T, T,
                                       T, T, T, T],
}
QUERIES = {
    "addnorm_last_error": ([], ctypes.c_char_p),
    "addnorm_last_error_argument": ([], ctypes.c_char_p),
    "addnorm_last_error_kind": ([], ctypes.c_int),
    "addnorm_status_name": ([ctypes.c_int], ctypes.c_char_p),
    "addnorm_dtype_size": ([I32], ctypes.c_size_t),
    "addnorm_default_eps": ([I32], F64),
    "addnorm_version": ([], ctypes.c_char_p),
    "addnorm_version_number": ([], I32),
}


@pytest.fixture(scope="module")
def lib():
    build = os.environ.get("ADDNORM_BUILD_DIR")
    if not build:
        pytest.skip("ADDNORM_BUILD_DIR is unset: point it at a build tree holding libaddnorm.so "
                    "(the CMake target addnorm_shared) to test the C ABI")
    path = Path(build).resolve() / "libaddnorm.so"
    if not path.is_file():
        pytest.fail(f"ADDNORM_BUILD_DIR is set but {path} does not exist: build the CMake "
                    "target addnorm_shared")
    library = ctypes.CDLL(str(path))
    for name, argtypes in OPS.items():
        function = getattr(library, name)
        function.argtypes, function.restype = argtypes, ctypes.c_int
    for name, (argtypes, restype) in QUERIES.items():
        function = getattr(library, name)
        function.argtypes, function.restype = argtypes, restype
    return library


def tensor(array, code=None):
    """A descriptor of a C-contiguous array (None: NULL); it keeps the array and its shape
    alive. bfloat16 arrays are uint16 arrays with code=BFLOAT16."""
    if array is None:
        return None
    assert array.flags.c_contiguous
    shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
    descriptor = Tensor(array.ctypes.data, ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                        array.ndim, CODES[array.dtype] if code is None else code)
    descriptor.keep = (array, shape)
    return ctypes.pointer(descriptor)


def expect_ok(lib, status):
    assert status == OK, (lib.addnorm_status_name(status), lib.addnorm_last_error())
    assert lib.addnorm_last_error() == b""


def same_bits(actual, expected):
    """Bit for bit: the same dtype, shape and bytes (so -0.0 differs from 0.0)."""
    assert expected is not None and actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes(), np.max(np.abs(actual - expected))


TOLERANCE = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-11}


def close_to(actual, expected, scale=1.0):
    tolerance = TOLERANCE[actual.dtype] * max(1.0, scale, float(np.abs(expected).max()))
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=0, atol=tolerance)


def data(seed, shape, dtype, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


def stats_dtype(x):
    return np.float64 if x.dtype == np.float64 else np.float32


def empty_stats(x, shape):
    return np.empty(shape, stats_dtype(x)), np.empty(shape, stats_dtype(x))


DTYPES = [np.float32, np.float64]


# ---- the declarations -------------------------------------------------------------------------

C_TYPES = {"const addnorm_tensor*": T, "int32_t": I32, "int64_t": I64, "uint64_t": U64,
           "double": F64, "int": ctypes.c_int, "void": None}


def test_declarations_match_the_header():
    """Each function of addnorm.h, with its argument types, is declared here as the header
    declares it: what a binding generator (bindgen, c2ffi, ClangSharp) would read."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)
    declared = {}
    for returns, name, arguments in re.findall(
            r"ADDNORM_C_API\s+([\w\s\*]+?)\s*(addnorm_\w+)\(([^)]*)\);", text):
        types = [C_TYPES[re.sub(r"\s+\w+$", "", part.strip())] for part in arguments.split(",")]
        declared[name] = (returns.strip(), [t for t in types if t is not None])
    assert set(declared) == set(OPS) | set(QUERIES)
    for name, argtypes in OPS.items():
        assert declared[name] == ("addnorm_status", argtypes), name
    for name, (argtypes, _) in QUERIES.items():
        assert declared[name][1] == argtypes, name


def test_constants(lib):
    assert [lib.addnorm_dtype_size(code) for code in range(5)] == [4, 2, 2, 8, 0]
    for norm, code in NORMS.items():
        assert lib.addnorm_default_eps(code) == addnorm._addnorm.default_eps(norm)
    assert lib.addnorm_default_eps(7) < 0
    assert [lib.addnorm_status_name(code) for code in range(5)] == [
        b"ADDNORM_OK", b"ADDNORM_ERROR_INVALID_ARGUMENT", b"ADDNORM_ERROR_OUT_OF_MEMORY",
        b"ADDNORM_ERROR_INTERNAL", b"ADDNORM_STATUS_UNKNOWN"]
    assert ctypes.sizeof(Tensor) == 24


def test_version_is_the_projects(lib):
    # The one definition is CMakeLists.txt's project(); the NumPy face reports the same.
    version = re.search(r"project\(addnorm VERSION ([0-9]+)\.([0-9]+)\.([0-9]+)",
                        (Path(__file__).resolve().parents[2] / "CMakeLists.txt").read_text())
    major, minor, patch = (int(part) for part in version.groups())
    assert lib.addnorm_version() == f"{major}.{minor}.{patch}".encode()
    assert lib.addnorm_version() == addnorm.__version__.encode()
    assert lib.addnorm_version_number() == major * 10000 + minor * 100 + patch


# ---- an empty batch ---------------------------------------------------------------------------

def null_tensor(shape, dtype):
    """A descriptor of a tensor with no elements and NULL data, as a caller holding an empty
    batch may pass it."""
    dims = (ctypes.c_int64 * len(shape))(*shape)
    descriptor = Tensor(None, ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64)), len(shape),
                        CODES[np.dtype(dtype)])
    descriptor.keep = dims
    return ctypes.pointer(descriptor)


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_empty_batch_gives_what_pytorch_gives(lib, dtype):
    """No rows: nothing is read (the data pointers are NULL), dweight and dbias are PyTorch's
    (sums of nothing), and BatchNorm leaves the running statistics as F.batch_norm does."""
    torch = pytest.importorskip("torch")
    weight, bias = data(40, (16,), dtype, 0.5, 1.5), data(41, (16,), dtype)
    x = torch.empty((0, 16), dtype=torch.from_numpy(weight).dtype, requires_grad=True)
    w, b = (torch.tensor(p, requires_grad=True) for p in (weight, bias))
    torch.nn.functional.layer_norm(x, (16,), w, b).sum().backward()
    empty = null_tensor((0, 16), dtype)
    expect_ok(lib, lib.addnorm_layer_norm(empty, 1, tensor(weight), tensor(bias), DEFAULT_EPS,
                                          empty, None, None))
    dweight, dbias = np.full_like(weight, 7), np.full_like(bias, 7)
    expect_ok(lib, lib.addnorm_layer_norm_backward(empty, empty, 1, tensor(weight), tensor(bias),
                                                   DEFAULT_EPS, None, None, empty,
                                                   tensor(dweight), tensor(dbias)))
    same_bits(dweight, w.grad.numpy())
    same_bits(dbias, b.grad.numpy())

    channels = (0, 16, 5)
    running_mean, running_var = data(42, (16,), dtype), data(43, (16,), dtype, 0.5, 2)
    mine_mean, mine_var = running_mean.copy(), running_var.copy()
    theirs_mean, theirs_var = torch.tensor(running_mean), torch.tensor(running_var)
    x = torch.empty(channels, dtype=x.dtype, requires_grad=True)
    w, b = (torch.tensor(p, requires_grad=True) for p in (weight, bias))
    torch.nn.functional.batch_norm(x, theirs_mean, theirs_var, w, b, True, 0.2).sum().backward()
    empty = null_tensor(channels, dtype)
    expect_ok(lib, lib.addnorm_batch_norm(empty, tensor(weight), tensor(bias), True, 0.2,
                                          MOMENTUM_PYTORCH, DEFAULT_EPS, False,
                                          tensor(mine_mean), tensor(mine_var), empty, None, None))
    same_bits(mine_mean, theirs_mean.numpy())
    same_bits(mine_var, theirs_var.numpy())
    dweight, dbias = np.full_like(weight, 7), np.full_like(bias, 7)
    expect_ok(lib, lib.addnorm_batch_norm_backward(
        empty, empty, tensor(weight), tensor(bias), True, DEFAULT_EPS, False, None, None, empty,
        tensor(dweight), tensor(dbias)))
    same_bits(dweight, w.grad.numpy())
    same_bits(dbias, b.grad.numpy())


# ---- the ops against the NumPy face and the references ----------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ndim", [1, 2])
def test_layer_norm(lib, dtype, ndim):
    x = data(1, (3, 5, 40), dtype, -1, 3)
    dims = x.shape[3 - ndim:]
    weight, bias = data(2, dims, dtype, 0.5, 1.5), data(3, dims, dtype)
    dy = data(4, x.shape, dtype)
    y = np.empty_like(x)
    mean, rstd = empty_stats(x, x.shape[:3 - ndim])
    expect_ok(lib, lib.addnorm_layer_norm(tensor(x), ndim, tensor(weight), tensor(bias),
                                          DEFAULT_EPS, tensor(y), tensor(mean), tensor(rstd)))
    face = addnorm.layer_norm(x, dims, weight, bias, return_stats=True)
    for mine, theirs in zip((y, mean, rstd), face):
        same_bits(mine, theirs)
    close_to(y, ref.layer_norm(x.astype(np.float64), dims, weight, bias))

    dx, dweight, dbias = np.empty_like(x), np.empty_like(weight), np.empty_like(bias)
    expect_ok(lib, lib.addnorm_layer_norm_backward(
        tensor(dy), tensor(x), ndim, tensor(weight), tensor(bias), 1e-3, None, None, tensor(dx),
        tensor(dweight), tensor(dbias)))
    face = addnorm.layer_norm_backward(dy, x, dims, weight, bias, eps=1e-3)
    for mine, theirs in zip((dx, dweight, dbias), face):
        same_bits(mine, theirs)
    expected = ref.layer_norm_backward(dy.astype(np.float64), x.astype(np.float64), dims, weight,
                                       eps=1e-3)
    for mine, theirs in zip((dx, dweight, dbias), expected):
        close_to(mine, theirs, scale=30.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("zero_centered", [False, True])
def test_rms_norm(lib, dtype, zero_centered):
    x = data(5, (6, 33), dtype)
    weight, dy = data(6, (33,), dtype, -0.5, 1.5), data(7, x.shape, dtype)
    y, rstd = np.empty_like(x), np.empty(6, stats_dtype(x))
    expect_ok(lib, lib.addnorm_rms_norm(tensor(x), 1, tensor(weight), zero_centered,
                                        DEFAULT_EPS, tensor(y), tensor(rstd)))
    face = addnorm.rms_norm(x, 33, weight, zero_centered_weight=zero_centered, return_stats=True)
    same_bits(y, face[0])
    same_bits(rstd, face[1])
    close_to(y, ref.rms_norm(x.astype(np.float64), (33,), weight, zero_centered=zero_centered))

    dx, dweight = np.empty_like(x), np.empty_like(weight)
    expect_ok(lib, lib.addnorm_rms_norm_backward(tensor(dy), tensor(x), 1, tensor(weight),
                                                 zero_centered, DEFAULT_EPS, None, tensor(dx),
                                                 tensor(dweight)))
    face = addnorm.rms_norm_backward(dy, x, 33, weight, zero_centered_weight=zero_centered)
    same_bits(dx, face[0])
    same_bits(dweight, face[1])
    # With the forward's rstd the backward skips a pass: the same to within rounding.
    expect_ok(lib, lib.addnorm_rms_norm_backward(tensor(dy), tensor(x), 1, tensor(weight),
                                                 zero_centered, DEFAULT_EPS, tensor(rstd),
                                                 tensor(dx), tensor(dweight)))
    expected = ref.rms_norm_backward(dy.astype(np.float64), x.astype(np.float64), (33,), weight,
                                     zero_centered=zero_centered)
    close_to(dx, expected[0], scale=10.0)
    close_to(dweight, expected[1], scale=10.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_group_norm(lib, dtype):
    x = data(8, (2, 6, 5, 7), dtype, -1, 2)
    weight, bias, dy = data(9, (6,), dtype), data(10, (6,), dtype), data(11, x.shape, dtype)
    y = np.empty_like(x)
    mean, rstd = empty_stats(x, (2, 3))
    expect_ok(lib, lib.addnorm_group_norm(tensor(x), 3, tensor(weight), tensor(bias), 1e-4,
                                          tensor(y), tensor(mean), tensor(rstd)))
    for mine, theirs in zip((y, mean, rstd),
                            addnorm.group_norm(x, 3, weight, bias, 1e-4, return_stats=True)):
        same_bits(mine, theirs)
    grouped = ref.layer_norm(x.astype(np.float64).reshape(2, 3, -1), (70,), eps=1e-4)
    close_to(y, grouped.reshape(x.shape) * weight[:, None, None] + bias[:, None, None])

    dx, dweight, dbias = np.empty_like(x), np.empty_like(weight), np.empty_like(bias)
    expect_ok(lib, lib.addnorm_group_norm_backward(tensor(dy), tensor(x), 3, tensor(weight),
                                                   tensor(bias), 1e-4, tensor(dx),
                                                   tensor(dweight), tensor(dbias)))
    for mine, theirs in zip((dx, dweight, dbias),
                            addnorm.group_norm_backward(dy, x, 3, weight, bias, 1e-4)):
        same_bits(mine, theirs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("convention", ["pytorch", "onnx"])
def test_batch_norm(lib, dtype, training, convention):
    x = data(12, (4, 3, 10), dtype, -1, 3)
    weight, bias, dy = data(13, (3,), dtype), data(14, (3,), dtype), data(15, x.shape, dtype)
    running_mean, running_var = data(16, (3,), dtype), data(17, (3,), dtype, 0.5, 2)
    mine_mean, mine_var = running_mean.copy(), running_var.copy()
    face_mean, face_var = running_mean.copy(), running_var.copy()
    y = np.empty_like(x)
    batch_mean, batch_rstd = empty_stats(x, (3,)) if training else (None, None)
    code = MOMENTUM_PYTORCH if convention == "pytorch" else MOMENTUM_ONNX
    expect_ok(lib, lib.addnorm_batch_norm(tensor(x), tensor(weight), tensor(bias), training, 0.2,
                                          code, DEFAULT_EPS, False, tensor(mine_mean),
                                          tensor(mine_var), tensor(y), tensor(batch_mean),
                                          tensor(batch_rstd)))
    face = addnorm.batch_norm(x, face_mean, face_var, weight, bias, training, 0.2,
                              convention=convention, return_stats=training)
    same_bits(y, face[0] if training else face)
    if training:
        same_bits(batch_mean, face[1])
        same_bits(batch_rstd, face[2])
    same_bits(mine_mean, face_mean)
    same_bits(mine_var, face_var)
    expected = ref.batch_norm(x.astype(np.float64), running_mean.astype(np.float64),
                              running_var.astype(np.float64), weight, bias, training, 0.2,
                              convention=convention)
    for mine, theirs in zip((y, mine_mean, mine_var), expected):
        close_to(mine, theirs)

    dx, dweight, dbias = np.empty_like(x), np.empty_like(weight), np.empty_like(bias)
    expect_ok(lib, lib.addnorm_batch_norm_backward(
        tensor(dy), tensor(x), tensor(weight), tensor(bias), training, DEFAULT_EPS, False,
        tensor(running_mean), tensor(running_var), tensor(dx), tensor(dweight), tensor(dbias)))
    face = addnorm.batch_norm_backward(dy, x, running_mean, running_var, weight, bias, training)
    for mine, theirs in zip((dx, dweight, dbias), face):
        same_bits(mine, theirs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_add_norm_pre(lib, dtype, norm):
    x, r = data(18, (4, 64), dtype, -1, 3), data(19, (4, 64), dtype)
    weight = data(20, (64,), dtype, 0.5, 1.5)
    bias = data(21, (64,), dtype) if norm == "layer_norm" else None
    dy, dh_next = data(22, x.shape, dtype), data(23, x.shape, dtype)
    h, y = np.empty_like(x), np.empty_like(x)
    mean, rstd = empty_stats(x, (4,))
    mean = mean if norm == "layer_norm" else None
    expect_ok(lib, lib.addnorm_add_norm_pre(tensor(x), tensor(r), 1, NORMS[norm], tensor(weight),
                                            tensor(bias), False, DEFAULT_EPS, tensor(h), tensor(y),
                                            tensor(mean), tensor(rstd)))
    face = addnorm.add_norm_pre(x, r, 64, weight, bias, norm=norm, return_stats=True)
    for mine, theirs in zip((h, y, mean, rstd), face):
        if mine is not None:
            same_bits(mine, theirs)
    h64 = h.astype(np.float64)
    expected = (ref.layer_norm(h64, (64,), weight, bias) if norm == "layer_norm"
                else ref.rms_norm(h64, (64,), weight))
    close_to(y, expected)

    dh, dweight = np.empty_like(x), np.empty_like(weight)
    dbias = None if bias is None else np.empty_like(bias)
    expect_ok(lib, lib.addnorm_add_norm_pre_backward(
        tensor(dy), tensor(dh_next), tensor(h), 1, NORMS[norm], tensor(weight), tensor(bias),
        False, DEFAULT_EPS, None, None, tensor(dh), tensor(dweight), tensor(dbias)))
    face = addnorm.add_norm_pre_backward(dy, dh_next, h, 64, weight, bias, norm=norm)
    for mine, theirs in zip((dh, dweight, dbias), face):
        if mine is not None:
            same_bits(mine, theirs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_add_norm_post(lib, dtype, norm):
    x, s = data(24, (5, 48), dtype, -1, 3), data(25, (5, 48), dtype)
    weight = data(26, (48,), dtype, 0.5, 1.5)
    bias = data(27, (48,), dtype) if norm == "layer_norm" else None
    dy = data(28, x.shape, dtype)
    p, seed, offset = 0.1, 1234, 17
    y = np.empty_like(x)
    mean, rstd = empty_stats(x, (5,))
    mean = mean if norm == "layer_norm" else None
    expect_ok(lib, lib.addnorm_add_norm_post(tensor(x), tensor(s), 1, NORMS[norm],
                                             tensor(weight), tensor(bias), False, 1e-4, p, seed,
                                             offset, tensor(y), tensor(mean), tensor(rstd)))
    face = addnorm.add_norm_post(x, s, 48, weight, bias, 1e-4, norm=norm, p=p, seed=seed,
                                 offset=offset, return_stats=True)
    for mine, theirs in zip((y, mean, rstd), face):
        if mine is not None:
            same_bits(mine, theirs)
    mask = addnorm.dropout_mask(x.shape, p, seed, offset)
    h = x.astype(np.float64) + ref.dropout(s.astype(np.float64), mask, p)
    expected = (ref.layer_norm(h, (48,), weight, bias, eps=1e-4) if norm == "layer_norm"
                else ref.rms_norm(h, (48,), weight, eps=1e-4))
    close_to(y, expected, scale=4.0)

    dx, ds, dweight = np.empty_like(x), np.empty_like(x), np.empty_like(weight)
    dbias = None if bias is None else np.empty_like(bias)
    expect_ok(lib, lib.addnorm_add_norm_post_backward(
        tensor(dy), tensor(x), tensor(s), 1, NORMS[norm], tensor(weight), tensor(bias), False,
        1e-4, p, seed, offset, None, None, tensor(dx), tensor(ds), tensor(dweight),
        tensor(dbias)))
    face = addnorm.add_norm_post_backward(dy, x, s, 48, weight, bias, 1e-4, norm=norm, p=p,
                                          seed=seed, offset=offset)
    for mine, theirs in zip((dx, ds, dweight, dbias), face):
        if mine is not None:
            same_bits(mine, theirs)


# ---- 16-bit storage ---------------------------------------------------------------------------

def to_bfloat16(values):
    """float32 to bfloat16 bits (uint16), rounding to nearest even."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bfloat16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("storage", ["bfloat16", "float16"])
def test_16bit_storage(lib, storage):
    """x and y stored in 16 bits (gamma in float32): y is the float64 LayerNorm of the stored x,
    within one unit of the storage type, and the same bits as the float32 y of the same call
    rounded once."""
    x32 = data(29, (7, 96), np.float32, -3, 5)
    weight = data(30, (96,), np.float32, 0.5, 2)
    if storage == "bfloat16":
        x, code, decode = to_bfloat16(x32), BFLOAT16, from_bfloat16
        y = np.empty_like(x)
        unit = 2.0 ** -7
    else:
        x, code, decode = x32.astype(np.float16), FLOAT16, lambda v: v.astype(np.float32)
        y = np.empty_like(x)
        unit = 2.0 ** -10
    y32 = np.empty(x.shape, np.float32)
    expect_ok(lib, lib.addnorm_layer_norm(tensor(x, code), 1, tensor(weight), None, DEFAULT_EPS,
                                          tensor(y, code), None, None))
    expect_ok(lib, lib.addnorm_layer_norm(tensor(x, code), 1, tensor(weight), None, DEFAULT_EPS,
                                          tensor(y32), None, None))
    expected = ref.layer_norm(decode(x).astype(np.float64), (96,), weight)
    error = np.abs(decode(y).astype(np.float64) - expected)
    assert np.all(error <= unit * np.maximum(np.abs(expected), 2.0 ** -14)), error.max()
    rounded = to_bfloat16(y32) if storage == "bfloat16" else y32.astype(np.float16)
    same_bits(y, rounded)


@pytest.mark.parametrize("storage", ["bfloat16", "float16"])
@pytest.mark.parametrize("training", [True, False])
def test_16bit_batch_norm_matches_pytorch(lib, storage, training):
    """BatchNorm with x, y, dy and dx in 16 bits beside float32 parameters and running
    statistics, as mixed-precision training keeps them: y and dx within one unit of the storage
    type of PyTorch's float64 result on the stored values, the running statistics, dweight and
    dbias as PyTorch updates and sums them."""
    import torch
    import torch.nn.functional as F
    x32 = data(33, (6, 5, 7), np.float32, -1, 4)
    dy32 = data(34, x32.shape, np.float32)
    weight, bias = data(35, (5,), np.float32, 0.5, 2), data(36, (5,), np.float32)
    running_mean, running_var = data(37, (5,), np.float32), data(38, (5,), np.float32, 0.5, 2)
    if storage == "bfloat16":
        code, encode, decode, unit = BFLOAT16, to_bfloat16, from_bfloat16, 2.0 ** -7
    else:
        code, encode, unit = FLOAT16, (lambda v: v.astype(np.float16)), 2.0 ** -10
        decode = lambda v: v.astype(np.float32)  # noqa: E731
    x, dy = encode(x32), encode(dy32)
    y, dx = np.empty_like(x), np.empty_like(x)
    mine_mean, mine_var = running_mean.copy(), running_var.copy()
    dweight, dbias = np.empty_like(weight), np.empty_like(bias)
    expect_ok(lib, lib.addnorm_batch_norm(tensor(x, code), tensor(weight), tensor(bias), training,
                                          0.1, MOMENTUM_PYTORCH, DEFAULT_EPS, False,
                                          tensor(mine_mean), tensor(mine_var), tensor(y, code),
                                          None, None))
    expect_ok(lib, lib.addnorm_batch_norm_backward(
        tensor(dy, code), tensor(x, code), tensor(weight), tensor(bias), training, DEFAULT_EPS,
        False, tensor(running_mean), tensor(running_var), tensor(dx, code), tensor(dweight),
        tensor(dbias)))

    def wide(values, grad=False):
        return torch.tensor(np.asarray(values, np.float64), requires_grad=grad)
    xt, wt, bt = wide(decode(x), True), wide(weight, True), wide(bias, True)
    their_mean, their_var = wide(running_mean), wide(running_var)
    yt = F.batch_norm(xt, their_mean, their_var, wt, bt, training, 0.1, 1e-5)
    (yt * wide(decode(dy))).sum().backward()
    for got, want in ((y, yt), (dx, xt.grad)):
        want = want.detach().numpy()
        error = np.abs(decode(got).astype(np.float64) - want)
        assert np.all(error <= unit * np.maximum(np.abs(want), np.abs(want).max() * 2 ** -7))
    for got, want in ((mine_mean, their_mean), (mine_var, their_var), (dweight, wt.grad),
                      (dbias, bt.grad)):
        close_to(got, want.detach().numpy())


# ---- errors -----------------------------------------------------------------------------------

def expect_refusal(lib, status, message_part, *outputs_and_copies):
    assert status == INVALID_ARGUMENT, lib.addnorm_status_name(status)
    message = lib.addnorm_last_error().decode()
    assert message_part in message, message
    # The argument the message starts with is also recorded on its own, for bindings.
    assert lib.addnorm_last_error_argument().decode() == message.split(" ")[0], message
    assert lib.addnorm_last_error_kind() != KIND_NONE
    for output, before in outputs_and_copies:
        assert output.tobytes() == before.tobytes(), "an output was written"


def sentinel(shape):
    """A float32 buffer of a bit pattern no op writes here."""
    return np.full(shape, 0xA5A5A5A5, np.uint32).view(np.float32)


def test_refusals_write_nothing(lib):
    x = data(31, (2, 4), np.float32)
    weight = np.ones(4, np.float32)
    y, mean, rstd = sentinel((2, 4)), sentinel(2), sentinel(2)
    outputs = [(a, a.copy()) for a in (y, mean, rstd)]
    cases = [
        ("NULL x", (None, 1, tensor(weight), None, DEFAULT_EPS, tensor(y), tensor(mean),
                    tensor(rstd)), "x is NULL, expected a tensor"),
        ("mismatched gamma", (tensor(x), 1, tensor(np.ones(5, np.float32)), None, DEFAULT_EPS,
                              tensor(y), tensor(mean), tensor(rstd)),
         "gamma has shape [5], expected [4]"),
        ("wrong normalized_ndim", (tensor(x), 3, None, None, DEFAULT_EPS, tensor(y), None, None),
         "normalized_ndim is 3, expected 1 to the rank of x [2, 4]"),
        ("float64 gamma", (tensor(x), 1, tensor(np.ones(4)), None, DEFAULT_EPS, tensor(y),
                           None, None), "gamma has dtype float64"),
        ("float16 mean", (tensor(x), 1, None, None, DEFAULT_EPS, tensor(y),
                          tensor(np.ones(2, np.float16)), tensor(rstd)),
         "mean has dtype float16, expected float32"),
        ("rstd alone", (tensor(x), 1, None, None, DEFAULT_EPS, tensor(y), None, tensor(rstd)),
         "rstd was given but mean is NULL, expected both or neither"),
        ("infinite eps", (tensor(x), 1, None, None, float("inf"), tensor(y), None, None),
         "eps is inf, expected a finite value"),
    ]
    for what, arguments, message_part in cases:
        expect_refusal(lib, lib.addnorm_layer_norm(*arguments), message_part, *outputs)

    negative_rank = tensor(x)
    negative_rank.contents.rank = -2
    expect_refusal(lib, lib.addnorm_layer_norm(negative_rank, 1, None, None, DEFAULT_EPS,
                                               tensor(y), None, None),
                   "x has rank -2, expected 0 to 8", *outputs)
    # A mismatched r in the fused op leaves h and y alone too.
    h = sentinel((2, 4))
    expect_refusal(lib, lib.addnorm_add_norm_pre(tensor(x), tensor(np.ones((4, 2), np.float32)),
                                                 1, LAYER_NORM, None, None, False, DEFAULT_EPS,
                                                 tensor(h), tensor(y), None, None),
                   "r has shape [4, 2], expected [2, 4]", (h, h.copy()), *outputs)
    # BatchNorm updates its running statistics in place: a refused call leaves them alone.
    running_mean, running_var = sentinel(4), sentinel(4)
    running = [(a, a.copy()) for a in (running_mean, running_var)]
    for momentum, var, message_part in (
            (float("nan"), running_var, "momentum is nan, expected a finite value"),
            (0.1, None, "running_mean was given but running_var is NULL, expected both")):
        expect_refusal(lib, lib.addnorm_batch_norm(tensor(x), None, None, True, momentum,
                                                   MOMENTUM_PYTORCH, DEFAULT_EPS, False,
                                                   tensor(running_mean), tensor(var), tensor(y),
                                                   None, None),
                       message_part, *running, *outputs)
    # A success clears the message.
    expect_ok(lib, lib.addnorm_layer_norm(tensor(x), 1, None, None, DEFAULT_EPS, tensor(y), None,
                                          None))
    assert lib.addnorm_last_error_argument() == b""
    assert lib.addnorm_last_error_kind() == KIND_NONE


def test_last_error_kind_tells_what_is_wrong(lib):
    """addnorm.h's addnorm_error_kind values, one failure of each kind."""
    x = data(32, (2, 4), np.float32)
    y = sentinel((2, 4))
    cases = [
        ((tensor(x), 1, tensor(np.ones(5, np.float32)), None, DEFAULT_EPS, tensor(y), None, None),
         KIND_SHAPE, "gamma"),
        ((tensor(x), 1, tensor(np.ones(4)), None, DEFAULT_EPS, tensor(y), None, None), KIND_TYPE,
         "gamma"),
        ((tensor(x), 1, None, None, float("nan"), tensor(y), None, None), KIND_VALUE, "eps"),
    ]
    for arguments, kind, argument in cases:
        assert lib.addnorm_layer_norm(*arguments) == INVALID_ARGUMENT
        assert lib.addnorm_last_error_kind() == kind, lib.addnorm_last_error()
        assert lib.addnorm_last_error_argument().decode() == argument
    # y half a row into x: an overlap, named by the output.
    storage = data(33, (12,), np.float32)
    inside = storage[2:10].reshape(2, 4)
    assert lib.addnorm_layer_norm(tensor(storage[:8].reshape(2, 4)), 1, None, None, DEFAULT_EPS,
                                  tensor(inside), None, None) == INVALID_ARGUMENT
    assert lib.addnorm_last_error_kind() == KIND_OVERLAP, lib.addnorm_last_error()
    assert lib.addnorm_last_error_argument() == b"y"


def test_last_error_is_per_thread(lib):
    """A failure on one thread leaves another thread's message alone, and each thread reads its
    own (ctypes releases the GIL during the calls)."""
    x, y = np.ones((2, 4), np.float32), np.empty((2, 4), np.float32)
    expect_ok(lib, lib.addnorm_layer_norm(tensor(x), 1, None, None, DEFAULT_EPS, tensor(y), None,
                                          None))
    seen = {}

    def fail_here():
        status = lib.addnorm_layer_norm(tensor(x), 1, None, None, DEFAULT_EPS, None, None, None)
        seen["status"], seen["message"] = status, lib.addnorm_last_error()

    worker = threading.Thread(target=fail_here)
    worker.start()
    worker.join()
    assert seen == {"status": INVALID_ARGUMENT, "message": b"y is NULL, expected a tensor"}
    assert lib.addnorm_last_error() == b""

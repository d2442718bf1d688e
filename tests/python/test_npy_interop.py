"""addnorm's .npy files against NumPy's, through `addnorm run add` (y = x + 0 copies x).

Files NumPy writes (format versions 1.0, 2.0 and 3.0, every rank addnorm supports) must load in
addnorm, files addnorm writes must load in NumPy (byte for byte what np.save writes), and the
files addnorm cannot represent must be refused with a message naming the option and the file.
"""
import numpy as np
import pytest

from run_cli import run_fails, run_ok

SHAPES = [(5,), (2, 3), (2, 1, 3), (1, 2, 1, 2), (2, 1, 1, 1, 3), (1, 1, 2, 1, 1, 2),
          (2, 1, 1, 1, 1, 1, 2), (1, 2, 1, 1, 1, 1, 1, 3)]


def copy_through_addnorm(addnorm_bin, tmp_path, x):
    """Runs y = x + 0 and returns y as NumPy loaded it."""
    zeros = np.zeros(x.shape, dtype=x.dtype)
    return run_ok(addnorm_bin, tmp_path, "add", {"x": x, "residual": zeros})["y"]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: f"rank{len(shape)}")
def test_float32_arrays_of_every_rank_round_trip_exactly(addnorm_bin, tmp_path, shape):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    y = copy_through_addnorm(addnorm_bin, tmp_path, x)
    assert y.dtype == np.float32
    assert y.shape == shape
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: f"rank{len(shape)}")
def test_float64_arrays_of_every_rank_round_trip_exactly(addnorm_bin, tmp_path, shape):
    # float64 is computed in float64 (x + 0 is x), not rounded to float32 on the way.
    x = np.random.default_rng(3).standard_normal(shape)
    y = copy_through_addnorm(addnorm_bin, tmp_path, x)
    assert y.dtype == np.float64 and y.shape == shape
    np.testing.assert_array_equal(y, x)
    assert not np.array_equal(y, x.astype(np.float32).astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (123456, 1)])
def test_written_files_are_what_numpy_saves(addnorm_bin, tmp_path, dtype, shape):
    # Small multiples of 1/4: the same values in either dtype.
    x = (np.arange(np.prod(shape)).reshape(shape) % 17 - 8).astype(dtype) / 4
    copy_through_addnorm(addnorm_bin, tmp_path, x)
    written = next(tmp_path.glob("out*/y.npy")).read_bytes()
    np.save(tmp_path / "numpy.npy", x)
    # NumPy 1.24 (Debian's) pads the header to 64 bytes with room for the first dim to grow.
    assert written == (tmp_path / "numpy.npy").read_bytes()
    header_length = int.from_bytes(written[8:10], "little")
    assert (10 + header_length) % 64 == 0


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_reads_every_numpy_format_version(addnorm_bin, tmp_path, version):
    x = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    path = tmp_path / f"v{version[0]}.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, x, version=version)
    assert path.read_bytes()[6:8] == bytes(version)
    y = run_ok(addnorm_bin, tmp_path, "add", {"x": path, "residual": np.zeros((3, 4), np.float32)})
    np.testing.assert_array_equal(y["y"], x)


def refusal(addnorm_bin, tmp_path, x):
    path = tmp_path / "bad.npy"
    np.save(path, x)
    message = run_fails(addnorm_bin, tmp_path, "add", {"x": path, "residual": np.zeros(2)})
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"addnorm: error: --x: {path}: "), message
    return message


@pytest.mark.parametrize("dtype, descr", [(np.int64, "<i8"), (np.float16, "<f2"),
                                          (np.bool_, "|b1"), (np.complex64, "<c8"),
                                          (np.uint8, "|u1")])
def test_refuses_other_dtypes(addnorm_bin, tmp_path, dtype, descr):
    message = refusal(addnorm_bin, tmp_path, np.zeros(2, dtype=dtype))
    assert f"dtype '{descr}' is not supported, expected float32 ('<f4') or float64 ('<f8')" \
        in message


@pytest.mark.parametrize("dtype", [">f4", ">f8"])
def test_refuses_big_endian(addnorm_bin, tmp_path, dtype):
    message = refusal(addnorm_bin, tmp_path, np.zeros(2, dtype=dtype))
    assert f"dtype '{dtype}' is big-endian" in message


def test_refuses_fortran_order(addnorm_bin, tmp_path):
    message = refusal(addnorm_bin, tmp_path, np.asfortranarray(np.zeros((2, 3), np.float32)))
    assert "fortran_order is True, expected a C-order array" in message


def test_refuses_structured_and_object_arrays(addnorm_bin, tmp_path):
    structured = np.zeros(2, dtype=[("a", "<f4"), ("b", "<f4")])
    assert "malformed .npy header" in refusal(addnorm_bin, tmp_path, structured)
    assert "dtype '|O' is not supported" in refusal(addnorm_bin, tmp_path,
                                                     np.array([1.0, "a"], dtype=object))


def test_refuses_rank_above_eight(addnorm_bin, tmp_path):
    message = refusal(addnorm_bin, tmp_path, np.zeros((1,) * 9, np.float32))
    assert "more than 8 dimensions" in message


def test_refuses_truncated_and_trailing_data(addnorm_bin, tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((2, 3), np.float32))
    data = path.read_bytes()
    cases = [("truncated.npy", data[:-2], "has 22 bytes of data, expected 24"),
             ("trailing.npy", data + b"\0", "has 25 bytes of data, expected 24"),
             ("empty.npy", b"", "is 0 bytes long, too short to be a .npy file"),
             ("text.npy", b"x,y\n1,2\n3,4\n", "not a .npy file")]
    for name, content, expected in cases:
        bad = tmp_path / name
        bad.write_bytes(content)
        message = run_fails(addnorm_bin, tmp_path, "add", {"x": bad, "residual": np.zeros(2)})
        assert f"--x: {bad}: {expected}" in message, message


def test_refuses_a_missing_file(addnorm_bin, tmp_path):
    missing = tmp_path / "missing.npy"
    message = run_fails(addnorm_bin, tmp_path, "add", {"x": missing, "residual": np.zeros(2)})
    assert f"--x: {missing}: cannot open for reading" in message

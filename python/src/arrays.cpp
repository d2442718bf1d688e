#include "arrays.hpp"

#include <type_traits>

#include "addnorm/error.hpp"

namespace addnorm::python {

namespace {

template <class T>
const char* dtype_name() {
  using Plain = std::remove_const_t<T>;
  if constexpr (std::is_same_v<Plain, float>) return "float32";
  if constexpr (std::is_same_v<Plain, double>) return "float64";
  return "uint8";
}

py::array as_array(const char* name, const py::object& object) {
  if (!py::isinstance<py::array>(object)) {
    throw py::type_error(std::string(name) + " is a " +
                         std::string(py::str(py::type::of(object).attr("__name__"))) +
                         ", expected a numpy.ndarray");
  }
  return py::reinterpret_borrow<py::array>(object);
}

}  // namespace

bool is_float64(const char* name, const py::object& x) {
  const py::array array = as_array(name, x);
  if (array.dtype().is(py::dtype::of<double>())) return true;
  if (array.dtype().is(py::dtype::of<float>())) return false;
  throw py::type_error(std::string(name) + " has dtype " + std::string(py::str(array.dtype())) +
                       ", expected float32 or float64");
}

template <class T>
T* data_of(const char* name, const py::object& object) {
  using Plain = std::remove_const_t<T>;
  const py::array array = as_array(name, object);
  if (!array.dtype().is(py::dtype::of<Plain>())) {
    throw py::type_error(std::string(name) + " has dtype " + std::string(py::str(array.dtype())) +
                         ", expected " + dtype_name<T>());
  }
  if (!(array.flags() & py::array::c_style)) {
    throw py::value_error(std::string(name) +
                          " is not C-contiguous, expected a C-contiguous array "
                          "(numpy.ascontiguousarray makes one)");
  }
  if constexpr (!std::is_const_v<T>) {
    if (!array.writeable()) {
      throw py::value_error(std::string(name) + " is read-only, expected a writable array");
    }
    return static_cast<T*>(const_cast<void*>(array.data()));
  } else {
    return static_cast<T*>(array.data());
  }
}

template const float* data_of<const float>(const char*, const py::object&);
template float* data_of<float>(const char*, const py::object&);
template const double* data_of<const double>(const char*, const py::object&);
template double* data_of<double>(const char*, const py::object&);
template uint8_t* data_of<uint8_t>(const char*, const py::object&);

Shape shape_of(const py::object& object) {
  const py::array array = py::reinterpret_borrow<py::array>(object);
  std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
  return shape_from(dims);
}

Shape shape_from(const std::vector<int64_t>& dims) {
  return Shape(std::span<const int64_t>(dims.data(), dims.size()));
}

}  // namespace addnorm::python

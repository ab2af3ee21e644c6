// numpy <-> C++ conversions shared by the bindings: checked float32 inputs (any array-like,
// converted with a copy only when it is not already C-contiguous float32) and zero-copy outputs
// (a std::vector moved into a capsule that the returned array owns).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <string>
#include <vector>

namespace kvcompact::py_bind {

namespace py = pybind11;

/// C-contiguous float32 array (a view when the input already is one).
using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

/// "(5, 8)": an array's shape as Python prints it.
inline std::string shape_str(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

/// A numpy view of an object that exports DLPack (`__dlpack__`: torch, JAX, CuPy on CPU, ...)
/// through numpy.from_dlpack, without a copy; other objects (numpy arrays included) are returned
/// as they are. A DLPack export numpy refuses (a device other than the CPU, a tensor that
/// requires grad) raises ValueError naming `name` and the exporter's reason.
inline py::object dlpack_view(const py::handle& obj, const char* name) {
  if (py::isinstance<py::array>(obj) || !py::hasattr(obj, "__dlpack__")) return py::reinterpret_borrow<py::object>(obj);
  try {
    return py::module_::import("numpy").attr("from_dlpack")(obj);
  } catch (const py::error_already_set& e) {
    // A dtype DLPack-to-numpy cannot carry (torch bfloat16, ...): a torch tensor converts itself
    // (one copy); others fall through to the error.
    const std::string type = py::str(py::type::handle_of(obj).attr("__module__"));
    if (type.rfind("torch", 0) == 0 && py::hasattr(obj, "float") && !py::bool_(obj.attr("requires_grad")))
      return py::module_::import("numpy").attr("from_dlpack")(obj.attr("float")());
    throw py::value_error(std::string(name) + ": its DLPack export cannot be read on the CPU (" +
                          std::string(py::str(e.type().attr("__name__"))) + ": " + std::string(py::str(e.value())) + ")");
  }
}

/// Converts `obj` (numpy array, a DLPack exporter such as a torch CPU tensor (zero-copy), nested
/// lists: anything numpy accepts) to a C-contiguous float32 array of `ndim` dimensions whose
/// values are all finite. Throws py::value_error naming `name`, the expected layout (`layout`,
/// e.g. "[T, head_dim]") and the shape it got.
inline FloatArray float_array(const py::handle& input, const char* name, int ndim, const char* layout) {
  const py::object obj = dlpack_view(input, name);
  FloatArray a = FloatArray::ensure(obj);
  if (!a) {
    std::string why;
    try {  // numpy's own reason (ensure() cleared it)
      py::module_::import("numpy").attr("asarray")(obj, "float32");
    } catch (const py::error_already_set& e) {
      why = std::string(": ") + e.what();
    }
    throw py::value_error(std::string(name) + ": cannot be read as a float32 array " + layout + " (got " +
                          std::string(py::str(py::type::handle_of(obj).attr("__name__"))) + why + ")");
  }
  if (a.ndim() != ndim)
    throw py::value_error(std::string(name) + ": expected a " + std::to_string(ndim) + "-d array " + layout +
                          ", got shape " + shape_str(a));
  const float* p = a.data();
  for (py::ssize_t i = 0, n = a.size(); i < n; ++i)
    if (!std::isfinite(p[i]))
      throw py::value_error(std::string(name) + ": non-finite value (NaN or Inf) at flat index " + std::to_string(i) +
                            " of shape " + shape_str(a));
  return a;
}

/// A numpy array of `shape` that owns `values` (moved, no copy).
template <class T>
py::array_t<T> to_array(std::vector<T>&& values, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, owned->data(), owner);
}

/// method + the keyword options as spec settings: "am" + {iters: 4} -> "am,iters=4" (compact.cpp).
std::string spec_text(const std::string& method, const py::dict& options);

}  // namespace kvcompact::py_bind

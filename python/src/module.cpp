// The extension module _kvcompact: kvcompact::Error as the Python exception kvcompact.Error
// (a subclass of both RuntimeError and ValueError), threads, version, and the bindings of
// compact.cpp and model.cpp. The package kvcompact (python/kvcompact/__init__.py) re-exports it.
#include <cblas.h>
#include <omp.h>

#include "arrays.h"
#include "core/error.h"
#include "ops/bf16_gemm.h"
#include "ops/matmul.h"

namespace kvcompact::py_bind {

void bind_compact(py::module_& m);
void bind_model(py::module_& m);

}  // namespace kvcompact::py_bind

PYBIND11_MODULE(_kvcompact, m) {
  namespace py = pybind11;
  m.doc() = "kvcompact: KV-cache compaction by Attention Matching, and exact CPU LLM inference";
  m.attr("__version__") = KVC_VERSION;

  // Error(RuntimeError, ValueError): library errors are bad input (ValueError) raised by the C++
  // kvcompact::Error, a std::runtime_error (RuntimeError). The message is the library's one line.
  static py::handle error = PyErr_NewException("kvcompact.Error", py::make_tuple(
      py::handle(PyExc_RuntimeError), py::handle(PyExc_ValueError)).release().ptr(), nullptr);
  m.attr("Error") = error;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kvcompact::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });

  m.def("set_threads", [](int n) {
    if (n < 1) throw py::value_error("n: threads must be >= 1, got " + std::to_string(n));
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
  }, py::arg("n"), "Worker threads of OpenMP and OpenBLAS (as the CLI's --threads).");
  m.def("get_threads", [] { return omp_get_max_threads(); }, "OpenMP's current maximum number of threads.");
  m.def("set_fast_mode", [](bool on) {
    kvcompact::set_matmul_mode(on ? kvcompact::MatmulMode::FastQuant : kvcompact::MatmulMode::Exact);
  }, py::arg("on").noconvert(), "The CLI's --fast-quant for this process (on: a bool): int8 activations in decoding; prefill in bfloat16 on AMX, int8 on AVX-512 VNNI, exact on AVX2.");
  m.def("fast_mode", [] { return kvcompact::matmul_mode() == kvcompact::MatmulMode::FastQuant; },
        "Whether the fast (not exact) matmul mode is on.");
  m.def("amx_prefill_available", [] { return kvcompact::bf16_matmul_available(); },
        "Whether the fast mode's prefill runs on AMX tiles here (AMX-BF16 CPU and build).");
  m.def("int8_prefill_preferred", [] { return kvcompact::int8_prefill_preferred(); },
        "Whether, without AMX, the fast mode's prefill runs the int8 kernels (AVX-512 VNNI level).");

  kvcompact::py_bind::bind_compact(m);
  kvcompact::py_bind::bind_model(m);
}

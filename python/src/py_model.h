// The Python-side objects of a loaded model and its caches, shared by model.cpp (load, forward,
// generate, compact) and analysis.cpp (influence, budgets, mask-eval entry points).
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/kv_cache.h"
#include "loaders/kvc_file.h"
#include "model/model.h"
#include "model/transformer.h"

namespace kvcompact::py_bind {

namespace py = pybind11;

/// A compacted context cache: the contents of a .kvc file (docs/kvc_format.md).
struct PyCache {
  KvcFile file;
  std::size_t full_entries = 0, full_bytes = 0;  // 0 when loaded from a file
  std::string diagnostics_json;                  // compaction_diagnostics, when asked for ("" = none)
};

/// A mutable KV cache of one model (Model.new_cache, CompactedCache.kv_cache): what
/// Model.forward extends. `fingerprint` ties it to its model (model_fingerprint).
struct PyKVCache {
  KVCache cache;
  std::uint64_t fingerprint = 0;
  RopeStyle rope_style = RopeStyle::Interleaved;
  /// Held while a forward extends the cache (with the GIL released): a second thread's forward on
  /// the same cache is refused instead of interleaving appends. Copies get their own flag.
  std::shared_ptr<std::atomic<bool>> busy = std::make_shared<std::atomic<bool>>(false);
};

/// A model and its Transformer (which refers into the model, so both live here, never moved).
class PyModel {
 public:
  PyModel(const std::string& path, const std::string& tokenizer);

  const Model& model() const { return model_; }
  const Transformer& transformer() const { return *transformer_; }
  const std::string& path() const { return model_.path; }
  /// model_fingerprint of the weights, hashed once on first use.
  std::uint64_t fingerprint() const;

 private:
  Model model_;
  std::unique_ptr<Transformer> transformer_;
  mutable std::optional<std::uint64_t> fingerprint_;
};

/// Routes the library's log lines (core/log.h: progress, warnings) to a Python callable
/// `progress(line: str)` for the lifetime of this object, then back to stderr. The callable runs
/// with the GIL taken; an exception it raises is kept and re-raised by rethrow_if_failed() once
/// the library call is over (the C++ loop is not interrupted). None: lines stay on stderr.
class ProgressSink {
 public:
  explicit ProgressSink(const py::object& progress);
  ~ProgressSink();
  ProgressSink(const ProgressSink&) = delete;
  ProgressSink& operator=(const ProgressSink&) = delete;
  /// Re-raises the first exception the callable raised (call with the GIL held).
  void rethrow_if_failed();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// Adds the analysis entry points (Model.influence, Model.mask_eval) to the Model class and the
/// budget functions to the module (analysis.cpp).
void bind_analysis(py::module_& m, py::class_<PyModel>& model_class);

}  // namespace kvcompact::py_bind

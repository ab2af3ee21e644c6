// Python binding of a loaded model (model/model.h load_model) with its forward pass
// (model/transformer.h) over fresh, explicit or compacted caches, tokenizer, teacher-forced NLL
// (metrics/perplexity.h), generation (model/generate.h), and compacted context caches
// (compaction/compact_context.h, .kvc files of loaders/kvc_file.h) that generation continues from
// (model/generate_from_cache.h).
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compaction/compact_context.h"
#include "metrics/perplexity.h"
#include "arrays.h"
#include "compaction/chunked.h"
#include "compaction/compact_cache.h"
#include "core/log.h"
#include "core/model_fingerprint.h"
#include "loaders/kvc_file.h"
#include "loaders/model_loader.h"
#include "model/generate.h"
#include "model/generate_from_cache.h"
#include "model/model.h"
#include "model/model_summary.h"
#include "model/sampler.h"
#include "model/transformer.h"
#include "py_model.h"

namespace kvcompact::py_bind {

PyModel::PyModel(const std::string& path, const std::string& tokenizer) {
  {
    py::gil_scoped_release release;
    model_ = load_model(path, tokenizer);
  }
  transformer_ = std::make_unique<Transformer>(model_.config, model_.weights);
}

std::uint64_t PyModel::fingerprint() const {
  if (!fingerprint_) fingerprint_ = model_fingerprint(model_.config, model_.weights);
  return *fingerprint_;
}

struct ProgressSink::State {
  py::object callback;
  std::mutex mutex;
  std::optional<py::error_already_set> error;
};

ProgressSink::ProgressSink(const py::object& progress) {
  if (progress.is_none()) return;
  if (!PyCallable_Check(progress.ptr()))
    throw py::type_error("progress: expected a callable progress(line: str) or None, got " +
                         std::string(py::str(py::type::handle_of(progress).attr("__name__"))));
  state_ = std::make_shared<State>();
  state_->callback = progress;
  std::shared_ptr<State> s = state_;
  set_log_sink([s](std::string_view line) {
    std::lock_guard<std::mutex> lock(s->mutex);
    py::gil_scoped_acquire gil;
    if (s->error) return;  // the callable failed once: drop further lines
    try {
      s->callback(py::str(line.data(), line.size()));
    } catch (py::error_already_set& e) {
      s->error.emplace(std::move(e));
    }
  });
}

ProgressSink::~ProgressSink() {
  if (!state_) return;
  set_log_sink({});
  // The sink's copy of state_ dies with the sink; the callback is released here, under the GIL
  // (the destructor runs with it held: after the gil_scoped_release of the call has ended).
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->callback = py::object();
}

void ProgressSink::rethrow_if_failed() {
  if (state_ && state_->error) {
    py::error_already_set e = std::move(*state_->error);
    state_->error.reset();
    throw e;
  }
}

namespace {

std::string rope_style_name(RopeStyle s) { return s == RopeStyle::HalfSplit ? "half_split" : "interleaved"; }

/// Token ids from a str (encoded with BOS when `bos`) or a sequence of ints; TypeError otherwise.
std::vector<int> token_ids(const Model& model, const py::object& tokens, const char* name, bool bos) {
  if (py::isinstance<py::str>(tokens)) return model.tokenizer->encode(tokens.cast<std::string>(), bos);
  try {
    return tokens.cast<std::vector<int>>();
  } catch (const py::cast_error&) {
    throw py::type_error(std::string(name) + ": expected a str or a sequence of int token ids (int32), got " +
                         std::string(py::str(py::type::of(tokens))));
  }
}

LogitsMode logits_mode(const std::string& s) {
  if (s == "all") return LogitsMode::All;
  if (s == "last") return LogitsMode::Last;
  if (s == "none") return LogitsMode::None;
  throw py::value_error("logits: expected 'all', 'last' or 'none', got '" + s + "'");
}

/// Runs ids through the model over `cache` (extended in place) and returns the logits of `mode`
/// as numpy ([n, V], [V] or None).
py::object run_forward(const PyModel& self, const std::vector<int>& ids, KVCache& cache, LogitsMode mode) {
  if (ids.empty()) throw py::value_error("ids: empty token list (need at least 1 id)");
  const int max_len = self.model().config.max_seq_len;
  if (max_len > 0 && cache.next_position + static_cast<long>(ids.size()) > max_len)
    log_line("kvcompact: warning: positions " + std::to_string(cache.next_position) + ".." +
             std::to_string(cache.next_position + ids.size() - 1) + " run past the model's max_seq_len " +
             std::to_string(max_len));
  std::vector<float> out;
  {
    py::gil_scoped_release release;
    ForwardOptions opt;
    opt.logits = mode;
    out = self.transformer().forward(ids, cache, opt);
  }
  const py::ssize_t V = self.model().config.vocab_size;
  if (mode == LogitsMode::None) return py::none();
  if (mode == LogitsMode::Last) return to_array(std::move(out), {V});
  return to_array(std::move(out), {static_cast<py::ssize_t>(ids.size()), V});
}

/// The cache object behind `cache` (a CompactedCache or a KVCache of this model), copied.
KVCache cache_copy(const PyModel& self, const py::object& cache) {
  if (py::isinstance<PyCache>(cache)) {
    const PyCache& c = cache.cast<const PyCache&>();
    if (c.file.model_fingerprint != self.fingerprint())
      throw py::value_error("cache: made with another model (" + c.file.model_name + ")");
    return c.file.cache;
  }
  if (py::isinstance<PyKVCache>(cache)) {
    const PyKVCache& c = cache.cast<const PyKVCache&>();
    if (c.fingerprint != self.fingerprint()) throw py::value_error("cache: made with another model");
    return c.cache;
  }
  throw py::type_error("cache: expected a kvcompact.CompactedCache, a kvcompact.KVCache or None, got " +
                       std::string(py::str(py::type::handle_of(cache).attr("__name__"))));
}

void check_head(const KVCache& c, int layer, int kv_head) {
  if (layer < 0 || layer >= c.n_layers())
    throw py::value_error("layer: " + std::to_string(layer) + " is outside [0, " + std::to_string(c.n_layers()) + ")");
  if (kv_head < 0 || kv_head >= c.n_kv_heads())
    throw py::value_error("kv_head: " + std::to_string(kv_head) + " is outside [0, " +
                          std::to_string(c.n_kv_heads()) + ")");
}

/// (keys [t, d], beta [t], values [t, d]) of one head: for a compacted head, (C1, beta, C2).
py::tuple head_arrays(const KVCache& c, int layer, int kv_head) {
  check_head(c, layer, kv_head);
  const HeadCache& h = c.head(layer, kv_head);
  const py::ssize_t t = static_cast<py::ssize_t>(h.length()), d = c.head_dim();
  return py::make_tuple(to_array(std::vector<float>(h.keys), {t, d}), to_array(std::vector<float>(h.beta), {t}),
                        to_array(std::vector<float>(h.values), {t, d}));
}

py::array_t<int32_t> head_positions(const KVCache& c, int layer, int kv_head) {
  check_head(c, layer, kv_head);
  const HeadCache& h = c.head(layer, kv_head);
  return to_array(std::vector<int32_t>(h.positions), {static_cast<py::ssize_t>(h.length())});
}

/// Entries per head, [n_layers, n_kv_heads] int64.
py::array_t<int64_t> head_lengths(const KVCache& c) {
  std::vector<int64_t> n;
  for (int l = 0; l < c.n_layers(); ++l)
    for (int h = 0; h < c.n_kv_heads(); ++h) n.push_back(static_cast<int64_t>(c.head(l, h).length()));
  return to_array(std::move(n), {c.n_layers(), c.n_kv_heads()});
}

/// The read-only views both cache classes share (shapes, RoPE layout, per-head arrays).
template <class Class, class Get>
void bind_cache_views(Class& cls, Get get) {
  cls.def_property_readonly("n_layers", [get](const typename Class::type& c) { return get(c).n_layers(); })
      .def_property_readonly("n_kv_heads", [get](const typename Class::type& c) { return get(c).n_kv_heads(); })
      .def_property_readonly("head_dim", [get](const typename Class::type& c) { return get(c).head_dim(); })
      .def_property_readonly("next_position", [get](const typename Class::type& c) { return get(c).next_position; })
      .def_property_readonly("lengths", [get](const typename Class::type& c) { return head_lengths(get(c)); })
      .def("layer_window", [get](const typename Class::type& c, int layer) {
        check_head(get(c), layer, 0);
        return get(c).layer_window(layer);
      }, py::arg("layer"))
      .def("head", [get](const typename Class::type& c, int layer, int kv_head) {
        return head_arrays(get(c), layer, kv_head);
      }, py::arg("layer"), py::arg("kv_head"))
      .def("positions", [get](const typename Class::type& c, int layer, int kv_head) {
        return head_positions(get(c), layer, kv_head);
      }, py::arg("layer"), py::arg("kv_head"));
}

PyCache compact(const PyModel& self, const py::object& context, std::optional<double> ratio,
                const std::string& method, std::uint64_t seed, std::optional<std::vector<int>> budgets,
                const py::object& progress, bool diagnostics, int chunk, const py::kwargs& options) {
  const Model& model = self.model();
  const std::vector<int> ids = token_ids(model, context, "context", true);
  if (ids.size() < 2) throw py::value_error("context: " + std::to_string(ids.size()) + " tokens (need at least 2)");
  if (ratio && budgets) throw py::value_error("give at most one of ratio and budgets");
  CompactionOptions co;
  co.method = parse_method_spec(spec_text(method, options));
  co.ratio = ratio.value_or(0.1);
  if (!(co.ratio >= 0.0 && co.ratio <= 1.0))
    throw py::value_error("ratio: must be in [0, 1], got " + std::to_string(co.ratio));
  if (budgets) {
    const std::size_t heads = static_cast<std::size_t>(model.config.n_layers) * model.config.n_kv_heads;
    if (budgets->size() != heads)
      throw py::value_error("budgets: " + std::to_string(budgets->size()) + " entries, the model has " +
                            std::to_string(heads) + " KV heads (n_layers x n_kv_heads, layer-major)");
    for (std::size_t i = 0; i < heads; ++i)
      if ((*budgets)[i] < 0 || (*budgets)[i] > static_cast<int>(ids.size()))
        throw py::value_error("budgets: entry " + std::to_string(i) + " = " + std::to_string((*budgets)[i]) +
                              " is outside [0, T] with T = " + std::to_string(ids.size()));
    co.head_budgets = *budgets;
    // The ratio recorded with the cache: the kept share of the context's entries over the heads.
    long long kept = 0;
    for (int b : *budgets) kept += b;
    co.ratio = static_cast<double>(kept) / (static_cast<double>(heads) * static_cast<double>(ids.size()));
  }
  co.seed = seed;
  check_chunk_size(chunk);
  co.chunk_size = chunk;
  PyCache out;
  ProgressSink sink(progress);
  {
    py::gil_scoped_release release;
    const ContextPrefill prefill = prefill_for_compaction(model, ids, co);
    CompactedContext c = compact_context(model, ids, prefill, co);
    if (diagnostics) out.diagnostics_json = compaction_diagnostics(prefill, c.file.cache).dump();
    out.file = std::move(c.file);
    out.full_entries = c.full_entries;
    out.full_bytes = c.full_bytes;
  }
  sink.rethrow_if_failed();
  return out;
}

py::dict generate(const PyModel& self, const std::string& prompt, int steps, float temperature, float top_p,
                  std::uint64_t seed, const PyCache* cache) {
  const Model& model = self.model();
  if (cache != nullptr && cache->file.model_fingerprint != self.fingerprint())
    throw py::value_error("cache: made with another model (" + cache->file.model_name + ")");
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    throw py::value_error("temperature: must be finite and >= 0, got " + std::to_string(temperature));
  if (!(top_p > 0.0f && top_p <= 1.0f)) throw py::value_error("top_p: must be in (0, 1], got " + std::to_string(top_p));
  if (cache != nullptr && cache->file.context_tokens.empty())
    throw py::value_error("cache: holds no context tokens; there is nothing to continue");
  GenerationResult r;
  {
    py::gil_scoped_release release;
    Sampler sampler(model.tokenizer->vocab_size(), temperature, top_p, seed);
    if (cache == nullptr) {
      r = kvcompact::generate(self.transformer(), *model.tokenizer, prompt, steps, sampler);
    } else {
      KVCache kv = cache->file.cache;  // generation appends to it; the Python object stays as it was
      ContinueOptions copt;
      copt.max_new_tokens = steps;
      r = generate_from_cache(self.transformer(), *model.tokenizer, kv, cache->file.last_logits,
                              cache->file.context_tokens.back(), prompt, sampler, copt);
    }
  }
  py::dict d;
  d["text"] = r.text;
  d["prompt_tokens"] = r.prompt_tokens;
  d["generated"] = r.generated;
  d["stopped"] = r.stopped;
  return d;
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<PyCache> compacted(m, "CompactedCache", "A compacted context cache (.kvc); see kvcompact/_kvcompact.pyi.");
  compacted.def_property_readonly("method", [](const PyCache& c) { return c.file.method; })
      .def_property_readonly("ratio", [](const PyCache& c) { return c.file.ratio; })
      .def_property_readonly("context_tokens", [](const PyCache& c) {
        return std::vector<int>(c.file.context_tokens.begin(), c.file.context_tokens.end());
      })
      .def_property_readonly("kept_entries", [](const PyCache& c) { return c.file.cache.total_entries(); })
      .def_property_readonly("cache_bytes", [](const PyCache& c) { return c.file.cache.bytes(); })
      .def_property_readonly("full_entries", [](const PyCache& c) { return c.full_entries; })
      .def_property_readonly("full_cache_bytes", [](const PyCache& c) { return c.full_bytes; })
      .def_property_readonly("rope_style", [](const PyCache& c) { return rope_style_name(c.file.config.rope_style); })
      .def_property_readonly("diagnostics", [](const PyCache& c) -> py::object {
        if (c.diagnostics_json.empty()) return py::none();
        return py::module_::import("json").attr("loads")(c.diagnostics_json);
      })
      .def_property_readonly("last_logits", [](const PyCache& c) {
        return to_array(std::vector<float>(c.file.last_logits), {static_cast<py::ssize_t>(c.file.last_logits.size())});
      })
      .def("kv_cache", [](const PyCache& c) {
        PyKVCache out{c.file.cache, c.file.model_fingerprint, c.file.config.rope_style};
        return out;
      })
      .def("save", [](const PyCache& c, const std::string& path) {
        if (path.empty() || path.find('\0') != std::string::npos)
          throw py::value_error("path: empty or holding a NUL character");
        write_kvc_file(path, c.file);
      }, py::arg("path"))
      .def("__repr__", [](const PyCache& c) {
        return "kvcompact.CompactedCache(method='" + c.file.method + "', ratio=" + std::to_string(c.file.ratio) +
               ", context_tokens=" + std::to_string(c.file.context_tokens.size()) +
               ", kept_entries=" + std::to_string(c.file.cache.total_entries()) + ")";
      });
  bind_cache_views(compacted, [](const PyCache& c) -> const KVCache& { return c.file.cache; });

  py::class_<PyKVCache> kv(m, "KVCache", "A mutable KV cache that Model.forward extends; see kvcompact/_kvcompact.pyi.");
  kv.def_property_readonly("rope_style", [](const PyKVCache& c) { return rope_style_name(c.rope_style); })
      .def_property_readonly("entries", [](const PyKVCache& c) { return c.cache.total_entries(); })
      .def_property_readonly("bytes", [](const PyKVCache& c) { return c.cache.bytes(); })
      .def("copy", [](const PyKVCache& c) {
        PyKVCache out{c.cache, c.fingerprint, c.rope_style};
        return out;
      })
      .def("__repr__", [](const PyKVCache& c) {
        return "kvcompact.KVCache(next_position=" + std::to_string(c.cache.next_position) +
               ", entries=" + std::to_string(c.cache.total_entries()) + ")";
      });
  bind_cache_views(kv, [](const PyKVCache& c) -> const KVCache& { return c.cache; });

  py::class_<PyModel> cls(m, "Model", "A loaded model; see kvcompact/_kvcompact.pyi.");
  cls.def(py::init<const std::string&, const std::string&>(), py::arg("path"), py::arg("tokenizer") = "")
      .def_property_readonly("config", [](const PyModel& self) {
        // The library's summary (the same object as `kvcompact info --json`), plus adds_bos.
        nlohmann::json j = model_summary(self.model());
        j["adds_bos"] = self.model().tokenizer->adds_bos();
        py::dict d = py::module_::import("json").attr("loads")(j.dump());
        return d;
      })
      .def_property_readonly("path", &PyModel::path)
      .def("tokenize", [](const PyModel& self, const std::string& text, bool add_bos) {
        return self.model().tokenizer->encode(text, add_bos);
      }, py::arg("text"), py::arg("add_bos") = true)
      .def("detokenize", [](const PyModel& self, const std::vector<int>& ids) {
        return self.model().tokenizer->decode(ids);
      }, py::arg("ids"))
      .def("logits", [](const PyModel& self, const std::vector<int>& ids, bool last, const py::object& cache) {
        KVCache kv = cache.is_none() ? self.transformer().make_cache() : cache_copy(self, cache);
        return run_forward(self, ids, kv, last ? LogitsMode::Last : LogitsMode::All);
      }, py::arg("ids"), py::arg("last") = false, py::arg("cache") = py::none())
      .def("new_cache", [](const PyModel& self) {
        PyKVCache out{self.transformer().make_cache(), self.fingerprint(), self.model().config.rope_style};
        return out;
      })
      .def("forward", [](const PyModel& self, const std::vector<int>& ids, PyKVCache& cache, const std::string& logits) {
        if (cache.fingerprint != self.fingerprint()) throw py::value_error("cache: made with another model");
        const LogitsMode mode = logits_mode(logits);
        if (cache.busy->exchange(true))
          throw py::value_error("cache: another thread is running a forward over this KVCache (give each thread its "
                                "own cache, e.g. cache.copy())");
        struct Release {
          std::atomic<bool>& flag;
          ~Release() { flag = false; }
        } release{*cache.busy};
        return run_forward(self, ids, cache.cache, mode);
      }, py::arg("ids"), py::arg("cache"), py::arg("logits") = "last")
      .def("forward_batch", [](const PyModel& self, const std::vector<std::vector<int>>& ids, std::vector<PyKVCache*> caches,
                               const std::string& logits) {
        if (ids.size() != caches.size())
          throw py::value_error("forward_batch: " + std::to_string(ids.size()) + " id lists for " +
                                std::to_string(caches.size()) + " caches (one cache per sequence)");
        if (ids.empty()) throw py::value_error("forward_batch: no sequences");
        const LogitsMode mode = logits_mode(logits);
        std::vector<BatchSequence> seqs(ids.size());
        for (std::size_t s = 0; s < ids.size(); ++s) {
          if (caches[s] == nullptr) throw py::value_error("forward_batch: cache " + std::to_string(s) + " is None");
          if (caches[s]->fingerprint != self.fingerprint())
            throw py::value_error("forward_batch: cache " + std::to_string(s) + " was made with another model");
          if (ids[s].empty()) throw py::value_error("forward_batch: sequence " + std::to_string(s) + " has no ids");
          seqs[s].tokens = ids[s];
          seqs[s].cache = &caches[s]->cache;
          seqs[s].logit_rows = logit_rows_for(mode, static_cast<int>(ids[s].size()));
        }
        // Claim every cache (distinct ones: forward_batch refuses a shared cache in its own words).
        std::vector<std::atomic<bool>*> held;
        struct Release {
          std::vector<std::atomic<bool>*>& flags;
          ~Release() {
            for (auto* f : flags) *f = false;
          }
        } release{held};
        for (PyKVCache* c : caches) {
          if (std::find(held.begin(), held.end(), c->busy.get()) != held.end()) continue;
          if (c->busy->exchange(true))
            throw py::value_error("cache: another thread is running a forward over this KVCache (give each thread its "
                                  "own cache, e.g. cache.copy())");
          held.push_back(c->busy.get());
        }
        std::vector<float> out;
        {
          py::gil_scoped_release unlocked;
          out = self.transformer().forward_batch(seqs);
        }
        py::list result;
        const py::ssize_t V = self.model().config.vocab_size;
        std::size_t offset = 0;
        for (const BatchSequence& sq : seqs) {
          if (mode == LogitsMode::None) {
            result.append(py::none());
            continue;
          }
          const std::size_t rows = sq.logit_rows.size();
          std::vector<float> part(out.begin() + static_cast<std::ptrdiff_t>(offset * V),
                                  out.begin() + static_cast<std::ptrdiff_t>((offset + rows) * V));
          offset += rows;
          if (mode == LogitsMode::Last)
            result.append(to_array(std::move(part), {V}));
          else
            result.append(to_array(std::move(part), {static_cast<py::ssize_t>(rows), V}));
        }
        return result;
      }, py::arg("ids"), py::arg("caches"), py::arg("logits") = "last")
      .def("nll", [](const PyModel& self, const std::vector<int>& ids) {
        if (ids.size() < 2) throw py::value_error("ids: " + std::to_string(ids.size()) + " ids (need at least 2)");
        py::gil_scoped_release release;
        return score_tokens(self.transformer(), ids).mean_nll();
      }, py::arg("ids"))
      .def("generate", &generate, py::arg("prompt") = "", py::arg("steps") = 64, py::arg("temperature") = 0.0f,
           py::arg("top_p") = 0.9f, py::arg("seed") = 0, py::arg("cache") = nullptr)
      .def("compact", &compact, py::arg("context"), py::arg("ratio") = py::none(), py::arg("method") = "am",
           py::arg("seed") = 0, py::arg("budgets") = py::none(), py::arg("progress") = py::none(),
           py::arg("diagnostics") = false, py::arg("chunk") = 0)
      .def("load_cache", [](const PyModel& self, const std::string& path) {
        PyCache c;
        c.file = read_kvc_file(path);
        check_kvc_model(c.file, path, self.model().config, self.fingerprint(), self.model().path);
        return c;
      }, py::arg("path"))
      .def("__repr__", [](const PyModel& self) { return "kvcompact.Model('" + self.path() + "')"; });
  bind_analysis(m, cls);
}

}  // namespace kvcompact::py_bind

// Python binding of a loaded model (model/model.h load_model) with its forward pass
// (model/transformer.h), tokenizer, teacher-forced NLL (analysis/perplexity.h), generation
// (model/generate.h), and compacted context caches (analysis/compact_context.h, .kvc files of
// loaders/kvc_file.h) that generation continues from (model/generate_from_cache.h).
#include <pybind11/stl.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/compact_context.h"
#include "analysis/perplexity.h"
#include "arrays.h"
#include "compaction/compact_cache.h"
#include "core/model_fingerprint.h"
#include "loaders/kvc_file.h"
#include "model/generate.h"
#include "model/generate_from_cache.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/model_summary.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact::py_bind {
namespace {

/// A compacted context cache: the contents of a .kvc file (docs/kvc_format.md).
struct PyCache {
  KvcFile file;
  std::size_t full_entries = 0, full_bytes = 0;  // 0 when loaded from a file
};

/// A model and its Transformer (which refers into the model, so both live here, never moved).
class PyModel {
 public:
  PyModel(const std::string& path, const std::string& tokenizer) {
    {
      py::gil_scoped_release release;
      model_ = load_model(path, tokenizer);
    }
    transformer_ = std::make_unique<Transformer>(model_.config, model_.weights);
  }

  py::dict config() const {
    // The library's summary (the same object as `kvcompact info --json`), plus adds_bos.
    nlohmann::json j = model_summary(model_);
    j["adds_bos"] = model_.tokenizer->adds_bos();
    py::dict d = py::module_::import("json").attr("loads")(j.dump());
    return d;
  }

  std::vector<int> tokenize(const std::string& text, bool add_bos) const {
    return model_.tokenizer->encode(text, add_bos);
  }
  std::string detokenize(const std::vector<int>& ids) const { return model_.tokenizer->decode(ids); }

  py::array_t<float> logits(const std::vector<int>& ids, bool last) const {
    if (ids.empty()) throw py::value_error("ids: empty token list (need at least 1 id)");
    std::vector<float> out;
    {
      py::gil_scoped_release release;
      KVCache cache = transformer_->make_cache();
      ForwardOptions opt;
      opt.logits = last ? LogitsMode::Last : LogitsMode::All;
      out = transformer_->forward(ids, cache, opt);
    }
    const py::ssize_t V = model_.config.vocab_size;
    if (last) return to_array(std::move(out), {V});
    return to_array(std::move(out), {static_cast<py::ssize_t>(ids.size()), V});
  }

  double nll(const std::vector<int>& ids) const {
    if (ids.size() < 2) throw py::value_error("ids: " + std::to_string(ids.size()) + " ids (need at least 2)");
    py::gil_scoped_release release;
    return score_tokens(*transformer_, ids).mean_nll();
  }

  PyCache compact(const py::object& context, double ratio, const std::string& method, std::uint64_t seed,
                  const py::kwargs& options) const {
    std::vector<int> ids;
    if (py::isinstance<py::str>(context)) {
      ids = model_.tokenizer->encode(context.cast<std::string>(), true);
    } else {
      try {
        ids = context.cast<std::vector<int>>();
      } catch (const py::cast_error&) {
        throw py::type_error("context: expected a str or a sequence of int token ids (int32), got " +
                             std::string(py::str(py::type::of(context))));
      }
    }
    if (!(ratio >= 0.0 && ratio <= 1.0)) throw py::value_error("ratio: must be in [0, 1], got " + std::to_string(ratio));
    CompactionOptions co;
    co.method = parse_method_spec(spec_text(method, options));
    co.ratio = ratio;
    co.seed = seed;
    PyCache out;
    {
      py::gil_scoped_release release;
      const ContextPrefill prefill = prefill_for_compaction(model_, ids, co);
      CompactedContext c = compact_context(model_, ids, prefill, co);
      out.file = std::move(c.file);
      out.full_entries = c.full_entries;
      out.full_bytes = c.full_bytes;
    }
    return out;
  }

  PyCache load_cache(const std::string& path) const {
    PyCache c;
    c.file = read_kvc_file(path);
    check_kvc_model(c.file, path, model_.config, fingerprint(), model_.path);
    return c;
  }

  py::dict generate(const std::string& prompt, int steps, float temperature, float top_p, std::uint64_t seed,
                    const PyCache* cache) const {
    if (cache != nullptr && cache->file.model_fingerprint != fingerprint())
      throw py::value_error("cache: made with another model (" + cache->file.model_name + ")");
    if (!(temperature >= 0.0f) || !std::isfinite(temperature))
      throw py::value_error("temperature: must be finite and >= 0, got " + std::to_string(temperature));
    if (!(top_p > 0.0f && top_p <= 1.0f)) throw py::value_error("top_p: must be in (0, 1], got " + std::to_string(top_p));
    if (cache != nullptr && cache->file.context_tokens.empty())
      throw py::value_error("cache: holds no context tokens; there is nothing to continue");
    GenerationResult r;
    {
      py::gil_scoped_release release;
      Sampler sampler(model_.tokenizer->vocab_size(), temperature, top_p, seed);
      if (cache == nullptr) {
        r = kvcompact::generate(*transformer_, *model_.tokenizer, prompt, steps, sampler);
      } else {
        KVCache kv = cache->file.cache;  // generation appends to it; the Python object stays as it was
        ContinueOptions copt;
        copt.max_new_tokens = steps;
        r = generate_from_cache(*transformer_, *model_.tokenizer, kv, cache->file.last_logits,
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

  const std::string& path() const { return model_.path; }

 private:
  Model model_;
  std::unique_ptr<Transformer> transformer_;
  mutable std::optional<std::uint64_t> fingerprint_;  // model_fingerprint hashes the weights: once, on first use

  std::uint64_t fingerprint() const {
    if (!fingerprint_) fingerprint_ = model_fingerprint(model_.config, model_.weights);
    return *fingerprint_;
  }
};

}  // namespace

void bind_model(py::module_& m) {
  py::class_<PyCache>(m, "CompactedCache", "A compacted context cache (.kvc); see kvcompact/_kvcompact.pyi.")
      .def_property_readonly("method", [](const PyCache& c) { return c.file.method; })
      .def_property_readonly("ratio", [](const PyCache& c) { return c.file.ratio; })
      .def_property_readonly("context_tokens", [](const PyCache& c) {
        return std::vector<int>(c.file.context_tokens.begin(), c.file.context_tokens.end());
      })
      .def_property_readonly("kept_entries", [](const PyCache& c) { return c.file.cache.total_entries(); })
      .def_property_readonly("cache_bytes", [](const PyCache& c) { return c.file.cache.bytes(); })
      .def_property_readonly("full_entries", [](const PyCache& c) { return c.full_entries; })
      .def_property_readonly("full_cache_bytes", [](const PyCache& c) { return c.full_bytes; })
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
  py::class_<PyModel>(m, "Model", "A loaded model; see kvcompact/_kvcompact.pyi.")
      .def(py::init<const std::string&, const std::string&>(), py::arg("path"), py::arg("tokenizer") = "")
      .def_property_readonly("config", &PyModel::config)
      .def_property_readonly("path", &PyModel::path)
      .def("tokenize", &PyModel::tokenize, py::arg("text"), py::arg("add_bos") = true)
      .def("detokenize", &PyModel::detokenize, py::arg("ids"))
      .def("logits", &PyModel::logits, py::arg("ids"), py::arg("last") = false)
      .def("nll", &PyModel::nll, py::arg("ids"))
      .def("generate", &PyModel::generate, py::arg("prompt") = "", py::arg("steps") = 64,
           py::arg("temperature") = 0.0f, py::arg("top_p") = 0.9f, py::arg("seed") = 0,
           py::arg("cache") = nullptr)
      .def("compact", &PyModel::compact, py::arg("context"), py::arg("ratio") = 0.1, py::arg("method") = "am",
           py::arg("seed") = 0)
      .def("load_cache", &PyModel::load_cache, py::arg("path"))
      .def("__repr__", [](const PyModel& self) { return "kvcompact.Model('" + self.path() + "')"; });
}

}  // namespace kvcompact::py_bind

// Python binding of a loaded model (model/model.h load_model) with its forward pass
// (model/transformer.h), tokenizer, teacher-forced NLL (analysis/perplexity.h) and generation
// (model/generate.h).
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "analysis/perplexity.h"
#include "arrays.h"
#include "model/generate.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/model_summary.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact::py_bind {
namespace {

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

  py::dict generate(const std::string& prompt, int steps, float temperature, float top_p, std::uint64_t seed) const {
    GenerationResult r;
    {
      py::gil_scoped_release release;
      Sampler sampler(model_.tokenizer->vocab_size(), temperature, top_p, seed);
      r = kvcompact::generate(*transformer_, *model_.tokenizer, prompt, steps, sampler);
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
};

}  // namespace

void bind_model(py::module_& m) {
  py::class_<PyModel>(m, "Model", "A loaded model; see kvcompact/_kvcompact.pyi.")
      .def(py::init<const std::string&, const std::string&>(), py::arg("path"), py::arg("tokenizer") = "")
      .def_property_readonly("config", &PyModel::config)
      .def_property_readonly("path", &PyModel::path)
      .def("tokenize", &PyModel::tokenize, py::arg("text"), py::arg("add_bos") = true)
      .def("detokenize", &PyModel::detokenize, py::arg("ids"))
      .def("logits", &PyModel::logits, py::arg("ids"), py::arg("last") = false)
      .def("nll", &PyModel::nll, py::arg("ids"))
      .def("generate", &PyModel::generate, py::arg("prompt") = "", py::arg("steps") = 64,
           py::arg("temperature") = 0.0f, py::arg("top_p") = 0.9f, py::arg("seed") = 0)
      .def("__repr__", [](const PyModel& self) { return "kvcompact.Model('" + self.path() + "')"; });
}

}  // namespace kvcompact::py_bind

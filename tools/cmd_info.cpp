// `kvcompact info` and `kvcompact tokenize`.
#include <fmt/format.h>

#include <iostream>

#include "cli_model.h"
#include "core/error.h"
#include "io/hf_tokenizer.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/model_summary.h"

namespace kvcompact::cli {
Runner register_info(CLI::App& app, CommonOptions& common) {
  auto* cmd = app.add_subcommand("info", "architecture, parameter count, tokenizer size");
  auto m = std::make_shared<ModelOptions>();
  add_model_options(cmd, *m);
  add_common_options(cmd, common);
  return [m, &common] {
    Model model = load_model(m->model, m->tokenizer);
    const ModelConfig& c = model.config;
    const long long params = parameter_count(c);
    if (common.json) {
      print_json(model_summary(model));
      return 0;
    }
    fmt::print("model         {}\n", model.path);
    fmt::print("architecture  {} ({} layers, dim {}, hidden {}, {} query heads, {} KV heads, head_dim {})\n",
               c.architecture, c.n_layers, c.dim, c.hidden_dim, c.n_heads, c.n_kv_heads, c.head_dim);
    fmt::print("parameters    {}\n", params);
    fmt::print("vocabulary    {} tokens (bos {}, eos {}), classifier {}\n", model.tokenizer->vocab_size(),
               model.tokenizer->bos_id(), model.tokenizer->eos_id(), c.tied_classifier ? "tied" : "separate");
    fmt::print("rope          theta {}, norm eps {}, max_seq_len {}\n", c.rope_theta, c.norm_eps, c.max_seq_len);
    fmt::print("kv cache      {} bytes per token (float32 keys + values, all layers)\n",
               2LL * c.n_layers * c.kv_dim() * 4);
    return 0;
  };
}

Runner register_tokenize(CLI::App& app, CommonOptions& common) {
  auto* cmd = app.add_subcommand("tokenize", "token ids and pieces of a text (BOS included)");
  auto m = std::make_shared<ModelOptions>();
  auto text = std::make_shared<std::string>();
  // --model is optional here: a Hugging Face tokenizer.json (--tokenizer) needs no model.
  cmd->add_option("--model", m->model, "model file: llama2.c .bin, .gguf or a Hugging Face checkpoint folder");
  cmd->add_option("--tokenizer", m->tokenizer,
                  "llama2.c tokenizer.bin, or a Hugging Face tokenizer.json (then --model may be left out)");
  cmd->add_option("--text", *text, "text to encode")->required();
  add_common_options(cmd, common);
  return [m, text, &common] {
    std::unique_ptr<Tokenizer> own;
    Model model;
    const bool hf_json = m->tokenizer.size() >= 5 && m->tokenizer.compare(m->tokenizer.size() - 5, 5, ".json") == 0;
    if (m->model.empty()) {
      if (!hf_json) throw Error("--model: required unless --tokenizer names a tokenizer.json");
      own = load_hf_tokenizer(m->tokenizer);
    } else {
      model = load_model(m->model, m->tokenizer);
    }
    const Tokenizer& tok = own ? *own : *model.tokenizer;
    std::vector<int> ids = tok.encode(*text, /*add_bos=*/true);
    if (common.json) {
      nlohmann::json pieces = nlohmann::json::array();
      for (int id : ids) pieces.push_back(tok.piece(id));
      print_json({{"ids", ids}, {"pieces", pieces}, {"count", ids.size()}});
      return 0;
    }
    fmt::print("{} tokens\n", ids.size());
    for (int id : ids) fmt::print("{:>6}  {:?}\n", id, tok.piece(id));
    return 0;
  };
}

}  // namespace kvcompact::cli

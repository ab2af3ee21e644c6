#include "model/model_summary.h"

namespace kvcompact {

nlohmann::json model_summary(const Model& model) {
  const ModelConfig& c = model.config;
  return {{"model", model.path},
          {"architecture", c.architecture},
          {"dim", c.dim},
          {"hidden_dim", c.hidden_dim},
          {"n_layers", c.n_layers},
          {"n_heads", c.n_heads},
          {"n_kv_heads", c.n_kv_heads},
          {"head_dim", c.head_dim},
          {"vocab_size", c.vocab_size},
          {"max_seq_len", c.max_seq_len},
          {"rope_theta", c.rope_theta},
          {"norm_eps", c.norm_eps},
          {"tied_classifier", c.tied_classifier},
          {"parameters", parameter_count(c)},
          {"tokenizer_vocab_size", model.tokenizer->vocab_size()},
          {"bos_id", model.tokenizer->bos_id()},
          {"eos_id", model.tokenizer->eos_id()}};
}

}  // namespace kvcompact

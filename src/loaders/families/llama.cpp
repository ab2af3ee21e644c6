// Llama and Mistral: config.json and GGUF `llama` metadata -> ModelConfig.
#include <fmt/format.h>

#include "core/error.h"
#include "loaders/families/families.h"

namespace kvcompact {

void hf_llama_family(const HfConfigReader& r, ModelConfig& c) {
  hf_check_activation(r, "silu");
  hf_uniform_rope(r, c);
  c.tied_classifier = r.bool_or("tie_word_embeddings", false);
  const bool attention_bias = r.bool_or("attention_bias", false);
  c.attention_qkv_bias = attention_bias;
  c.attention_out_bias = attention_bias;
  c.qk_norm = false;
  if (r.present("layer_types"))
    r.fail("field layer_types is unsupported for Llama/Mistral (transformers ignores it there too)");
  // Mistral: sliding_window (when not null) applies to every layer (transformers 5.2 uses
  // create_sliding_window_causal_mask for the whole model).
  if (c.architecture == "mistral" && r.present("sliding_window")) {
    const int w = hf_sliding_window(r);
    for (int l = 0; l < c.n_layers; ++l) set_sliding(c, l, w);
  } else if (c.architecture == "llama" && r.present("sliding_window")) {
    r.fail("field sliding_window is set but Llama has no sliding-window attention");
  }
}

void gguf_llama_family(const GgufFile& f, ModelConfig& c) {
  c.rope_theta = static_cast<float>(f.get_float_or("llama.rope.freq_base", 10000.0));
  c.rope_scaling = gguf_rope_scaling(f, "llama", c.max_seq_len);
  // GGUF llama (ggml ROPE_TYPE_NORM) pairs (2i, 2i+1): convert_hf_to_gguf permutes Q/K rows.
  c.rope_style = RopeStyle::Interleaved;
  if (f.has("llama.attention.sliding_window"))
    throw Error(fmt::format("{}: metadata llama.attention.sliding_window is not supported for llama", f.path()));
}

}  // namespace kvcompact

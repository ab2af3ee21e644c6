// Qwen2 and Qwen3: config.json and GGUF `qwen2` / `qwen3` metadata -> ModelConfig.
#include <fmt/format.h>

#include "core/error.h"
#include "loaders/families/families.h"

namespace kvcompact {

void hf_qwen_family(const HfConfigReader& r, ModelConfig& c) {
  hf_check_activation(r, "silu");
  hf_uniform_rope(r, c);
  c.tied_classifier = r.bool_or("tie_word_embeddings", false);
  if (c.architecture == "qwen2") {
    c.attention_qkv_bias = true;
    c.attention_out_bias = false;
  } else {
    const bool attention_bias = r.bool_or("attention_bias", false);
    c.attention_qkv_bias = attention_bias;
    c.attention_out_bias = attention_bias;
    c.qk_norm = true;
  }
  // transformers 5.2 Qwen2Config/Qwen3Config: sliding_window = None unless use_sliding_window;
  // layer_types (given) or layer i slides when i >= max_window_layers (default 28).
  const bool use = r.bool_or("use_sliding_window", false);
  if (r.present("layer_types")) {
    const nlohmann::json& t = r.j["layer_types"];
    if (!t.is_array() || static_cast<int>(t.size()) != c.n_layers)
      r.fail(fmt::format("field layer_types is not a list of {} layer types", c.n_layers));
    int w = 0;
    for (int l = 0; l < c.n_layers; ++l) {
      if (!t[l].is_string()) r.fail("field layer_types holds a non-string");
      const std::string k = t[l].get<std::string>();
      if (k == "sliding_attention") {
        if (!use) continue;  // sliding_window is None: transformers attends globally
        if (w == 0) w = hf_sliding_window(r);
        set_sliding(c, l, w);
      } else if (k != "full_attention") {
        r.fail(fmt::format("field layer_types[{}] = '{}' is unsupported (full_attention, sliding_attention)", l, k));
      }
    }
  } else if (use) {
    const int w = hf_sliding_window(r);
    const int first = r.present("max_window_layers") ? r.positive_int("max_window_layers") : 28;
    for (int l = first; l < c.n_layers; ++l) set_sliding(c, l, w);
  }
}

void gguf_qwen_family(const GgufFile& f, ModelConfig& c) {
  const std::string& a = c.architecture;
  c.rope_theta = static_cast<float>(f.get_float_or(a + ".rope.freq_base", 10000.0));
  c.rope_scaling = gguf_rope_scaling(f, a, c.max_seq_len);
  c.rope_style = RopeStyle::HalfSplit;  // ggml ROPE_TYPE_NEOX
  c.attention_qkv_bias = a == "qwen2";
  c.qk_norm = a == "qwen3";
  if (f.has(a + ".attention.sliding_window"))
    throw Error(fmt::format("{}: metadata {}.attention.sliding_window is not supported (llama.cpp's {} has no "
                            "sliding-window layers)", f.path(), a, a));
}

}  // namespace kvcompact

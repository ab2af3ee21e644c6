#include "core/model_fingerprint.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace kvcompact {

uint64_t fnv1a64(const void* data, std::size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnv64Prime;
  }
  return h;
}

namespace {

uint64_t hash_i32(uint64_t h, int32_t v) { return fnv1a64(&v, sizeof v, h); }

uint64_t hash_array(uint64_t h, const std::vector<float>& a) {
  const uint64_t n = a.size();
  h = fnv1a64(&n, sizeof n, h);
  return fnv1a64(a.data(), a.size() * sizeof(float), h);
}

// A weight matrix: element count then its stored bytes (for float32 exactly hash_array of the
// values; other storage types also hash the type name first).
uint64_t hash_array(uint64_t h, const WeightMatrix& a) {
  if (a.type() != WeightType::F32) {
    const char* t = weight_type_name(a.type());
    h = fnv1a64(t, std::strlen(t), h);
  }
  const uint64_t n = a.size();
  h = fnv1a64(&n, sizeof n, h);
  return fnv1a64(a.bytes(), a.byte_size(), h);
}

}  // namespace

uint64_t model_fingerprint(const ModelConfig& c, const ModelWeights& w) {
  uint64_t h = kFnv64Offset;
  for (int v : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size})
    h = hash_i32(h, v);
  h = fnv1a64(&c.rope_theta, sizeof(float), h);
  h = fnv1a64(&c.norm_eps, sizeof(float), h);
  const unsigned char flags[2] = {static_cast<unsigned char>(c.rope_style == RopeStyle::HalfSplit),
                                  static_cast<unsigned char>(c.tied_classifier)};
  h = fnv1a64(flags, 2, h);
  h = hash_array(h, w.token_embedding);
  for (const LayerWeights& L : w.layers) {
    h = hash_array(h, L.attn_norm);
    for (const WeightMatrix* a : {&L.wq, &L.wk, &L.wv, &L.wo}) h = hash_array(h, *a);
    h = hash_array(h, L.ffn_norm);
    for (const WeightMatrix* a : {&L.w_gate, &L.w_down, &L.w_up}) h = hash_array(h, *a);
  }
  h = hash_array(h, w.final_norm);
  if (!w.classifier.empty()) h = hash_array(h, w.classifier);
  // Features added later are hashed only when used, so earlier models keep their fingerprints.
  for (const LayerWeights& L : w.layers)
    if (!L.attn_post_norm.empty() || !L.ffn_post_norm.empty()) {
      h = hash_array(h, L.attn_post_norm);
      h = hash_array(h, L.ffn_post_norm);
    }
  if (!c.rope_scaling.freq_factors.empty()) h = hash_array(h, c.rope_scaling.freq_factors);
  if (!c.layers.empty() || c.embedding_scale != 1.0f || c.final_logit_softcap != 0.0f) {
    h = fnv1a64(&c.embedding_scale, sizeof(float), h);
    h = fnv1a64(&c.final_logit_softcap, sizeof(float), h);
    for (int l = 0; l < c.n_layers; ++l) {
      const LayerSpec& s = c.layer(l);
      const RopeSpec r = c.layer_rope(l);
      h = hash_i32(h, s.window);
      h = hash_i32(h, static_cast<int32_t>(s.norm) * 16 + static_cast<int32_t>(s.mlp) * 4 +
                          static_cast<int32_t>(r.scaling.type));
      h = fnv1a64(&s.attention_scale, sizeof(float), h);
      h = fnv1a64(&r.theta, sizeof(float), h);
      h = fnv1a64(&r.scaling.factor, sizeof(float), h);
    }
  }
  return h;
}

std::string fingerprint_hex(uint64_t fingerprint) { return fmt::format("0x{:016x}", fingerprint); }

}  // namespace kvcompact

// Typed access to a Hugging Face config.json object with one-line errors naming the file and the
// field; shared by loaders/hf_config.cpp and the per-family mappings in loaders/families/.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/config.h"

namespace kvcompact {

/// A config.json object `j` read from file `name`. Every failure throws Error("<name>: ...").
struct HfConfigReader {
  const nlohmann::json& j;
  const std::string& name;

  [[noreturn]] void fail(const std::string& msg) const { throw Error(fmt::format("{}: {}", name, msg)); }
  bool present(const char* key) const { return j.contains(key) && !j[key].is_null(); }
  int positive_int(const char* key) const {
    if (!present(key)) fail(fmt::format("field {} is missing", key));
    return positive_int_of(j[key], key);
  }
  int positive_int_of(const nlohmann::json& v, const char* key) const {
    if (!v.is_number_integer()) fail(fmt::format("field {} is not an integer", key));
    const std::int64_t x = v.get<std::int64_t>();
    if (x <= 0 || x > INT32_MAX) fail(fmt::format("field {} = {} is not a positive int32", key, x));
    return static_cast<int>(x);
  }
  int positive_int_or(const char* key, int fallback) const { return present(key) ? positive_int(key) : fallback; }
  double number_or(const nlohmann::json& obj, const char* key, double fallback) const {
    if (!obj.contains(key) || obj[key].is_null()) return fallback;
    if (!obj[key].is_number()) fail(fmt::format("field {} is not a number", key));
    return obj[key].get<double>();
  }
  bool bool_or(const char* key, bool fallback) const {
    if (!present(key)) return fallback;
    if (!j[key].is_boolean()) fail(fmt::format("field {} is not true/false", key));
    return j[key].get<bool>();
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!present(key)) return fallback;
    if (!j[key].is_string()) fail(fmt::format("field {} is not a string", key));
    return j[key].get<std::string>();
  }
};

/// One RoPE parameter object (`rope_scaling`, `rope_parameters` or one layer type's entry of it),
/// read as transformers 5.2 does: "rope_type" (or "type") default | linear | llama3 | yarn
/// (factor; llama3: low_freq_factor, high_freq_factor; llama3/yarn: original_max_position_embeddings,
/// default `max_position_embeddings`; yarn: beta_fast 32, beta_slow 1, truncate true,
/// attention_factor, else from mscale/mscale_all_dim, else 0.1 ln(factor) + 1). `where` names the
/// field in errors. Throws Error for dynamic, longrope or another type (named: not implemented),
/// a missing or non-positive factor, or bad llama3 frequency factors.
RopeScaling hf_rope_scaling(const HfConfigReader& r, const nlohmann::json& obj, const std::string& where,
                            int max_position_embeddings);

}  // namespace kvcompact

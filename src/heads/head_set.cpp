#include "heads/head_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace kvcompact {

std::string query_head_name(const QueryHeadId& head) {
  return fmt::format("L{}Q{}", head.layer, head.head);
}

std::vector<QueryHeadId> query_heads_of_kv_head(const ModelConfig& config, int layer, int kv_head) {
  const int group = config.n_heads / config.n_kv_heads;
  std::vector<QueryHeadId> out;
  for (int i = 0; i < group; ++i) out.push_back({layer, kv_head * group + i});
  return out;
}

std::vector<QueryHeadId> all_query_heads(const ModelConfig& config) {
  std::vector<QueryHeadId> out;
  for (int l = 0; l < config.n_layers; ++l)
    for (int h = 0; h < config.n_heads; ++h) out.push_back({l, h});
  return out;
}

namespace {

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// Parses digits at s[pos..] into value; false when there are none or the number is too long.
bool parse_index(const std::string& s, std::size_t& pos, int& value) {
  const std::size_t start = pos;
  long long v = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
    v = v * 10 + (s[pos] - '0');
    if (v > 1000000000) return false;
    ++pos;
  }
  value = static_cast<int>(v);
  return pos > start;
}

}  // namespace

std::vector<QueryHeadId> parse_head_set(const std::string& spec, const ModelConfig& config) {
  std::vector<QueryHeadId> out;
  const std::string all = trim(spec);
  if (all.empty() || all == "none") return out;
  std::size_t start = 0;
  while (start <= all.size()) {
    std::size_t end = all.find(',', start);
    if (end == std::string::npos) end = all.size();
    const std::string tok = trim(all.substr(start, end - start));
    start = end + 1;
    const auto bad = [&](const std::string& why) {
      return Error(fmt::format("head list \"{}\": {} \"{}\" (expected L<layer>Q<head>, "
                               "L<layer>H<kv_head> or L<layer>)",
                               spec, why, tok));
    };
    if (tok.empty()) throw bad("empty item");
    std::size_t pos = 0;
    int layer = 0;
    if (tok[pos] != 'L') throw bad("malformed head name");
    ++pos;
    if (!parse_index(tok, pos, layer)) throw bad("malformed head name");
    if (layer >= config.n_layers)
      throw bad(fmt::format("layer out of range (model has {} layers) in", config.n_layers));
    if (pos == tok.size()) {
      for (int h = 0; h < config.n_heads; ++h) out.push_back({layer, h});
      continue;
    }
    const char kind = tok[pos++];
    int index = 0;
    if ((kind != 'Q' && kind != 'H') || !parse_index(tok, pos, index) || pos != tok.size())
      throw bad("malformed head name");
    if (kind == 'Q') {
      if (index >= config.n_heads)
        throw bad(fmt::format("query head out of range (model has {} per layer) in", config.n_heads));
      out.push_back({layer, index});
    } else {
      if (index >= config.n_kv_heads)
        throw bad(fmt::format("KV head out of range (model has {} per layer) in", config.n_kv_heads));
      for (const QueryHeadId& q : query_heads_of_kv_head(config, layer, index)) out.push_back(q);
    }
    if (end == all.size()) break;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace kvcompact

// Sets of attention heads named the way analyses and the CLI name them.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace kvcompact {

/// One query head: layer in [0, n_layers), head in [0, n_heads).
struct QueryHeadId {
  int layer = 0;
  int head = 0;
  auto operator<=>(const QueryHeadId&) const = default;
};

/// "L<layer>Q<head>", e.g. "L3Q5" (query heads; KV heads are "L<layer>H<kv_head>").
std::string query_head_name(const QueryHeadId& head);

/// The query heads of KV head (layer, kv_head) under grouped-query attention: query heads
/// kv_head * G .. kv_head * G + G - 1 with G = n_heads / n_kv_heads.
std::vector<QueryHeadId> query_heads_of_kv_head(const ModelConfig& config, int layer, int kv_head);

/// Parses a comma list of head names into a sorted set of query heads without duplicates:
/// "L<l>Q<h>" a query head, "L<l>H<g>" a KV head (all query heads of its GQA group), "L<l>" every
/// head of a layer; "none" or "" the empty set. Throws Error naming the token for a malformed or
/// out-of-range name.
std::vector<QueryHeadId> parse_head_set(const std::string& spec, const ModelConfig& config);

/// Every query head, layer-major.
std::vector<QueryHeadId> all_query_heads(const ModelConfig& config);

}  // namespace kvcompact

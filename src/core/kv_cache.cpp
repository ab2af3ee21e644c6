#include "core/kv_cache.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {

void HeadCache::append(const float* k, const float* v, int head_dim, float b, int32_t position) {
  keys.insert(keys.end(), k, k + head_dim);
  values.insert(values.end(), v, v + head_dim);
  beta.push_back(b);
  positions.push_back(position);
}

bool HeadCache::has_bias() const {
  for (float b : beta)
    if (b != 0.0f) return true;
  return false;
}

void HeadCache::truncate(std::size_t length) {
  const std::size_t n = beta.size();
  if (length > n) throw Error(fmt::format("KV cache: cannot truncate a head of {} entries to {}", n, length));
  if (length == n) return;
  const std::size_t d = keys.size() / n;
  keys.resize(length * d);
  values.resize(length * d);
  beta.resize(length);
  positions.resize(length);
}

void HeadCache::reserve_more(std::size_t n, int head_dim) {
  const std::size_t len = length(), hd = static_cast<std::size_t>(head_dim);
  if (positions.capacity() >= len + n) return;
  const std::size_t rows = len == 0 ? n : std::max(len + n, len + len / 4 + 16);
  keys.reserve(rows * hd);
  values.reserve(rows * hd);
  beta.reserve(rows);
  positions.reserve(rows);
}

bool HeadCache::consistent(int head_dim) const {
  const std::size_t len = length(), hd = static_cast<std::size_t>(head_dim);
  return keys.size() == len * hd && values.size() == len * hd && positions.size() == len;
}

KVCache::KVCache(int n_layers, int n_kv_heads, int head_dim)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim),
      heads_(static_cast<std::size_t>(n_layers) * n_kv_heads),
      windows_(static_cast<std::size_t>(n_layers > 0 ? n_layers : 0), 0) {}

int KVCache::layer_window(int layer) const {
  if (layer < 0 || layer >= n_layers_)
    throw Error(fmt::format("KV cache: no layer {} (cache has {} layers)", layer, n_layers_));
  return windows_[static_cast<std::size_t>(layer)];
}

void KVCache::set_layer_window(int layer, int window) {
  if (layer < 0 || layer >= n_layers_ || window < 0)
    throw Error(fmt::format("KV cache: cannot set layer {} window {} (cache has {} layers)", layer, window,
                            n_layers_));
  windows_[static_cast<std::size_t>(layer)] = window;
}

std::size_t KVCache::index(int layer, int kv_head) const {
  if (layer < 0 || layer >= n_layers_ || kv_head < 0 || kv_head >= n_kv_heads_)
    throw Error(fmt::format("KV cache: no head L{}H{} (cache has {} layers x {} KV heads)", layer,
                            kv_head, n_layers_, n_kv_heads_));
  return static_cast<std::size_t>(layer) * n_kv_heads_ + kv_head;
}

CacheMark KVCache::mark() const {
  CacheMark m;
  m.lengths.reserve(heads_.size());
  for (const auto& h : heads_) m.lengths.push_back(h.length());
  m.next_position = next_position;
  return m;
}

void KVCache::rollback(const CacheMark& m) {
  if (m.lengths.size() != heads_.size())
    throw Error(fmt::format("KV cache: a mark of {} heads cannot roll back a cache of {} heads", m.lengths.size(),
                            heads_.size()));
  for (std::size_t i = 0; i < heads_.size(); ++i)
    if (heads_[i].length() < m.lengths[i])
      throw Error(fmt::format("KV cache: head L{}H{} has {} entries, fewer than the {} at the mark", i / n_kv_heads_,
                              i % n_kv_heads_, heads_[i].length(), m.lengths[i]));
  for (std::size_t i = 0; i < heads_.size(); ++i) heads_[i].truncate(m.lengths[i]);
  next_position = m.next_position;
}

std::size_t KVCache::total_entries() const {
  std::size_t n = 0;
  for (const auto& h : heads_) n += h.length();
  return n;
}

std::size_t KVCache::bytes() const {
  std::size_t b = 0;
  for (const auto& h : heads_) {
    b += h.length() * 2 * head_dim_ * sizeof(float);
    if (h.has_bias()) b += h.length() * sizeof(float);
  }
  return b;
}

const HeadCache* KVCache::longest_global_head() const {
  const HeadCache* best = nullptr;
  for (int l = 0; l < n_layers_; ++l)
    if (!sliding(l))
      for (int g = 0; g < n_kv_heads_; ++g)
        if (best == nullptr || head(l, g).length() > best->length()) best = &head(l, g);
  return best;
}

std::size_t KVCache::longest_global_length() const {
  const HeadCache* h = longest_global_head();
  return h ? h->length() : 0;
}

std::size_t KVCache::bytes_with_lengths(const std::vector<int>& lengths) const {
  if (lengths.size() != heads_.size())
    throw Error(fmt::format("cache bytes: {} head lengths for a cache of {} heads", lengths.size(), heads_.size()));
  std::size_t b = 0;
  for (std::size_t i = 0; i < heads_.size(); ++i) {
    if (lengths[i] < 0) throw Error(fmt::format("cache bytes: head {} has a negative length {}", i, lengths[i]));
    const auto n = static_cast<std::size_t>(lengths[i]);
    b += n * 2 * head_dim_ * sizeof(float);
    if (heads_[i].has_bias()) b += n * sizeof(float);
  }
  return b;
}

void KVCache::clear() {
  for (auto& h : heads_) h = HeadCache{};
  next_position = 0;
}

}  // namespace kvcompact

#include "model/backend.h"

#include <cmath>
#include <cstddef>
#include <utility>

namespace kvcompact {

WorkspaceLease::WorkspaceLease(const Backend& owner, std::unique_ptr<ForwardWorkspace> ws)
    : owner_(&owner), ws_(std::move(ws)) {}

WorkspaceLease::~WorkspaceLease() {
  if (ws_) owner_->release_workspace(std::move(ws_));
}

WorkspaceLease Backend::acquire_workspace() const {
  std::unique_ptr<ForwardWorkspace> ws;
  {
    const std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      ws = std::move(pool_.back());
      pool_.pop_back();
    }
  }
  if (!ws) ws = std::make_unique<ForwardWorkspace>();
  return WorkspaceLease(*this, std::move(ws));
}

void Backend::add_bias(float* y, const float* b, int n, int m) const {
  const std::size_t mm = static_cast<std::size_t>(m);
  for (int i = 0; i < n; ++i) {
    float* row = y + static_cast<std::size_t>(i) * mm;
    for (std::size_t j = 0; j < mm; ++j) row[j] += b[j];
  }
}

void Backend::add(float* x, const float* y, long count) const {
  for (long i = 0; i < count; ++i) x[i] += y[i];
}

void Backend::scale(float* x, long count, float m) const {
  for (long i = 0; i < count; ++i) x[i] *= m;
}

void Backend::softcap(float* x, long count, float cap) const {
  for (long i = 0; i < count; ++i) x[i] = std::tanh(x[i] / cap) * cap;
}

void Backend::rope_tables(const float* inv_freq, int half, float factor, int first_position, int n, float* cos,
                          float* sin) const {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < half; ++j) {
      const float val = static_cast<float>(first_position + i) * inv_freq[j];
      cos[static_cast<std::size_t>(i) * half + j] = std::cos(val) * factor;
      sin[static_cast<std::size_t>(i) * half + j] = std::sin(val) * factor;
    }
}

void Backend::append_kv(HeadCache& h, const float* k, const float* v, long ld, int n, int head_dim,
                        int first_position) const {
  h.reserve_more(static_cast<std::size_t>(n), head_dim);
  for (int i = 0; i < n; ++i)
    h.append(k + static_cast<std::size_t>(i) * ld, v + static_cast<std::size_t>(i) * ld, head_dim, 0.0f,
             first_position + i);
}

void Backend::release_workspace(std::unique_ptr<ForwardWorkspace> ws) const {
  const std::lock_guard<std::mutex> lock(pool_mutex_);
  pool_.push_back(std::move(ws));
}

}  // namespace kvcompact

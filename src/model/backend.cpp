#include "model/backend.h"

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

void Backend::release_workspace(std::unique_ptr<ForwardWorkspace> ws) const {
  const std::lock_guard<std::mutex> lock(pool_mutex_);
  pool_.push_back(std::move(ws));
}

}  // namespace kvcompact

#include "model/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "ops/softmax.h"

namespace kvcompact {

int argmax(std::span<const float> x) {
  if (x.empty()) throw Error("argmax: empty logits");
  int best = 0;
  float best_v = x[0];
  for (std::size_t i = 1; i < x.size(); ++i)
    if (x[i] > best_v) {
      best_v = x[i];
      best = static_cast<int>(i);
    }
  return best;
}

XorShiftRng::XorShiftRng(uint64_t seed) : state_(seed == 0 ? 0x2545F4914F6CDD1Dull : seed) {}

uint32_t XorShiftRng::next_u32() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
}

float XorShiftRng::next_f32() { return static_cast<float>(next_u32() >> 8) / 16777216.0f; }

int sample_mult(std::span<const float> p, float coin) {
  float cdf = 0.0f;
  for (std::size_t i = 0; i < p.size(); ++i) {
    cdf += p[i];
    if (coin < cdf) return static_cast<int>(i);
  }
  return static_cast<int>(p.size()) - 1;
}

int sample_topp(std::span<const float> p, float top_p, float coin) {
  const int n = static_cast<int>(p.size());
  // Entries below the cutoff cannot be part of the nucleus (llama2.c's speed-up).
  const float cutoff = n > 1 ? (1.0f - top_p) / static_cast<float>(n - 1) : 0.0f;
  std::vector<int> idx;
  idx.reserve(n);
  for (int i = 0; i < n; ++i)
    if (p[i] >= cutoff) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return p[a] > p[b]; });
  const int n0 = static_cast<int>(idx.size());
  float cumulative = 0.0f;
  int last = n0 - 1;
  for (int i = 0; i < n0; ++i) {
    cumulative += p[idx[i]];
    if (cumulative > top_p) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  for (int i = 0; i <= last; ++i) {
    cdf += p[idx[i]];
    if (r < cdf) return idx[i];
  }
  return idx[last];
}

Sampler::Sampler(int vocab_size, float temperature, float top_p, uint64_t seed)
    : vocab_size_(vocab_size), temperature_(temperature), top_p_(top_p), rng_(seed) {
  if (vocab_size <= 0) throw Error(fmt::format("sampler: vocab_size {} <= 0", vocab_size));
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    throw Error(fmt::format("sampler: temperature {} must be a finite number >= 0", temperature));
  if (std::isnan(top_p)) throw Error("sampler: top_p is NaN");
  probs_.resize(vocab_size);
}

int Sampler::sample(std::span<const float> all_logits) {
  if (static_cast<int>(all_logits.size()) < vocab_size_)
    throw Error(fmt::format("sampler: got {} logits, vocabulary has {}", all_logits.size(),
                            vocab_size_));
  const std::span<const float> logits = all_logits.first(static_cast<std::size_t>(vocab_size_));
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (!std::isfinite(logits[i]))
      throw Error(fmt::format("sampler: logit {} of token {} is not finite", logits[i], i));
  if (temperature_ == 0.0f) return argmax(logits);
  // (logit - max) / T: the same distribution as softmax(logits / T), but no overflow for tiny T.
  const float mx = logits[argmax(logits)];
  for (int i = 0; i < vocab_size_; ++i) probs_[i] = (logits[i] - mx) / temperature_;
  softmax(probs_.data(), vocab_size_);
  const float coin = rng_.next_f32();
  if (top_p_ <= 0.0f || top_p_ >= 1.0f) return sample_mult(probs_, coin);
  return sample_topp(probs_, top_p_, coin);
}

}  // namespace kvcompact

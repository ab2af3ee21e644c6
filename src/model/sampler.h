// Next-token sampling as llama2.c run.c: argmax, multinomial, and top-p (nucleus) sampling.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvcompact {

/// Index of the largest value; the first one on ties (llama2.c sample_argmax).
/// Throws Error when x is empty.
int argmax(std::span<const float> x);

/// llama2.c's xorshift64* generator (random_u32 / random_f32), so that a seed reproduces
/// llama2.c's draws. A zero state would stay zero, so seed 0 is replaced by 0x2545F4914F6CDD1D.
class XorShiftRng {
 public:
  explicit XorShiftRng(uint64_t seed);
  /// state ^= state>>12; state ^= state<<25; state ^= state>>27; (state*0x2545F4914F6CDD1D)>>32.
  uint32_t next_u32();
  /// Uniform float in [0, 1): (next_u32() >> 8) / 2^24.
  float next_f32();

 private:
  uint64_t state_;
};

/// Multinomial draw from probabilities p: [n] with coin in [0, 1): first i with coin < cdf_i,
/// else n-1 (llama2.c sample_mult).
int sample_mult(std::span<const float> p, float coin);

/// Nucleus draw (Holtzman et al. 2019) exactly as llama2.c sample_topp: keep the entries with
/// p >= (1-top_p)/(n-1), sort by decreasing p (stable: lower index first on ties), keep the
/// shortest prefix whose cumulative probability exceeds top_p, draw coin * mass over it.
/// p: [n] probabilities; 0 < top_p < 1; coin in [0, 1).
int sample_topp(std::span<const float> p, float top_p, float coin);

/// Samples token ids from logits rows.
///  - temperature 0: argmax (greedy);
///  - else p = softmax(logits / temperature), one coin from XorShiftRng, then sample_topp when
///    0 < top_p < 1, otherwise sample_mult (plain sampling).
class Sampler {
 public:
  /// Throws Error for vocab_size <= 0, a negative or non-finite temperature, or a NaN top_p.
  Sampler(int vocab_size, float temperature, float top_p, uint64_t seed);

  /// Draws a token id in [0, vocab_size) from logits: [>= vocab_size]. Rows past vocab_size are
  /// masked out (as if their logits were -inf): a model's padded vocabulary rows beyond its
  /// tokenizer's tokens (Qwen3: 151936 rows, 151669 tokens) are never drawn when the sampler is
  /// sized by the tokenizer. Throws Error for fewer than vocab_size logits or a non-finite logit
  /// among the first vocab_size.
  int sample(std::span<const float> logits);

  int vocab_size() const { return vocab_size_; }
  float temperature() const { return temperature_; }
  float top_p() const { return top_p_; }

 private:
  int vocab_size_;
  float temperature_, top_p_;
  XorShiftRng rng_;
  std::vector<float> probs_;  // [vocab_size] scratch
};

}  // namespace kvcompact

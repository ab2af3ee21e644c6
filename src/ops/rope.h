// Rotary position embedding (RoFormer, Su et al. 2021) in the two pairings Llama checkpoints use.
#pragma once

#include "core/config.h"

namespace kvcompact {

/// Rotation angles for positions first_position .. first_position+n-1.
/// cos_out, sin_out: [n, head_dim/2]; entry (i, j) is cos/sin of (first_position+i) * freq_j with
/// freq_j = 1 / theta^(2j/head_dim), computed in float exactly as llama2.c run.c (powf, then
/// pos * freq, cosf/sinf). head_dim must be even.
void rope_angles(int first_position, int n, int head_dim, float theta, float* cos_out,
                 float* sin_out);

/// Inverse frequencies inv_freq[head_dim/2] with scaling (see RopeScaling in core/config.h).
/// RopeScalingType::None gives 1 / theta^(2j/head_dim) computed in float as rope_angles does;
/// Linear, Llama3 and Yarn apply the Hugging Face formulas (in double, rounded to float); then
/// each inv_freq_j is divided by freq_factors[j] when given. Throws Error for a non-positive
/// factor, for Llama3 high_freq_factor <= low_freq_factor, for Yarn a non-positive original
/// context or beta, or freq_factors of the wrong length or non-positive.
void rope_inv_freq(int head_dim, float theta, const RopeScaling& scaling, float* inv_freq);

/// The factor Yarn multiplies cos and sin by (transformers `attention_factor`, llama.cpp mscale):
/// scaling.attention_factor when set, else 0.1 ln(factor) + 1 (1 for factor <= 1); 1 for every
/// other scaling type.
float rope_attention_factor(const RopeScaling& scaling);

/// rope_angles with scaled frequencies: entry (i, j) is rope_attention_factor * cos/sin of
/// (first_position+i) * inv_freq_j (rope_inv_freq). With RopeScalingType::None and no freq_factors
/// identical to rope_angles.
void rope_angles(int first_position, int n, int head_dim, float theta, const RopeScaling& scaling,
                 float* cos_out, float* sin_out);

/// Rotates every head of x in place. x: [n, n_heads * head_dim], row i at the angles of row i of
/// cos/sin ([n, head_dim/2], from rope_angles). Pair j of a head is
///   Interleaved: (2j, 2j+1)          (Meta Llama, llama2.c, GGUF `llama`),
///   HalfSplit:   (j, j + head_dim/2) (Hugging Face rotate_half);
/// each pair (a, b) becomes (a cos - b sin, a sin + b cos). OpenMP over rows for large inputs.
/// Reference twin: rope_ref.
void apply_rope(float* x, int n, int n_heads, int head_dim, const float* cos, const float* sin,
                RopeStyle style);

}  // namespace kvcompact

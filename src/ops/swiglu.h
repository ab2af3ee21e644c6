// SwiGLU gating (Shazeer 2020) of the Llama feed-forward block, as llama2.c run.c.
#pragma once

namespace kvcompact {

/// In place: gate[i] <- silu(gate[i]) * up[i], silu(v) = v / (1 + exp(-v)).
/// gate, up: [n] (any flattened shape, e.g. [tokens, hidden_dim]). OpenMP for large n.
/// Reference twin: swiglu_ref.
void swiglu(float* gate, const float* up, long n);

}  // namespace kvcompact

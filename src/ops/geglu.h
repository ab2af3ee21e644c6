// GeGLU gating (Shazeer 2020) with the tanh-approximated GELU of Gemma's feed-forward block.
#pragma once

namespace kvcompact {

/// In place: gate[i] <- gelu_tanh(gate[i]) * up[i] with
/// gelu_tanh(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))) (PyTorch gelu(approximate=
/// "tanh"), transformers `gelu_pytorch_tanh`), in float. gate, up: [n]. OpenMP for large n.
void geglu_tanh(float* gate, const float* up, long n);

}  // namespace kvcompact

// Which instruction set the hand-written CPU kernels (typed row dots, int8 activation dots) use,
// chosen once per process from what the CPU and the build support, and lowered on request.
#pragma once

namespace kvcompact {

/// Kernel instruction-set levels, from plain C++ up.
///   Scalar: portable loops (decode a row to float32, then dot).
///   Avx2:   AVX2 + FMA + F16C kernels (int8 dots by maddubs, as ggml's AVX2 path).
///   Avx512: AVX-512 F/BW/VL + VNNI kernels (fused decode+dot in zmm, int8 dots by vpdpbusd).
enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

/// "scalar", "avx2", "avx512".
const char* isa_name(Isa isa);

/// The best level this build (compile-time target, e.g. -march=native) and this CPU (cpuid)
/// both support.
Isa best_isa();

/// The level the kernels use now: best_isa(), lowered by the environment variable
/// KVC_ISA=avx512|avx2|scalar (read once; a level above best_isa() is clamped to it; an unknown
/// value throws Error naming it), or by set_kernel_isa.
Isa kernel_isa();

/// Sets the level for the rest of the process (clamped to best_isa()); returns the level in
/// effect. Not thread-safe against kernels running at the same time (tests, start-up).
Isa set_kernel_isa(Isa isa);

}  // namespace kvcompact

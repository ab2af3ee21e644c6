#include "ops/isa.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace kvcompact {

namespace {

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__F16C__) && defined(__FMA__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
    return Isa::Avx512;
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
#endif
  return Isa::Scalar;
}

Isa from_env() {
  const Isa best = best_isa();
  const char* e = std::getenv("KVC_ISA");
  if (e == nullptr || *e == '\0') return best;
  const std::string v(e);
  Isa want;
  if (v == "avx512") want = Isa::Avx512;
  else if (v == "avx2") want = Isa::Avx2;
  else if (v == "scalar") want = Isa::Scalar;
  else throw Error(fmt::format("KVC_ISA: unknown instruction set '{}' (expected avx512, avx2 or scalar)", v));
  return std::min(want, best);
}

std::atomic<int>& current() {
  static std::atomic<int> level{static_cast<int>(from_env())};
  return level;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    default: return "scalar";
  }
}

Isa best_isa() {
  static const Isa best = detect();
  return best;
}

Isa kernel_isa() { return static_cast<Isa>(current().load(std::memory_order_relaxed)); }

Isa set_kernel_isa(Isa isa) {
  const Isa v = std::min(isa, best_isa());
  current().store(static_cast<int>(v), std::memory_order_relaxed);
  return v;
}

}  // namespace kvcompact

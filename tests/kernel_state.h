// Test helper: restores the kernel ISA level and matmul mode that a test changes.
#pragma once

#include "ops/isa.h"
#include "ops/matmul.h"

namespace kvcompact {

/// Saves kernel_isa() and matmul_mode() on construction and sets them back on destruction.
struct KernelState {
  Isa isa = kernel_isa();
  MatmulMode mode = matmul_mode();
  ~KernelState() {
    set_kernel_isa(isa);
    set_matmul_mode(mode);
  }
};

}  // namespace kvcompact

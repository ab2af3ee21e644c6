// Test helper shared by the loader and analysis tests: expecting a kvcompact::Error whose
// message names the file, field or option. Header-only ("test_util.h").
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace kvcompact::testing {

/// Expects fn() to throw kvcompact::Error whose message contains every string in `needles`.
template <class Fn>
void expect_error(Fn fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "no Error thrown";
  } catch (const Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " lacks " << n;
  }
}

}  // namespace kvcompact::testing

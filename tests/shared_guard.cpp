// main() of the data, reference and slow test executables (CMakeLists.txt). When ../shared
// (KVC_SHARED_DIR) is absent no test body runs: each test prints "[  SKIPPED ]" with the reason,
// which CTest reports as "Skipped" (never "Passed"); with KVC_REQUIRE_SHARED=1 (CI) it fails
// instead, so a wrong path cannot turn the data tests into skips unnoticed. Listing the tests
// (--gtest_list_tests, CTest's discovery) works either way.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const std::string probe = std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin";
  if (GTEST_FLAG_GET(list_tests) || std::filesystem::exists(probe)) return RUN_ALL_TESTS();
  const char* require = std::getenv("KVC_REQUIRE_SHARED");
  if (require != nullptr && std::strcmp(require, "1") == 0) {
    std::fprintf(stderr, "KVC_REQUIRE_SHARED=1 but %s is missing (the ../shared folder)\n", probe.c_str());
    return 1;
  }
  std::printf("[  SKIPPED ] %s: needs ../shared, %s is missing\n", GTEST_FLAG_GET(filter).c_str(), probe.c_str());
  return 0;
}

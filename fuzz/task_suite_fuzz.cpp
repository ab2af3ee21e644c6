// libFuzzer harness: task suites in JSONL (parse_task_suite), re-serialized line by line.
#include <cstdint>

#include "tasks/task_suite.h"
#include "fuzz_util.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::expect_ok_or_error([&] {
    for (const TaskItem& item : parse_task_suite(fuzz::as_view(data, size), "tasks.jsonl"))
      (void)task_item_to_jsonl(item);
  });
  return 0;
}

// libFuzzer harness: per-head budget schedule files (read_budget_schedule), then what the CLI
// does with one: proportions in layer-major order and whole keys per head.
#include <cstdint>

#include "budgets/budget_solver.h"
#include "fuzz_util.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_temp("budgets.json", fuzz::as_view(data, size));
  fuzz::expect_ok_or_error([&] {
    const BudgetSchedule s = read_budget_schedule(path);
    const std::vector<double> p = s.proportions();
    (void)budget_schedule_to_json(s);
    if (p.size() <= 4096) (void)per_head_budgets(p, std::vector<int>(p.size(), 100), 0.1);
  });
  return 0;
}

// libFuzzer harness: head influence curve files (read_influence_curves_json), then the CSV form
// and curve interpolation on every head.
#include <cstdint>

#include "budgets/budget_solver.h"
#include "budgets/influence_curves.h"
#include "fuzz_util.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_temp("curves.json", fuzz::as_view(data, size));
  fuzz::expect_ok_or_error([&] {
    const InfluenceCurves c = read_influence_curves_json(path);
    (void)influence_curves_csv(c);
    (void)influence_curves_to_json(c);
    for (const HeadCurve& h : c.heads)
      for (double r : {0.0, 0.05, 0.5, 1.0}) (void)interpolate_curve(h, r);
  });
  return 0;
}

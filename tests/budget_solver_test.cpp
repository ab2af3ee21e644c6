#include "budgets/budget_solver.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "budgets/influence_curves.h"
#include "core/error.h"
#include "test_util.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

std::string tmp_dir() {
  std::string d = std::string(KVC_TEST_TMP) + "/budget_solver";
  std::filesystem::create_directories(d);
  return d;
}

using testing::expect_error;

// Curves on a grid for n_layers x n_kv_heads heads; values from `f(h, r)`.
template <class F>
InfluenceCurves make_curves(int n_layers, int n_kv_heads, const std::vector<double>& grid, F f) {
  InfluenceCurves c;
  c.model_fingerprint = "0x0";
  c.method = "am";
  c.grid = grid;
  c.baseline_ratio = grid[0];
  c.n_layers = n_layers;
  c.n_kv_heads = n_kv_heads;
  for (int l = 0; l < n_layers; ++l)
    for (int k = 0; k < n_kv_heads; ++k) {
      HeadCurve h;
      h.layer = l;
      h.kv_head = k;
      h.ratios = grid;
      for (double r : grid) h.mean.push_back(f(l * n_kv_heads + k, r));
      h.sem.assign(grid.size(), 0.0);
      h.std.assign(grid.size(), 0.0);
      h.documents = 1;
      c.heads.push_back(h);
    }
  return c;
}

double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

TEST(BudgetSolver, InterpolationHandWorked) {
  HeadCurve h;
  h.ratios = {0.1, 0.2, 0.5};
  h.mean = {1.0, 0.5, -0.1};
  EXPECT_DOUBLE_EQ(interpolate_curve(h, 0.1), 1.0);
  EXPECT_DOUBLE_EQ(interpolate_curve(h, 0.15), 0.75);
  EXPECT_DOUBLE_EQ(interpolate_curve(h, 0.2), 0.5);
  EXPECT_NEAR(interpolate_curve(h, 0.3), 0.3, 1e-15);
  EXPECT_DOUBLE_EQ(interpolate_curve(h, 0.5), -0.1);
  EXPECT_DOUBLE_EQ(interpolate_curve(h, 1.0), -0.1);  // beyond the grid: the last value
  EXPECT_DOUBLE_EQ(interpolate_curve(h, 0.0), 1.0);   // below the grid: the first value
  EXPECT_THROW(interpolate_curve(h, std::nan("")), Error);
}

// All allocations of `total` units into H heads with at least m each, by recursion.
void brute_force(const std::vector<std::vector<double>>& cost, int h, int left, int m, double acc, double& best) {
  const int H = static_cast<int>(cost.size());
  if (h == H - 1) {
    if (left >= m) best = std::min(best, acc + cost[h][left]);
    return;
  }
  for (int u = m; u <= left; ++u) brute_force(cost, h + 1, left - u, m, acc + cost[h][u], best);
}

TEST(BudgetSolver, DynamicProgramMatchesBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> U(-1.0, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    const int H = 3 + trial % 2;  // 3 or 4 heads
    const int N = 6 + trial % 7;  // 6..12 units
    const int m = trial % 3;      // minimum 0, 1, 2
    std::vector<std::vector<double>> cost(H, std::vector<double>(N + 1));
    for (auto& row : cost)
      for (auto& v : row) v = U(rng);  // arbitrary, non-convex, non-monotone
    double best_bf = INFINITY;
    brute_force(cost, 0, N, m, 0.0, best_bf);
    double best_dp = 0;
    const auto u = solve_separable_allocation(cost, N, m, &best_dp);
    ASSERT_EQ(static_cast<int>(u.size()), H);
    EXPECT_EQ(std::accumulate(u.begin(), u.end(), 0), N);
    double c = 0;
    for (int h = 0; h < H; ++h) {
      EXPECT_GE(u[h], m);
      c += cost[h][u[h]];
    }
    EXPECT_NEAR(best_dp, best_bf, 1e-12) << "trial " << trial;
    EXPECT_NEAR(c, best_dp, 1e-12);
  }
  EXPECT_THROW(solve_separable_allocation({{0, 1, 2}}, 2, 3), Error);
  EXPECT_THROW(solve_separable_allocation({{0, 1}}, 2, 0), Error);
  EXPECT_THROW(solve_separable_allocation({}, 2, 0), Error);
}

TEST(BudgetSolver, OptimizedMatchesBruteForceOverProportions) {
  // 3 heads, U = 4 -> proportions in multiples of 1/12; non-convex curves (bumps and plateaus).
  const std::vector<double> grid{0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0};
  const std::vector<std::vector<double>> vals{{3.0, 0.2, 1.5, 0.1, 0.9, 0.0, 0.0},
                                              {1.0, 0.95, 0.9, 0.1, 0.08, 0.05, 0.0},
                                              {0.4, 0.5, 0.1, 0.3, 0.0, 0.2, -0.05}};
  auto curves = make_curves(3, 1, grid, [&](int h, double r) {
    for (std::size_t i = 0; i < grid.size(); ++i)
      if (grid[i] == r) return vals[h][i];
    return 0.0;
  });
  for (double floor : {0.0, 0.25, 0.5}) {
    BudgetSolverOptions o;
    o.targets = {0.05, 0.1, 0.2};
    o.floor = floor;
    o.units = 4;
    const auto s = optimize_budgets(curves, o);
    const double got = mean_of(predict_delta(s.proportions(), curves, o.targets));
    double best = INFINITY;
    const int N = 12, m = static_cast<int>(std::ceil(floor * 4 - 1e-9));
    for (int a = m; a <= N; ++a)
      for (int b = m; a + b <= N; ++b) {
        const int c = N - a - b;
        if (c < m) continue;
        best = std::min(best, mean_of(predict_delta({a / 12.0, b / 12.0, c / 12.0}, curves, o.targets)));
      }
    EXPECT_NEAR(got, best, 1e-12) << "floor " << floor;
    ASSERT_EQ(s.predicted_delta.size(), 3u);
    EXPECT_NEAR(mean_of({s.predicted_delta[0].second, s.predicted_delta[1].second, s.predicted_delta[2].second}), got,
                1e-12);
    EXPECT_EQ(s.schedule, "optimized");
  }
}

TEST(BudgetSolver, UniformNeverPredictedBetterAndFloorRespected) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> U(0.0, 1.0);
  const std::vector<double> grid{0.0, 0.02, 0.05, 0.1, 0.2, 0.4};
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<std::vector<double>> vals(6, std::vector<double>(grid.size()));
    for (auto& row : vals) {
      const double scale = 3.0 * U(rng);
      for (std::size_t i = 0; i < grid.size(); ++i) row[i] = scale * (1.0 - grid[i] / 0.4) + 0.2 * U(rng);
    }
    auto curves = make_curves(3, 2, grid, [&](int h, double r) {
      return vals[h][static_cast<std::size_t>(std::find(grid.begin(), grid.end(), r) - grid.begin())];
    });
    for (double floor : {0.0, 0.1, 0.6}) {
      BudgetSolverOptions o;
      o.floor = floor;
      o.units = 40;
      const auto opt = optimize_budgets(curves, o);
      auto uni = uniform_schedule(3, 2, o.targets);
      set_predicted_delta(uni, curves);
      double lo = 0, lu = 0;
      for (std::size_t k = 0; k < o.targets.size(); ++k) {
        lo += opt.predicted_delta[k].second;
        lu += uni.predicted_delta[k].second;
      }
      EXPECT_LE(lo, lu + 1e-12) << "trial " << trial << " floor " << floor;
      double sum = 0;
      for (const auto& h : opt.heads) {
        EXPECT_GE(h.proportion, floor / 6.0 - 1e-12);
        sum += h.proportion;
      }
      EXPECT_NEAR(sum, 1.0, 1e-12);
    }
  }
}

TEST(BudgetSolver, FloorBindsOnUselessHead) {
  // Head 0 has no influence: without a floor it gets nothing; with F it gets exactly F/H.
  const std::vector<double> grid{0.0, 0.1, 0.5, 1.0};
  auto curves = make_curves(1, 4, grid, [](int h, double r) { return h == 0 ? 0.0 : 1.0 - r; });
  BudgetSolverOptions o;
  o.targets = {0.1};
  o.units = 50;
  o.floor = 0.0;
  EXPECT_EQ(optimize_budgets(curves, o).heads[0].proportion, 0.0);
  o.floor = 0.2;  // 10 of 50 units per uniform share
  const auto s = optimize_budgets(curves, o);
  EXPECT_NEAR(s.heads[0].proportion, 0.2 / 4, 1e-15);
  EXPECT_EQ(s.floor, 0.2);
  o.floor = 1.0;  // forces uniform
  for (const auto& h : optimize_budgets(curves, o).heads) EXPECT_NEAR(h.proportion, 0.25, 1e-15);
  // curves swept around per-head budgets (influence --budgets) are refused
  curves.budget_proportions = {0.1, 0.2, 0.3, 0.4};
  curves.budgets_source = "opt.json";
  EXPECT_THROW(optimize_budgets(curves, o), Error);
}

TEST(BudgetSolver, PredictedDeltaHandWorked) {
  // delta_h(r) = a_h (1 - r) on [0, 1]: D(uniform, R) = sum_h a_h (1 - R).
  const std::vector<double> grid{0.0, 1.0};
  const double a[4] = {0.5, 1.0, 2.0, 4.0};
  auto curves = make_curves(2, 2, grid, [&](int h, double r) { return a[h] * (1.0 - r); });
  auto uni = uniform_schedule(2, 2, {0.1, 0.5});
  set_predicted_delta(uni, curves);
  EXPECT_NEAR(uni.predicted_delta[0].second, 7.5 * 0.9, 1e-12);
  EXPECT_NEAR(uni.predicted_delta[1].second, 7.5 * 0.5, 1e-12);
  // p = (0.5, 0.5, 0, 0) at R = 0.5: heads 0 and 1 at r = min(1, 0.5*4*0.5) = 1, others at 0.
  auto d = predict_delta({0.5, 0.5, 0.0, 0.0}, curves, {0.5});
  EXPECT_NEAR(d[0], 2.0 + 4.0, 1e-12);
  auto partial = curves;
  partial.heads.pop_back();
  expect_error([&] { predict_delta({0.25, 0.25, 0.25, 0.25}, partial, {0.1}); }, {"L1H1"});
  expect_error([&] { optimize_budgets(partial, BudgetSolverOptions{}); }, {"L1H1"});
  BudgetSolverOptions bad;
  bad.floor = 1.5;
  expect_error([&] { optimize_budgets(curves, bad); }, {"--floor"});
  bad = {};
  bad.targets = {0.0};
  EXPECT_THROW(optimize_budgets(curves, bad), Error);
  bad = {};
  bad.units = 0;
  expect_error([&] { optimize_budgets(curves, bad); }, {"--units"});
}

// A model with sliding-window layers (Gemma 3: local layers never compacted): curves, schedules and
// per-head budgets cover the other layers only, worked by hand.
TEST(BudgetSolver, SlidingLayersAreLeftOutOfCurvesSchedulesAndBudgets) {
  // 3 layers x 2 KV heads, layer 1 sliding: 4 compacted heads. delta_h(r) = a_h (1 - r).
  const std::vector<double> grid{0.0, 1.0};
  const double a[4] = {0.5, 1.0, 2.0, 4.0};
  InfluenceCurves curves = make_curves(2, 2, grid, [&](int h, double r) { return a[h] * (1.0 - r); });
  curves.n_layers = 3;
  curves.sliding_layers = {1};
  for (HeadCurve& h : curves.heads)
    if (h.layer == 1) h.layer = 2;  // the curves of layers 0 and 2
  EXPECT_NO_THROW(validate_influence_curves(curves, "mixed"));
  // A curve in the sliding layer is refused.
  InfluenceCurves bad_curves = curves;
  bad_curves.heads[0].layer = 1;
  expect_error([&] { validate_influence_curves(bad_curves, "mixed"); }, {"sliding-window layer 1"});

  const BudgetSchedule uni = uniform_schedule(3, 2, {0.5}, {1});
  EXPECT_EQ(uni.heads.size(), 4u);
  EXPECT_EQ(uni.proportions(), (std::vector<double>{0.25, 0.25, 0, 0, 0.25, 0.25}));
  // D(uniform, 0.5) = sum_h a_h (1 - 0.5): H = 4 compacted heads, so every head is at r = 0.5.
  EXPECT_NEAR(predict_delta(uni.proportions(), curves, {0.5})[0], 7.5 * 0.5, 1e-12);
  BudgetSolverOptions o;
  o.targets = {0.5};
  o.units = 4;
  o.floor = 0.0;
  const BudgetSchedule opt = optimize_budgets(curves, o);
  EXPECT_EQ(opt.sliding_layers, (std::vector<int>{1}));
  const std::vector<double> p = opt.proportions();
  EXPECT_EQ(p[2], 0.0);
  EXPECT_EQ(p[3], 0.0);
  // The steepest heads (a = 2, 4: layer 2) get the keys: (0, 0, -, -, 0.5, 0.5), D = 0.5 + 1.
  EXPECT_NEAR(p[4] + p[5], 1.0, 1e-12);
  EXPECT_NEAR(opt.predicted_delta[0].second, 1.5, 1e-12);
  // Pyramid over the two compacted layers: shares 2/2 - 1/(20*2) = 0.975 and 1/40 = 0.025.
  const BudgetSchedule pyr = pyramid_schedule(3, 2, {0.1}, 20.0, {1});
  const auto pp = pyr.proportions();
  EXPECT_NEAR(pp[0] + pp[1], 0.975, 1e-12);
  EXPECT_NEAR(pp[4] + pp[5], 0.025, 1e-12);
  EXPECT_EQ(pp[2] + pp[3], 0.0);

  // JSON: sliding_layers round-trips; a listed sliding head, or a missing global head, is refused.
  const std::string path = tmp_dir() + "/mixed.json";
  write_budget_schedule(path, opt);
  const BudgetSchedule back = read_budget_schedule_for(path, 3, 2, {1});
  EXPECT_EQ(back.proportions(), p);
  expect_error([&] { read_budget_schedule_for(path, 3, 2, {0}); }, {"sliding layers [1]", "[0]"});
  BudgetSchedule listed = uni;
  listed.heads.push_back({1, 0, 0.0});
  expect_error([&] { validate_budget_schedule(listed, "s"); }, {"L1H0", "sliding-window layer 1"});
  BudgetSchedule missing = uni;
  missing.heads.pop_back();
  expect_error([&] { validate_budget_schedule(missing, "s"); }, {"L2H1 missing"});
  expect_error([&] { uniform_schedule(2, 1, {0.1}, {0, 1}); }, {"every layer"});

  // Budgets: T = 100 per head, R = 0.1 -> the 4 compacted heads share round(0.1 * 400) = 40 keys;
  // the sliding heads keep all 100.
  const std::vector<int> T(6, 100);
  EXPECT_EQ(compacted_head_budgets(uni.proportions(), T, 2, {1}, 0.1), (std::vector<int>{10, 10, 100, 100, 10, 10}));
  // A schedule made for every head (no sliding layers) is renormalised over the compacted ones:
  // (0.1, 0.1, 0.4, 0.2, 0.1, 0.1) -> (0.25, 0.25, -, -, 0.25, 0.25) of 40 keys.
  EXPECT_EQ(compacted_head_budgets({0.1, 0.1, 0.4, 0.2, 0.1, 0.1}, T, 2, {1}, 0.1),
            (std::vector<int>{10, 10, 100, 100, 10, 10}));
  // Without sliding layers it is per_head_budgets itself.
  EXPECT_EQ(compacted_head_budgets({0.5, 0.25, 0.25, 0.0}, {40, 40, 40, 40}, 2, {}, 0.25),
            per_head_budgets({0.5, 0.25, 0.25, 0.0}, {40, 40, 40, 40}, 0.25));
  expect_error([&] { compacted_head_budgets({0, 0, 1, 1, 0, 0}, T, 2, {1}, 0.1); }, {"sum to 0"});
}

TEST(BudgetSolver, PyramidSharesDecreaseAndSumToOne) {
  const int L = 5, K = 4;
  const auto s = pyramid_schedule(L, K, {0.1});
  EXPECT_EQ(s.schedule, "pyramid");
  const auto p = s.proportions();
  double sum = 0;
  std::vector<double> layer(L, 0.0);
  for (int l = 0; l < L; ++l)
    for (int k = 0; k < K; ++k) {
      EXPECT_DOUBLE_EQ(p[l * K + k], p[l * K]);  // equal within a layer
      layer[l] += p[l * K + k];
      sum += p[l * K + k];
    }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  for (int l = 1; l < L; ++l) EXPECT_LT(layer[l], layer[l - 1]);
  // PyramidKV: top share 1/(beta L) = 1/100, bottom 2/L - top = 0.39, linear in between.
  EXPECT_NEAR(layer[L - 1], 0.01, 1e-15);
  EXPECT_NEAR(layer[0], 0.39, 1e-15);
  EXPECT_NEAR(layer[2], 0.2, 1e-15);
  EXPECT_NEAR(s.floor, 0.01 / K * (L * K), 1e-12);  // smallest p_h * H = 1/beta
  EXPECT_NO_THROW(validate_budget_schedule(s, "pyramid"));
  const auto one = pyramid_schedule(1, 2, {0.1});
  EXPECT_DOUBLE_EQ(one.heads[0].proportion, 0.5);
  EXPECT_THROW(pyramid_schedule(5, 4, {0.1}, 0.5), Error);
  EXPECT_THROW(pyramid_schedule(0, 4, {0.1}), Error);
}

TEST(BudgetSolver, PerHeadBudgetsHandWorked) {
  EXPECT_EQ(per_head_budgets({0.5, 0.25, 0.25, 0.0}, {40, 40, 40, 40}, 0.25), (std::vector<int>{20, 10, 10, 0}));
  // Cap: head 0 wants 108.5 of 155 keys but holds 10; the other 145 are shared 1:1:1 -> 48.33 each,
  // largest remainder gives the extra key to the first.
  EXPECT_EQ(per_head_budgets({0.7, 0.1, 0.1, 0.1}, {10, 100, 100, 100}, 0.5), (std::vector<int>{10, 49, 48, 48}));
  // One-key minimum: total 3, quotas 2.94, 0.03, 0.03 -> 1, 1, 1.
  EXPECT_EQ(per_head_budgets({0.98, 0.01, 0.01}, {100, 100, 100}, 0.01), (std::vector<int>{1, 1, 1}));
  // Fewer keys than positive heads: each still gets one.
  EXPECT_EQ(per_head_budgets({0.25, 0.25, 0.25, 0.25}, {4, 4, 4, 4}, 0.01), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(per_head_budgets({0.25, 0.25, 0.25, 0.25}, {4, 4, 4, 4}, 1.0), (std::vector<int>{4, 4, 4, 4}));
  // Head 0 takes all it holds (20 of round(0.5 * 60) = 30); the other 10 spill over to head 1.
  EXPECT_EQ(per_head_budgets({1.0, 0.0}, {20, 40}, 0.5), (std::vector<int>{20, 10}));
  // Spill-over round robin over the zero heads: 12 of 14 -> head 0 full (4), then 8 over 1,2: 4, 4.
  EXPECT_EQ(per_head_budgets({1.0, 0.0, 0.0}, {4, 5, 5}, 12.0 / 14.0), (std::vector<int>{4, 4, 4}));
}

// The per-head cap (the paper's max_ratio_per_head, adamzweiger/compaction apply_max_ratio_cap):
// worked by hand. (a) p = (.7, .1, .1, .1), T = 100 each, R = .25: 100 keys, quotas 70/10/10/10;
// a cap of 0.4 (40 keys) fixes head 0 at 40 and shares its excess 30 over the others by p: 20
// each (the paper's function gives proportions .4/.2/.2/.2 of the same 100). (b) a cascade:
// p = (.5, .3, .1, .1), R = .5 (200 keys), cap .6 (60): 100/60/20/20 -> head 0 at 60, +24/+8/+8
// -> 84 exceeds 60, so head 1 is fixed too, and heads 2 and 3 share 80: 60/60/40/40.
TEST(BudgetSolver, PerHeadCapWaterFillsByHand) {
  const std::vector<int> T(4, 100);
  EXPECT_EQ(per_head_budgets({0.7, 0.1, 0.1, 0.1}, T, 0.25), (std::vector<int>{70, 10, 10, 10}));
  EXPECT_EQ(per_head_budgets({0.7, 0.1, 0.1, 0.1}, T, 0.25, 0.4), (std::vector<int>{40, 20, 20, 20}));
  EXPECT_EQ(per_head_budgets({0.5, 0.3, 0.1, 0.1}, T, 0.5, 0.6), (std::vector<int>{60, 60, 40, 40}));
  EXPECT_EQ(per_head_budgets({0.5, 0.3, 0.1, 0.1}, T, 0.5, 1.0), per_head_budgets({0.5, 0.3, 0.1, 0.1}, T, 0.5));
  // a cap that holds the total exactly: every head full at its cap
  EXPECT_EQ(per_head_budgets({0.7, 0.1, 0.1, 0.1}, T, 0.5, 0.5), (std::vector<int>{50, 50, 50, 50}));
  // caps too small for the total, and caps outside (0, 1]
  EXPECT_THROW(per_head_budgets({0.5, 0.3, 0.1, 0.1}, T, 0.5, 0.4), Error);
  EXPECT_THROW(per_head_budgets({0.5, 0.5}, {10, 10}, 0.1, 0.0), Error);
  EXPECT_THROW(per_head_budgets({0.5, 0.5}, {10, 10}, 0.1, 1.5), Error);
  // a cap below one key still leaves each kept head one key
  EXPECT_EQ(per_head_budgets({0.5, 0.5}, {10, 10}, 0.1, 0.05), (std::vector<int>{1, 1}));
}

TEST(BudgetSolver, PerHeadBudgetsKeepTheTotal) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> U(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int H = 1 + trial % 20;
    std::vector<double> p(H);
    std::vector<int> T(H);
    double s = 0;
    long long tsum = 0;
    for (int h = 0; h < H; ++h) {
      p[h] = (trial % 3 == 0 && h % 4 == 1) ? 0.0 : U(rng) * U(rng);
      s += p[h];
      T[h] = 1 + static_cast<int>(U(rng) * (trial % 2 ? 300 : 30));
      tsum += T[h];
    }
    if (s == 0) {
      p[0] = 1;
      s = 1;
    }
    int positive = 0;
    for (auto& v : p) {
      v /= s;
      positive += v > 0;
    }
    const double R = std::vector<double>{0.01, 0.02, 0.05, 0.1, 0.37, 1.0}[trial % 6];
    const auto keys = per_head_budgets(p, T, R);
    long long want = std::llround(R * static_cast<double>(tsum));
    long long cap = 0;  // keys the heads with p_h > 0 can take; beyond it zero heads get the rest
    for (int h = 0; h < H; ++h) cap += p[h] > 0 ? T[h] : 0;
    want = std::clamp<long long>(want, positive, tsum);
    long long total = 0, zero_keys = 0;
    for (int h = 0; h < H; ++h) {
      total += keys[h];
      EXPECT_LE(keys[h], T[h]);
      if (p[h] > 0) {
        EXPECT_GE(keys[h], 1);
      } else {
        zero_keys += keys[h];
      }
      if (p[h] > 0 && want > cap) {
        EXPECT_EQ(keys[h], T[h]);  // spill only once the positive heads are full
      }
    }
    EXPECT_EQ(zero_keys, std::max(0LL, want - cap)) << "trial " << trial;
    EXPECT_EQ(total, want) << "trial " << trial;
  }
  EXPECT_THROW(per_head_budgets({0.5, 0.4}, {10, 10}, 0.1), Error);   // sum != 1
  EXPECT_THROW(per_head_budgets({0.5, 0.5}, {10}, 0.1), Error);       // sizes
  EXPECT_THROW(per_head_budgets({0.5, 0.5}, {10, 0}, 0.1), Error);    // empty head
  EXPECT_THROW(per_head_budgets({0.5, 0.5}, {10, 10}, 0.0), Error);   // R
  EXPECT_THROW(per_head_budgets({1.5, -0.5}, {10, 10}, 0.1), Error);  // negative
}

TEST(BudgetSolver, JsonRoundTripAndBadFiles) {
  const std::vector<double> grid{0.0, 1.0};
  auto curves = make_curves(2, 2, grid, [](int h, double r) { return (h + 1) * (1.0 - r); });
  BudgetSolverOptions o;
  o.targets = {0.01, 0.02, 0.05, 0.1};
  o.units = 20;
  const auto s = optimize_budgets(curves, o);
  const std::string dir = tmp_dir();
  write_budget_schedule(dir + "/opt.json", s);
  const auto r = read_budget_schedule(dir + "/opt.json");
  EXPECT_EQ(r.schedule, "optimized");
  EXPECT_EQ(r.targets, o.targets);
  EXPECT_EQ(r.floor, 0.1);
  EXPECT_EQ(r.n_layers, 2);
  EXPECT_EQ(r.n_kv_heads, 2);
  EXPECT_EQ(r.proportions(), s.proportions());
  ASSERT_EQ(r.predicted_delta.size(), 4u);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(r.predicted_delta[k], s.predicted_delta[k]);
  const auto j = budget_schedule_to_json(s);
  EXPECT_TRUE(j["predicted_delta"].contains("0.05"));
  EXPECT_EQ(j["heads"][3]["name"], "L1H1");

  auto write = [&](const std::string& name, const nlohmann::json& v) {
    std::string p = dir + "/" + name;
    std::ofstream(p) << v.dump();
    return p;
  };
  {
    auto b = j;
    b["heads"][0]["proportion"] = b["heads"][0]["proportion"].get<double>() + 0.1;
    auto p = write("sum.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "sum"});
  }
  {
    auto b = j;
    b["heads"][1] = b["heads"][0];
    auto p = write("dup.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "L0H0", "twice"});
  }
  {
    auto b = j;
    b["heads"][3]["layer"] = 7;
    b["heads"][3]["name"] = "L7H1";
    auto p = write("unknown.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "L7H1"});
  }
  {
    auto b = j;
    b["heads"].erase(3);
    b["heads"][0]["proportion"] = b["heads"][0]["proportion"].get<double>() + s.heads[3].proportion;
    auto p = write("missing.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "L1H1", "missing"});
  }
  {
    auto b = j;
    b["heads"][2]["name"] = "L0H0";
    auto p = write("name.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "heads[2].name"});
  }
  {
    auto b = j;
    b["heads"][2]["proportion"] = -0.01;
    auto p = write("neg.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "heads[2].proportion"});
  }
  {
    auto b = j;
    b["predicted_delta"].erase("0.02");
    auto p = write("pd.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "predicted_delta", "0.02"});
  }
  {
    auto b = j;
    b.erase("floor");
    auto p = write("floor.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "floor", "missing"});
  }
  {
    auto b = j;
    b["targets"] = {0.1, 2.0};
    auto p = write("targets.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "targets"});
  }
  expect_error([&] { read_budget_schedule(dir + "/nope.json"); }, {"nope.json"});
  {
    std::string p = dir + "/garbage.json";
    std::ofstream(p) << "{\"schedule\": ";
    expect_error([&] { read_budget_schedule(p); }, {p, "JSON"});
  }
}

TEST(BudgetSolver, PaperFlatFormRoundTripsAndBadKeysAreNamed) {
  // The paper's load_head_budgets reads {"L{l}H{h}": proportion}; our reader takes it back.
  const auto curves = make_curves(2, 3, {0.0, 1.0}, [](int h, double r) { return (h + 1) * (1.0 - r); });
  BudgetSolverOptions o;
  o.targets = {0.05, 0.1};
  o.units = 20;
  const BudgetSchedule s = optimize_budgets(curves, o);
  const nlohmann::json flat = budget_schedule_to_paper_json(s);
  ASSERT_EQ(flat.size(), 6u);
  double sum = 0;
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 3; ++h) {
      const std::string key = fmt::format("L{}H{}", l, h);
      ASSERT_TRUE(flat.contains(key)) << key;
      EXPECT_EQ(flat[key].get<double>(), s.proportions()[static_cast<std::size_t>(l * 3 + h)]);
      sum += flat[key].get<double>();
    }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  const std::string dir = tmp_dir();
  const std::string path = dir + "/paper.json";
  std::ofstream(path) << flat.dump();
  const BudgetSchedule r = read_budget_schedule_for(path, 2, 3);
  EXPECT_EQ(r.schedule, "paper");
  EXPECT_EQ(r.proportions(), s.proportions());
  expect_error([&] { read_budget_schedule_for(path, 3, 3); }, {path, "2 layers x 3 KV heads", "3 x 3"});
  auto write = [&](const std::string& name, const nlohmann::json& v) {
    const std::string p = dir + "/" + name;
    std::ofstream(p) << v.dump();
    return p;
  };
  {
    auto b = flat;
    b.erase("L1H1");
    b["L0H0"] = b["L0H0"].get<double>() + flat["L1H1"].get<double>();
    const std::string p = write("paper_missing.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "L1H1", "missing"});
  }
  {
    auto b = flat;
    b["Layer1"] = 0.0;
    const std::string p = write("paper_key.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "Layer1", "not a head name"});
  }
  {
    auto b = flat;
    b["L0H1"] = "x";
    const std::string p = write("paper_value.json", b);
    expect_error([&] { read_budget_schedule(p); }, {p, "L0H1", "expected a number"});
  }
}

}}  // namespace
}  // namespace kvcompact

#include "cli_common.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>

#include "core/error.h"
#include "ops/matmul.h"

namespace kvcompact::cli {

void add_common_options(CLI::App* cmd, CommonOptions& common) {
  cmd->add_option("--threads", common.threads, "worker threads (OpenMP and OpenBLAS); 0 = all cores")
      ->check(non_negative_number());
  cmd->add_flag("--json", common.json, "print one JSON object on stdout");
  cmd->add_flag("--fast-quant", common.fast_quant,
                "faster, not exact (default: exact float32): int8-quantised activations against "
                "Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q2_K..Q6_K weights, as llama.cpp does, in decode and, on AVX-512 VNNI "
                "CPUs without AMX, in prefill; prefill in bfloat16 on AMX tiles where the CPU has AMX-BF16 (F32 "
                "weights stay exact); on AVX2-only CPUs prefill stays exact");
}

void apply_common_options(const CommonOptions& common) {
  apply_threads(common.threads);
  if (common.fast_quant) set_matmul_mode(MatmulMode::FastQuant);
}

void apply_threads(int threads) {
  if (threads <= 0) return;
  if (const int cpus = omp_get_num_procs(); threads > cpus)
    std::fprintf(stderr, "kvcompact: warning: --threads %d is more than the %d CPUs here (threads then wait for each other)\n",
                 threads, cpus);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl; }

std::vector<std::string> split_list(const std::string& text, const std::string& option) {
  std::vector<std::string> out;
  if (text.find_first_not_of(' ') == std::string::npos) return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty())
      throw Error(fmt::format("{}empty item in '{}'", option.empty() ? "" : option + ": ", text));
    out.push_back(item);
    start = end + 1;
  }
  return out;
}

void check_max_head_ratio(double ratio, bool with_budgets) {
  if (ratio != 1.0 && !with_budgets) throw Error("--max-head-ratio: only with --budgets");
  if (!(ratio > 0 && ratio <= 1)) throw Error(fmt::format("--max-head-ratio: {} is outside (0, 1]", ratio));
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !(x > 0)) return "must be a positive number, got '" + v + "'";
        return "";
      },
      "POSITIVE");
}

namespace {

/// Parses a whole string as a finite double; false for "", trailing text, inf / nan, and a value
/// too small for a double (strtod's ERANGE underflow: "1e-400" would otherwise read as 0).
bool parse_finite(const std::string& v, double& x) {
  char* end = nullptr;
  errno = 0;
  x = std::strtod(v.c_str(), &end);
  const bool underflow = errno == ERANGE && std::fabs(x) < std::numeric_limits<double>::min();
  return end != v.c_str() && *end == '\0' && std::isfinite(x) && !underflow;
}

}  // namespace

CLI::Validator ratio_number() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        double x = 0;
        if (!parse_finite(v, x) || !(x >= 0 && x <= 1))
          return "must be a number in [0, 1] that a double can hold, got '" + v + "'";
        return "";
      },
      "RATIO");
}

CLI::Validator non_negative_number() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !(x >= 0)) return "must be >= 0, got '" + v + "'";
        return "";
      },
      "NONNEGATIVE");
}

void warn_past_max_seq_len(long long positions, int max_seq_len) {
  static bool warned = false;
  if (warned || max_seq_len <= 0 || positions <= max_seq_len) return;
  warned = true;
  std::fprintf(stderr,
               "kvcompact: warning: positions up to %lld run past the model's max_seq_len %d (positions "
               "beyond it were not trained)\n",
               positions, max_seq_len);
}

std::vector<double> parse_number_list(const std::string& option, const std::string& text) {
  std::vector<double> out;
  for (const auto& item : split_list(text, option)) {
    double v = 0;
    if (!parse_finite(item, v))
      throw Error(fmt::format("{}: '{}' is not a finite number a double can hold", option, item));
    out.push_back(v);
  }
  if (out.empty()) throw Error(fmt::format("{}: empty list", option));
  return out;
}

}  // namespace kvcompact::cli

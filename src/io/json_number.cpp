#include "io/json_number.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {

std::optional<int> json_int(const nlohmann::json& v) {
  constexpr auto lo = std::numeric_limits<int>::min(), hi = std::numeric_limits<int>::max();
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) return std::nullopt;
    return static_cast<int>(u);
  }
  if (v.is_number_integer()) {
    const auto s = v.get<std::int64_t>();
    if (s < lo || s > hi) return std::nullopt;
    return static_cast<int>(s);
  }
  return std::nullopt;
}

namespace {

[[noreturn]] void not_integer(const nlohmann::json& v, std::string_view where, std::string_view field,
                              std::string_view kind) {
  std::string shown = v.dump();
  if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
  throw Error(fmt::format("{}: {}: expected {}, got {}", where, field, kind, shown));
}

}  // namespace

int json_int(const nlohmann::json& v, std::string_view where, std::string_view field) {
  if (const auto x = json_int(v)) return *x;
  not_integer(v, where, field, "an int32 integer");
}

std::vector<int> json_int_list(const nlohmann::json& v, std::string_view where, std::string_view field) {
  if (!v.is_array()) not_integer(v, where, field, "a list of integers");
  std::vector<int> out;
  out.reserve(v.size());
  for (const auto& e : v) {
    const auto x = json_int(e);
    if (!x) not_integer(e, where, field, "a list of int32 integers");
    out.push_back(*x);
  }
  return out;
}

std::int64_t json_int64(const nlohmann::json& v, std::string_view where, std::string_view field) {
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    not_integer(v, where, field, "a 64-bit integer");
  if (!v.is_number_integer()) not_integer(v, where, field, "an integer");
  return v.get<std::int64_t>();
}

std::uint64_t json_uint64(const nlohmann::json& v, std::string_view where, std::string_view field) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0) not_integer(v, where, field, "a non-negative integer");
  return static_cast<std::uint64_t>(v.get<std::int64_t>());
}

double json_unit_number(const nlohmann::json& v, std::string_view where, std::string_view field, bool whole) {
  if (!v.is_number()) throw Error(fmt::format("{}: {}: expected a number, got {}", where, field, v.dump()));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0 || (whole && (x != std::floor(x) || x > 9007199254740992.0)))
    throw Error(fmt::format("{}: {}: {} is not a {} (edited?); delete it to have it evaluated again", where, field,
                            v.dump(), whole ? "whole number >= 0" : "finite number >= 0"));
  return x;
}

}  // namespace kvcompact

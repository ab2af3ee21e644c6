// kvcompact: integers read from JSON without undefined behaviour.
//
// nlohmann::json's get<int>() static_casts whatever number it holds: 1e59 (a float) or 2^40 (an
// integer) becomes an out-of-range conversion, which is undefined behaviour, and a silently wrong
// id when it is not. Every integer field the library reads from a user's JSON goes through here.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvcompact {

/// `v` as an int when it is a JSON integer (not a float, not a bool) within [INT32_MIN, INT32_MAX];
/// std::nullopt otherwise.
std::optional<int> json_int(const nlohmann::json& v);

/// `v` as an int; throws Error("<where>: <field>: expected an integer, got <v>") when json_int(v)
/// is empty. `where` names the file (or "study settings"), `field` the key.
int json_int(const nlohmann::json& v, std::string_view where, std::string_view field);

/// `v` as a list of ints: a JSON array whose every element passes json_int; throws Error naming
/// `where` and `field` otherwise.
std::vector<int> json_int_list(const nlohmann::json& v, std::string_view where, std::string_view field);

/// `v` as a signed 64-bit integer (a JSON integer that fits); throws Error otherwise.
std::int64_t json_int64(const nlohmann::json& v, std::string_view where, std::string_view field);

/// `v` as an unsigned 64-bit integer (a non-negative JSON integer); throws Error otherwise.
std::uint64_t json_uint64(const nlohmann::json& v, std::string_view where, std::string_view field);

/// `v` as a finite number >= 0 (NLLs, seconds); with `whole` also a whole number up to 2^53
/// (bytes, entry counts). Throws Error("<where>: <field>: <v> is not a ...; delete it to have it
/// evaluated again"): what a study's unit file holds, checked when read back.
double json_unit_number(const nlohmann::json& v, std::string_view where, std::string_view field, bool whole = false);

}  // namespace kvcompact

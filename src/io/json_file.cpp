#include "io/json_file.h"

#include <fmt/format.h>

#include <fstream>

#include "core/error.h"

namespace kvcompact {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open", path));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
}

}  // namespace kvcompact

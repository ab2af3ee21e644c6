#include "io/json_file.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace kvcompact {

nlohmann::json read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(fmt::format("{}: is a folder, not a JSON file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open", path));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", path, e.what()));
  } catch (const std::ios_base::failure& e) {
    throw Error(fmt::format("{}: cannot read: {}", path, e.what()));
  }
}

}  // namespace kvcompact

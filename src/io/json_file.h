// Reading JSON files with errors that name the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvcompact {

/// Parses a JSON file. Throws Error "<path>: cannot open" or "<path>: not valid JSON: <why>".
nlohmann::json read_json_file(const std::string& path);

}  // namespace kvcompact

#include "tasks/task_suite.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "tasks/ruler_tasks.h"
#include "io/atomic_file.h"
#include "core/error.h"

namespace kvcompact {

const std::vector<std::string>& task_families() {
  static const std::vector<std::string> families = [] {
    std::vector<std::string> f = {"retrieval", "copy", "knowledge", "math", "inference"};
    for (const std::string& r : ruler_task_names()) f.push_back(r);
    return f;
  }();
  return families;
}

const std::vector<std::string>& answer_types() {
  static const std::vector<std::string> types = {"number", "word", "text", "recall"};
  return types;
}

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string required_string(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw Error(fmt::format("{}: missing field \"{}\"", where, key));
  if (!it->is_string()) throw Error(fmt::format("{}: field \"{}\" must be a string", where, key));
  return it->get<std::string>();
}

TaskItem parse_item(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error(fmt::format("{}: a task line must be a JSON object", where));
  TaskItem item;
  item.id = required_string(j, "id", where);
  item.family = required_string(j, "family", where);
  item.prompt = required_string(j, "prompt", where);
  item.reference = required_string(j, "reference", where);
  item.answer_type = required_string(j, "answer_type", where);
  if (item.id.empty()) throw Error(fmt::format("{}: empty \"id\"", where));
  if (item.prompt.empty()) throw Error(fmt::format("{}: empty \"prompt\"", where));
  if (item.reference.empty()) throw Error(fmt::format("{}: empty \"reference\"", where));
  if (!contains(task_families(), item.family))
    throw Error(fmt::format("{}: unknown family \"{}\" (expected one of: {})", where, item.family,
                            fmt::join(task_families(), ", ")));
  if (!contains(answer_types(), item.answer_type))
    throw Error(fmt::format("{}: unknown answer_type \"{}\" (expected one of: {})", where, item.answer_type,
                            fmt::join(answer_types(), ", ")));
  if (auto it = j.find("stop"); it != j.end()) {
    if (!it->is_array()) throw Error(fmt::format("{}: field \"stop\" must be an array of strings", where));
    item.stop.clear();
    for (const auto& s : *it) {
      if (!s.is_string()) throw Error(fmt::format("{}: field \"stop\" must be an array of strings", where));
      item.stop.push_back(s.get<std::string>());
    }
  }
  if (auto it = j.find("max_new_tokens"); it != j.end()) {
    if (!it->is_number_integer()) throw Error(fmt::format("{}: field \"max_new_tokens\" must be an integer", where));
    const long long v = it->get<long long>();
    if (v < 1 || v > 1000000)
      throw Error(fmt::format("{}: field \"max_new_tokens\" must be in 1..1000000, got {}", where, v));
    item.max_new_tokens = static_cast<int>(v);
  }
  if (auto it = j.find("depth"); it != j.end()) {
    if (!it->is_number()) throw Error(fmt::format("{}: field \"depth\" must be a number", where));
    item.depth = it->get<double>();
    if (!(item.depth >= 0.0 && item.depth <= 1.0))
      throw Error(fmt::format("{}: field \"depth\" must be in [0, 1], got {}", where, item.depth));
  }
  if (auto it = j.find("source"); it != j.end()) {
    if (!it->is_string()) throw Error(fmt::format("{}: field \"source\" must be a string", where));
    item.source = it->get<std::string>();
  }
  if (auto it = j.find("context"); it != j.end()) {
    if (!it->is_string()) throw Error(fmt::format("{}: field \"context\" must be a string", where));
    item.context = it->get<std::string>();
    if (item.context.empty()) throw Error(fmt::format("{}: empty \"context\"", where));
    if (item.context.size() >= item.prompt.size() || item.prompt.compare(0, item.context.size(), item.context) != 0)
      throw Error(fmt::format("{}: field \"context\" must be a prefix of \"prompt\" shorter than it", where));
  }
  if (auto it = j.find("references"); it != j.end()) {
    if (!it->is_array()) throw Error(fmt::format("{}: field \"references\" must be an array of strings", where));
    for (const auto& s : *it) {
      if (!s.is_string()) throw Error(fmt::format("{}: field \"references\" must be an array of strings", where));
      item.references.push_back(s.get<std::string>());
      if (item.references.back().empty()) throw Error(fmt::format("{}: empty string in \"references\"", where));
    }
  }
  if (item.answer_type == "recall" && item.references.empty())
    throw Error(fmt::format("{}: answer_type \"recall\" needs a non-empty \"references\" array", where));
  return item;
}

}  // namespace

std::vector<TaskItem> parse_task_suite(std::string_view text, const std::string& name) {
  std::vector<TaskItem> items;
  std::unordered_map<std::string, int> first_line;  // id -> line
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r\f\v") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", name, line_no);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number beyond double
      throw Error(fmt::format("{}: invalid JSON ({})", where, e.what()));
    }
    TaskItem item = parse_item(j, where);
    auto [it, inserted] = first_line.emplace(item.id, line_no);
    if (!inserted)
      throw Error(fmt::format("{}: duplicate id \"{}\" (first on line {})", where, item.id, it->second));
    items.push_back(std::move(item));
  }
  if (items.empty()) throw Error(fmt::format("{}: empty task file (no items)", name));
  return items;
}

std::vector<TaskItem> read_task_suite(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open task file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("{}: cannot read task file", path));
  return parse_task_suite(ss.str(), path);
}

std::string task_item_to_jsonl(const TaskItem& item) {
  nlohmann::ordered_json j;
  j["id"] = item.id;
  j["family"] = item.family;
  j["prompt"] = item.prompt;
  j["reference"] = item.reference;
  j["answer_type"] = item.answer_type;
  j["stop"] = item.stop;
  j["max_new_tokens"] = item.max_new_tokens;
  if (item.depth >= 0) j["depth"] = item.depth;
  if (!item.source.empty()) j["source"] = item.source;
  if (!item.context.empty()) j["context"] = item.context;
  if (!item.references.empty()) j["references"] = item.references;
  // Invalid UTF-8 is written as U+FFFD rather than aborting the whole file.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void write_task_suite(const std::string& path, const std::vector<TaskItem>& items) {
  std::string bytes;
  for (const TaskItem& item : items) bytes += task_item_to_jsonl(item) + "\n";
  parse_task_suite(bytes, path);  // never write a file that read_task_suite would reject
  write_file_atomic(path, bytes);
}

}  // namespace kvcompact

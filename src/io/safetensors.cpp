#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kvcompact {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr std::uint64_t kSafetensorsMaxHeader = 100'000'000;  // the Rust library's MAX_HEADER_SIZE
}  // namespace

std::size_t safetensors_dtype_size(const std::string& d) {
  static const std::unordered_map<std::string, std::size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"F8_E4M3FNUZ", 1},
      {"F8_E5M2FNUZ", 1}, {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"C64", 8}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  auto fail = [&](const std::string& msg) { throw Error(fmt::format("{}: {}", path, msg)); };
  const std::size_t size = file_.size();
  if (size < 8) fail(fmt::format("too small for a safetensors file ({} bytes; the header length alone is 8)", size));
  std::uint64_t n = 0;
  std::memcpy(&n, file_.data(), 8);
  if (n > size - 8)
    fail(fmt::format("truncated or corrupt: header length {} runs past the end of the file ({} bytes)", n, size));
  if (n > kSafetensorsMaxHeader) fail(fmt::format("header length {} is over the format's limit of {} bytes", n, kSafetensorsMaxHeader));
  const std::uint64_t buffer_start = 8 + n;
  const std::uint64_t buffer_size = size - buffer_start;
  json header;
  // The format forbids duplicate keys (nlohmann::json, like the Rust library's serde map for
  // tensor names and __metadata__, would silently keep the last): track the keys of every object.
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  int duplicate_depth = 0;
  const json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    else if (event == json::parse_event_t::object_end) keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
      duplicate_depth = depth;
    }
    return true;
  };
  try {
    header = json::parse(reinterpret_cast<const char*>(file_.data()) + 8,
                         reinterpret_cast<const char*>(file_.data()) + 8 + n, cb);
  } catch (const json::exception& e) {
    fail(fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (!header.is_object()) fail("header is not a JSON object");
  if (!duplicate.empty()) {
    if (duplicate_depth <= 1 && duplicate != "__metadata__") fail(fmt::format("tensor {} appears twice in the header (the format forbids duplicate names)", duplicate));
    fail(fmt::format("key '{}' appears twice in one object of the header (the format forbids duplicate keys)", duplicate));
  }
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      if (e.is_null()) continue;  // the Rust library reads null as "no metadata"
      if (!e.is_object()) fail("__metadata__ is not a JSON object");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) fail(fmt::format("__metadata__ value of '{}' is not a string", m.key()));
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!e.is_object()) fail(fmt::format("tensor {}: entry is not a JSON object", name));
    SafetensorsTensor t;
    t.name = name;
    t.file = path;
    if (!e.contains("dtype") || !e["dtype"].is_string()) fail(fmt::format("tensor {}: missing or non-string dtype", name));
    t.dtype = e["dtype"].get<std::string>();
    const std::size_t esize = safetensors_dtype_size(t.dtype);
    if (t.dtype == "F4" || t.dtype == "F6_E2M3" || t.dtype == "F6_E3M2")
      fail(fmt::format("tensor {}: sub-byte dtype '{}' is not supported", name, t.dtype));
    if (esize == 0) fail(fmt::format("tensor {}: unknown dtype '{}'", name, t.dtype));
    if (!e.contains("shape") || !e["shape"].is_array()) fail(fmt::format("tensor {}: missing shape array", name));
    t.n_elements = 1;
    for (const json& d : e["shape"]) {
      if (!d.is_number_integer()) fail(fmt::format("tensor {}: shape holds a non-integer", name));
      const std::int64_t v = d.get<std::int64_t>();
      if (v < 0) fail(fmt::format("tensor {}: negative dimension {}", name, v));
      if (v > 0 && t.n_elements > (std::uint64_t{1} << 50) / static_cast<std::uint64_t>(v))
        fail(fmt::format("tensor {}: shape is absurdly large", name));
      t.n_elements *= static_cast<std::uint64_t>(v);
      t.shape.push_back(v);
    }
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2 ||
        !e["data_offsets"][0].is_number_unsigned() || !e["data_offsets"][1].is_number_unsigned())
      fail(fmt::format("tensor {}: data_offsets is not a pair of non-negative integers", name));
    t.begin = e["data_offsets"][0].get<std::uint64_t>();
    t.end = e["data_offsets"][1].get<std::uint64_t>();
    if (t.begin > t.end)
      fail(fmt::format("tensor {}: data_offsets [{}, {}] has begin after end", name, t.begin, t.end));
    if (t.end > buffer_size)
      fail(fmt::format("truncated or corrupt: tensor {} needs bytes [{}, {}) of the data buffer, which has {} bytes",
                       name, t.begin, t.end, buffer_size));
    if (t.end - t.begin != t.n_elements * esize)
      fail(fmt::format("tensor {}: data_offsets [{}, {}] span {} bytes, but shape and dtype {} need {}", name,
                       t.begin, t.end, t.end - t.begin, t.dtype, t.n_elements * esize));
    t.data = file_.data() + buffer_start + t.begin;
    index_.emplace(name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  // The tensors, in data_offsets order, must tile the data buffer exactly: no overlap, no hole,
  // nothing after the last (the Rust library's Metadata::validate and MetadataIncompleteBuffer).
  std::vector<const SafetensorsTensor*> order;
  for (const auto& t : tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t covered = 0;
  const SafetensorsTensor* last = nullptr;
  for (const SafetensorsTensor* t : order) {
    if (t->begin < covered)
      fail(fmt::format("tensors {} [{}, {}) and {} [{}, {}) overlap", last->name, last->begin, last->end, t->name,
                       t->begin, t->end));
    if (t->begin > covered)
      fail(fmt::format("tensor {}: data_offsets [{}, {}) leave bytes [{}, {}) of the data buffer unused (the format forbids holes)",
                       t->name, t->begin, t->end, covered, t->begin));
    covered = t->end;
    last = t;
  }
  if (covered != buffer_size)
    fail(fmt::format("the data buffer has {} bytes but the tensors cover {} (the format forbids bytes no tensor indexes)",
                     buffer_size, covered));
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensor& SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (!t) throw Error(fmt::format("{}: tensor {} is missing", path(), name));
  return *t;
}

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& folder) : folder_(folder) {
  const fs::path dir(folder);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(fmt::format("{}: not a folder", folder));
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index, ec)) {
    const std::string ip = index.string();
    std::ifstream in(index, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open file", ip));
    json j;
    try {
      j = json::parse(in);
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: not valid JSON: {}", ip, e.what()));
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(fmt::format("{}: no weight_map object", ip));
    std::map<std::string, std::size_t> shard_index;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        throw Error(fmt::format("{}: weight_map entry {} is not a file name", ip, it.key()));
      const std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        throw Error(fmt::format("{}: weight_map entry {} names a bad shard file '{}'", ip, it.key(), shard));
      auto s = shard_index.find(shard);
      if (s == shard_index.end()) {
        files_.push_back(std::make_unique<SafetensorsFile>((dir / shard).string()));
        s = shard_index.emplace(shard, files_.size() - 1).first;
      }
      const SafetensorsFile& f = *files_[s->second];
      const SafetensorsTensor* t = f.find(it.key());
      if (!t)
        throw Error(fmt::format("{}: tensor {} is mapped to shard {}, which lacks it", ip, it.key(), shard));
      by_name_[it.key()] = t;
    }
    // Tensors a shard holds beyond the index are usable too (the index wins for mapped names).
    for (const auto& f : files_)
      for (const auto& t : f->tensors()) by_name_.emplace(t.name, &t);
    return;
  }
  fs::path single = dir / "model.safetensors";
  if (!fs::exists(single, ec)) {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".safetensors") found.push_back(e.path());
    if (found.size() != 1)
      throw Error(fmt::format("{}: no model.safetensors.index.json or model.safetensors ({} other .safetensors files)",
                              folder, found.size()));
    single = found[0];
  }
  files_.push_back(std::make_unique<SafetensorsFile>(single.string()));
  for (const auto& t : files_[0]->tensors()) by_name_[t.name] = &t;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const SafetensorsTensor& SafetensorsCheckpoint::tensor(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (!t) throw Error(fmt::format("{}: tensor {} is missing", folder_, name));
  return *t;
}

std::uint64_t SafetensorsCheckpoint::total_file_bytes() const {
  std::uint64_t n = 0;
  for (const auto& f : files_) n += f->file_size();
  return n;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t off = 0;
  for (const auto& t : tensors) {
    const std::size_t es = safetensors_dtype_size(t.dtype);
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= static_cast<std::uint64_t>(d);
    if (es == 0 || n * es != t.n_bytes)
      throw Error(fmt::format("{}: tensor {}: {} bytes do not match dtype {} and its shape", path, t.name,
                              t.n_bytes, t.dtype));
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.n_bytes}}};
    off += t.n_bytes;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(fmt::format("{}: cannot open for writing", path));
  const std::uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : tensors) out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.n_bytes));
  out.flush();
  if (!out) throw Error(fmt::format("{}: write failed", path));
}

}  // namespace kvcompact

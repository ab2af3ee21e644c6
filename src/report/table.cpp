#include "report/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace kvcompact {

Table::Table(std::vector<std::string> columns, int precision)
    : columns_(std::move(columns)), precision_(precision) {}

void Table::add_row(std::vector<Cell> row) {
  if (row.size() != columns_.size())
    throw Error(fmt::format("table row has {} cells, expected {}", row.size(), columns_.size()));
  rows_.push_back(std::move(row));
}

std::string Table::format_cell(const Cell& c) const {
  if (const auto* s = std::get_if<std::string>(&c)) return *s;
  if (const auto* i = std::get_if<long long>(&c)) return fmt::format("{}", *i);
  double d = std::get<double>(c);
  if (std::isnan(d)) return "nan";
  return fmt::format("{:.{}g}", d, precision_);
}

std::string Table::to_text() const {
  std::vector<std::size_t> width(columns_.size());
  for (std::size_t j = 0; j < columns_.size(); ++j) width[j] = columns_[j].size();
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : rows_) {
    std::vector<std::string> r;
    for (std::size_t j = 0; j < row.size(); ++j) {
      r.push_back(format_cell(row[j]));
      width[j] = std::max(width[j], r.back().size());
    }
    cells.push_back(std::move(r));
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    for (std::size_t j = 0; j < r.size(); ++j)
      out += fmt::format("{}{:>{}}", j ? "  " : "", r[j], width[j]);
    out += '\n';
  };
  line(columns_);
  for (const auto& r : cells) line(r);
  return out;
}

std::string Table::to_csv() const {
  auto quote = [](const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) {
      if (c == '"') q += '"';
      q += c;
    }
    return q + "\"";
  };
  std::string out;
  for (std::size_t j = 0; j < columns_.size(); ++j) {
    if (j) out += ',';
    out += quote(columns_[j]);
  }
  out += '\n';
  for (const auto& row : rows_) {
    for (std::size_t j = 0; j < row.size(); ++j) {
      std::string s;
      if (const auto* d = std::get_if<double>(&row[j]))
        s = std::isnan(*d) ? "nan" : fmt::format("{:.{}g}", *d, 17);
      else
        s = format_cell(row[j]);
      if (j) out += ',';
      out += quote(s);
    }
    out += '\n';
  }
  return out;
}

nlohmann::json Table::to_json() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& row : rows_) {
    nlohmann::json obj = nlohmann::json::object();
    for (std::size_t j = 0; j < row.size(); ++j) {
      const Cell& c = row[j];
      if (const auto* s = std::get_if<std::string>(&c)) obj[columns_[j]] = *s;
      else if (const auto* i = std::get_if<long long>(&c)) obj[columns_[j]] = *i;
      else {
        double d = std::get<double>(c);
        obj[columns_[j]] = std::isfinite(d) ? nlohmann::json(d) : nlohmann::json(nullptr);
      }
    }
    arr.push_back(std::move(obj));
  }
  return arr;
}

}  // namespace kvcompact

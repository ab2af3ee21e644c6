// A small results table that prints as aligned text, CSV or JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace kvcompact {

/// A cell: text, an integer, or a real number printed with the column's precision.
using Cell = std::variant<std::string, long long, double>;

/// Column-oriented results table. Column names are the CSV header and the JSON keys, so use the
/// project's standard terms with units (e.g. "delta_nll_mean" in nats/token).
class Table {
 public:
  /// `precision`: significant digits for double cells in text and CSV output (JSON keeps full
  /// precision).
  explicit Table(std::vector<std::string> columns, int precision = 6);

  /// Appends a row; throws Error when it has a different number of cells than columns.
  void add_row(std::vector<Cell> row);

  /// Aligned, human-readable text with a header line.
  std::string to_text() const;
  /// RFC 4180 CSV with a header line.
  std::string to_csv() const;
  /// JSON array of objects keyed by column name (NaN/inf become null).
  nlohmann::json to_json() const;

  const std::vector<std::string>& columns() const { return columns_; }
  std::size_t size() const { return rows_.size(); }

 private:
  std::string format_cell(const Cell& c) const;
  std::vector<std::string> columns_;
  std::vector<std::vector<Cell>> rows_;
  int precision_;
};

}  // namespace kvcompact

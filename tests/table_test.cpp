#include "report/table.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(Table, TextCsvJson) {
  Table t({"method", "ratio", "tokens"}, 3);
  t.add_row({std::string("am"), 0.123456, 42LL});
  t.add_row({std::string("a,\"b\""), std::nan(""), 7LL});
  EXPECT_EQ(t.to_text(),
            "method  ratio  tokens\n"
            "    am  0.123      42\n"
            " a,\"b\"    nan       7\n");
  EXPECT_EQ(t.to_csv(),
            "method,ratio,tokens\n"
            "am,0.123456,42\n"
            "\"a,\"\"b\"\"\",nan,7\n");
  auto j = t.to_json();
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["method"], "am");
  EXPECT_DOUBLE_EQ(j[0]["ratio"].get<double>(), 0.123456);
  EXPECT_TRUE(j[1]["ratio"].is_null());
  EXPECT_EQ(j[1]["tokens"], 7);
}

TEST(Table, RowOfWrongWidthThrows) {
  Table t({"a", "b"});
  EXPECT_THROW(t.add_row({1LL}), Error);
}

}}  // namespace
}  // namespace kvcompact

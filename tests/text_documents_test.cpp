#include "io/text_documents.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(TextDocuments, SplitsAtBlankAndWhitespaceOnlyLines) {
  auto docs = split_documents("  One.\nTwo.\n\nThree.\r\n \t \r\nFour.  \n\n\n");
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0], "One.\nTwo.");
  EXPECT_EQ(docs[1], "Three.");
  EXPECT_EQ(docs[2], "Four.");
}

TEST(TextDocuments, EmptyTextHasNoDocuments) {
  EXPECT_TRUE(split_documents("").empty());
  EXPECT_TRUE(split_documents("\n \n\t\n").empty());
}

TEST(TextDocuments, TinyStoriesFirstDocuments) {
  auto docs = read_documents(std::string(KVC_SHARED_DIR) + "/data/tinystories/tinystories_val_head.txt", 3);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].rfind("Spot. Spot saw the shiny car", 0), 0u);
  EXPECT_EQ(docs[1].rfind("After playing with the car", 0), 0u);
}

TEST(TextDocuments, MissingAndEmptyFilesNameTheFile) {
  std::filesystem::create_directories(KVC_TEST_TMP);
  const std::string empty = std::string(KVC_TEST_TMP) + "/empty_data.txt";
  { std::ofstream(empty) << "  \n\n"; }
  try {
    read_documents(empty);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty_data.txt"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos);
  }
  try {
    read_documents("/nonexistent/dir/x.txt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.txt"), std::string::npos);
  }
}

}}  // namespace
}  // namespace kvcompact

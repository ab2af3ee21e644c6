// Task suite JSONL format (tasks/task_suite.h): round trip and errors named by line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tasks/task_suite.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

std::string tmp_path(const std::string& name) {
  std::filesystem::create_directories(KVC_TEST_TMP);
  return std::string(KVC_TEST_TMP) + "/" + std::to_string(static_cast<long>(getpid())) + "_" + name;
}

// The message of the Error thrown by parsing `text` (empty when nothing is thrown).
std::string parse_error(const std::string& text) {
  try {
    parse_task_suite(text, "t.jsonl");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kGood =
    R"({"id":"a","family":"math","prompt":"1 + 1 =","reference":"2","answer_type":"number"})";

TEST(TaskSuite, ParsesDefaultsAndOptionalFields) {
  const std::string text = std::string(kGood) + "\n\n   \n" +
                           R"({"id":"b","family":"retrieval","prompt":"P","reference":"Paris","answer_type":"word",)"
                           R"("stop":["\n","."],"max_new_tokens":4,"depth":0.25,"source":"x:3","extra":1})" "\n";
  const std::vector<TaskItem> items = parse_task_suite(text, "t.jsonl");
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].id, "a");
  EXPECT_EQ(items[0].prompt, "1 + 1 =");
  EXPECT_EQ(items[0].stop, std::vector<std::string>{"\n"});  // default
  EXPECT_EQ(items[0].max_new_tokens, 16);                    // default
  EXPECT_LT(items[0].depth, 0);
  EXPECT_EQ(items[1].stop, (std::vector<std::string>{"\n", "."}));
  EXPECT_EQ(items[1].max_new_tokens, 4);
  EXPECT_DOUBLE_EQ(items[1].depth, 0.25);
  EXPECT_EQ(items[1].source, "x:3");
}

TEST(TaskSuite, WriteThenReadRoundTrips) {
  std::vector<TaskItem> items(2);
  items[0] = {"k-1", "knowledge", "The capital of France is", "Paris", "word", {"\n"}, 8, -1, "", "", {}};
  items[1] = {"c-1", "copy", "She said \"hi\"\n\tand \xC3\xA9 left.\n\nShe said", "\"hi\" and left", "text",
              {"\n", "</s>"}, 24, -1, "tinystories:3", "", {}};
  items[1].depth = 0.5;
  const std::string path = tmp_path("roundtrip.jsonl");
  write_task_suite(path, items);
  const std::vector<TaskItem> back = read_task_suite(path);
  ASSERT_EQ(back.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].id, items[i].id);
    EXPECT_EQ(back[i].family, items[i].family);
    EXPECT_EQ(back[i].prompt, items[i].prompt);
    EXPECT_EQ(back[i].reference, items[i].reference);
    EXPECT_EQ(back[i].answer_type, items[i].answer_type);
    EXPECT_EQ(back[i].stop, items[i].stop);
    EXPECT_EQ(back[i].max_new_tokens, items[i].max_new_tokens);
    EXPECT_EQ(back[i].depth, items[i].depth);
    EXPECT_EQ(back[i].source, items[i].source);
  }
  // One line per item: the newlines inside prompts are escaped.
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, 2);
}

TEST(TaskSuite, ErrorsNameFileAndLine) {
  const std::string good = std::string(kGood) + "\n";
  EXPECT_NE(parse_error(good + R"({"id":"b","family":"math","reference":"2","answer_type":"number"})")
                .find("t.jsonl:2: missing field \"prompt\""),
            std::string::npos);
  EXPECT_NE(parse_error(good + "\n{\"id\": \"b\", oops}\n").find("t.jsonl:3: invalid JSON"), std::string::npos);
  EXPECT_NE(parse_error(R"({"id":"a","family":"poetry","prompt":"p","reference":"r","answer_type":"text"})")
                .find("t.jsonl:1: unknown family \"poetry\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"id":"a","family":"math","prompt":"p","reference":"r","answer_type":"float"})")
                .find("t.jsonl:1: unknown answer_type \"float\""),
            std::string::npos);
  EXPECT_NE(parse_error(good + good).find("t.jsonl:2: duplicate id \"a\" (first on line 1)"), std::string::npos);
  EXPECT_NE(parse_error(R"({"id":"a","family":"math","prompt":"p","reference":"r","answer_type":"number","max_new_tokens":0})")
                .find("t.jsonl:1: field \"max_new_tokens\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"id":"a","family":"math","prompt":"p","reference":"r","answer_type":"number","stop":"\n"})")
                .find("t.jsonl:1: field \"stop\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"id":7,"family":"math","prompt":"p","reference":"r","answer_type":"number"})")
                .find("t.jsonl:1: field \"id\" must be a string"),
            std::string::npos);
  EXPECT_NE(parse_error("[1, 2]").find("t.jsonl:1: a task line must be a JSON object"), std::string::npos);
  EXPECT_NE(parse_error("\n  \n").find("t.jsonl: empty task file"), std::string::npos);
  EXPECT_EQ(parse_error(good), "");
}

TEST(TaskSuite, ContextAndReferencesRoundTripAndAreValidated) {
  TaskItem item;
  item.id = "r-0";
  item.family = "ruler_niah_single_1";
  item.prompt = "Doc text.\nWhat is it? It is";
  item.context = "Doc text.";
  item.reference = "12, 34";
  item.references = {"12", "34"};
  item.answer_type = "recall";
  item.stop = {};
  item.max_new_tokens = 128;
  const std::string line = task_item_to_jsonl(item);
  EXPECT_NE(line.find(R"("context":"Doc text.","references":["12","34"])"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("stop":[])"), std::string::npos) << line;
  const std::vector<TaskItem> back = parse_task_suite(line, "t.jsonl");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].context, item.context);
  EXPECT_EQ(back[0].references, item.references);
  EXPECT_TRUE(back[0].stop.empty());
  // Items without them write neither key (old files and old readers stay as they were).
  EXPECT_EQ(task_item_to_jsonl(parse_task_suite(kGood, "t.jsonl")[0]).find("context"), std::string::npos);

  const std::string head = R"({"id":"a","family":"math","prompt":"abc?","reference":"r","answer_type":"text",)";
  EXPECT_EQ(parse_error(head + R"("context":"ab"})"), "");
  EXPECT_NE(parse_error(head + R"("context":"xb"})").find("t.jsonl:1: field \"context\" must be a prefix"),
            std::string::npos);
  EXPECT_NE(parse_error(head + R"("context":"abc?"})").find("must be a prefix of \"prompt\" shorter than it"),
            std::string::npos);
  EXPECT_NE(parse_error(head + R"("context":""})").find("t.jsonl:1: empty \"context\""), std::string::npos);
  EXPECT_NE(parse_error(head + R"("context":3})").find("field \"context\" must be a string"), std::string::npos);
  EXPECT_NE(parse_error(head + R"("references":["a",""]})").find("empty string in \"references\""),
            std::string::npos);
  EXPECT_NE(parse_error(head + R"("references":"a"})").find("field \"references\" must be an array"),
            std::string::npos);
  const std::string recall = R"({"id":"a","family":"ruler_vt","prompt":"p","reference":"r","answer_type":"recall")";
  EXPECT_NE(parse_error(recall + "}").find("t.jsonl:1: answer_type \"recall\" needs a non-empty \"references\""),
            std::string::npos);
  EXPECT_NE(parse_error(recall + R"(,"references":[]})").find("needs a non-empty"), std::string::npos);
  EXPECT_EQ(parse_error(recall + R"(,"references":["X","Y"]})"), "");
}

TEST(TaskSuite, MissingFileIsNamed) {
  try {
    read_task_suite("/nonexistent/tasks.jsonl");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tasks.jsonl"), std::string::npos);
  }
}

TEST(TaskSuite, WriteRejectsInvalidItems) {
  TaskItem bad;
  bad.id = "x";
  bad.family = "poetry";
  bad.prompt = "p";
  bad.reference = "r";
  bad.answer_type = "text";
  EXPECT_THROW(write_task_suite(tmp_path("bad.jsonl"), {bad}), Error);
  EXPECT_FALSE(std::filesystem::exists(tmp_path("bad.jsonl")));
}

}}  // namespace
}  // namespace kvcompact

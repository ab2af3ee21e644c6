// `--chat` on generate, qa-eval and influence --qa (issue #6 leftover): a random-weight Qwen3
// checkpoint written by the test, with the real Qwen3 tokenizer.json and tokenizer_config.json
// beside it. The wrapped prompt must be the ChatML text Qwen3's template renders; models without
// a template (stories260K) are refused with one line. chat-render keeps message fields, reads GGUF
// templates and reports undefined-attribute errors naming the template.
#include <gtest/gtest.h>

#include "cli_runner.h"
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "studies/influence.h"
#include "studies/qa_eval.h"
#include "hf_test_util.h"
#include "core/error.h"
#include "io/hf_tokenizer.h"
#include "io/json_file.h"
#include "loaders/model_loader.h"
#include "model/model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

namespace fs = std::filesystem;
const std::string kShared = KVC_SHARED_DIR;
const std::string kQwenTok = kShared + "/data/tokenizers/qwen3";
constexpr int kImStart = 151644, kImEnd = 151645;  // Qwen3's <|im_start|>, <|im_end|> ids

using CliResult = testing::CliRun;
using testing::run_cli;

/// Random Qwen3 (BF16, vocabulary of the real tokenizer) with the real tokenizer files beside it.
const std::string& qwen3_dir() {
  static const std::string dir = [] {
    testing::HfSpec s;
    s.arch = "Qwen3ForCausalLM";
    s.head_dim = 16;
    s.tied = true;
    s.rope_theta = 1e6;
    s.vocab = 151669;  // the tokenizer's size (the real checkpoint pads its rows to 151936)
    // per process: ctest runs this file's tests in parallel processes, each writing its checkpoint
    const std::string d =
        testing::write_random_hf_checkpoint("chat_qwen3_" + std::to_string(static_cast<long>(getpid())), s, "BF16");
    fs::copy_file(kQwenTok + "/tokenizer.json", d + "/tokenizer.json", fs::copy_options::overwrite_existing);
    fs::copy_file(kQwenTok + "/tokenizer_config.json", d + "/tokenizer_config.json",
                  fs::copy_options::overwrite_existing);
    return d;
  }();
  return dir;
}

class ChatCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kQwenTok + "/tokenizer_config.json")) GTEST_SKIP() << "shared Qwen3 tokenizer missing";
  }
};

TEST_F(ChatCli, GenerateWrapsThePromptInQwen3ChatMl) {
  const CliResult r = run_cli("generate --model " + qwen3_dir() + " --chat --prompt \"Hi there\" --temperature 0 --steps 3 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("chat").get<bool>());
  const auto ids = j.at("prompt_tokens").get<std::vector<int>>();
  // Qwen3's template: "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n" (no BOS).
  const auto tok = load_hf_tokenizer(kQwenTok);
  const std::vector<int> want =
      tok->encode("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", /*add_bos=*/false);
  EXPECT_EQ(ids, want);
  ASSERT_GE(ids.size(), 6u);
  EXPECT_EQ(ids.front(), kImStart);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kImEnd), 1);
  // Without --chat the prompt is the plain text.
  const CliResult plain = run_cli("generate --model " + qwen3_dir() + " --prompt \"Hi there\" --temperature 0 --steps 3 --json");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out).at("prompt_tokens").get<std::vector<int>>(),
            tok->encode("Hi there", false));
}

TEST_F(ChatCli, ModelsWithoutATemplateAreRefusedInOneLine) {
  const std::string bin = kShared + "/models/stories260K/stories260K.bin";
  for (const std::string& cmd : {"generate --model " + bin + " --chat --prompt Hi --steps 3",
                                "qa-eval --model " + bin + " --chat --data " + bin}) {
    const CliResult r = run_cli(cmd);
    EXPECT_EQ(r.status, 1) << cmd;
    EXPECT_NE(r.err.find("no chat template"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST_F(ChatCli, QaArticleIsTheUserMessageAndTheContextEndsWithTheArticle) {
  Model m = load_model(qwen3_dir());
  QaArticle a;
  a.id = "x";
  a.article = "Tom had a red ball. He gave it to Sue.";
  a.questions = {{"Who got the ball?", {"Sue", "Tom"}, 1}};
  QaEvalOptions o;
  o.chat = find_chat_template(qwen3_dir(), "");
  o.max_answer_tokens = 4;
  o.progress = false;
  const QaArticleTokens t = tokenize_qa_article(m, a, o);
  EXPECT_EQ(t.context_text, "<|im_start|>user\n" + a.article);
  ASSERT_EQ(t.prompts.size(), 1u);
  EXPECT_EQ(t.prompts[0], "\n\nQuestion: Who got the ball?\nAnswer:<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.context.front(), kImStart);
  EXPECT_EQ(t.prompt_ids[0][t.prompt_ids[0].size() - 3], kImStart);  // <|im_start|> assistant \n
  // qa-eval and influence --qa run end to end with the template.
  const std::string data = std::string(KVC_TEST_TMP) + "/chat_qa.jsonl";
  std::ofstream(data) << qa_article_to_jsonl(a) << "\n";
  const CliResult r = run_cli("qa-eval --model " + qwen3_dir() + " --chat --data " + data +
                        " --ratios 0.5 --methods recent --max-answer-tokens 3 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out).at("chat").get<bool>());
  const std::string out = std::string(KVC_TEST_TMP) + "/chat_influence";
  fs::remove_all(out);
  const CliResult inf = run_cli("influence --model " + qwen3_dir() + " --qa " + data + " --chat --heads L1H0 --ratios 0,0.5,1 "
                          "--baseline 0.5 --max-answer-tokens 3 --out " + out + " --json");
  ASSERT_EQ(inf.status, 0) << inf.err;
  EXPECT_EQ(nlohmann::json::parse(inf.out).at("evaluated").get<std::string>(), "qa-answers");
  EXPECT_TRUE(read_json_file(out + "/docs/doc_00000.json").at("qa").at("chat").get<bool>());
}

}}  // namespace
}  // namespace kvcompact

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

// chat-render passes every message field through in its order (the library's rendering is
// checked against transformers in chat_template_test) and reads a GGUF file's template.
TEST_F(ChatCli, ChatRenderKeepsMessageFieldsAndReadsGguf) {
  const std::string msgs = std::string(KVC_TEST_TMP) + "/chat_render_msgs_" + std::to_string(static_cast<long>(getpid())) + ".json";
  std::ofstream(msgs) << R"([{"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"z": 1, "a": [2.5, null]}}}]}])";
  const CliResult r = run_cli("chat-render --tokenizer-config " + kQwenTok + " --messages @" + msgs + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(nlohmann::json::parse(r.out).at("text").get<std::string>().find(
                "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"z\": 1, \"a\": [2.5, null]}}\n</tool_call><|im_end|>"),
            std::string::npos)
      << r.out;
  const std::string gguf = std::string(KVC_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  ASSERT_TRUE(fs::exists(gguf)) << gguf << " missing: run scripts/fetch_models.sh";
  const CliResult g = run_cli("chat-render --tokenizer-config " + gguf +
                              " --messages '[{\"role\": \"user\", \"content\": \"Hi\"}]' --add-generation-prompt --json");
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out).at("text").get<std::string>(),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // An attribute of an undefined value is an error naming the template, as jinja2 raises.
  const std::string bad = std::string(KVC_TEST_TMP) + "/chat_render_bad_" + std::to_string(static_cast<long>(getpid())) + ".jinja";
  std::ofstream(bad) << "{{ messages[0].nope.x }}";
  const CliResult b = run_cli("chat-render --tokenizer-config " + bad + " --messages '[{\"role\": \"user\", \"content\": \"Hi\"}]'");
  EXPECT_EQ(b.status, 1);
  EXPECT_NE(b.err.find(bad + ": line 1: 'dict object' has no attribute 'nope'"), std::string::npos) << b.err;
}

}}  // namespace
}  // namespace kvcompact

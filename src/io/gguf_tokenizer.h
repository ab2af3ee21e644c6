// The vocabulary embedded in a GGUF file (tokenizer.ggml.* metadata, the keys llama.cpp's
// llama-vocab.cpp reads), as a kvcompact Tokenizer that tokenizes exactly as llama.cpp does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/tokenizer.h"

namespace kvcompact {

/// llama.cpp token types (tokenizer.ggml.token_type; llama.h `enum llama_token_type`).
enum class GgufTokenType : int { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

/// The pre-tokenizer regexes llama.cpp applies (in order, each splitting the pieces of the one
/// before, matches kept as their own pieces) for a `tokenizer.ggml.pre` name, and whether that
/// name turns on ignore_merges (a word that is itself a token is not split). An absent key is
/// llama.cpp's "default". Throws Error naming `source` and the name for a name kvcompact does
/// not know (never a silent fallback).
struct GgufPreTokenizer {
  std::vector<std::string> regexes;
  bool ignore_merges = false;
  bool add_bos_default = false;  ///< llama3 / tekken / chameleon turn BOS on unless the file says
};
GgufPreTokenizer gguf_pre_tokenizer(const std::string& name, const std::string& source);

/// Loads the GGUF vocabulary:
///  - `tokenizer.ggml.model = "llama"` (SentencePiece, llama.cpp's SPM session): pieces with U+2581
///    read as ' ', merge scores, byte fallback `<0xNN>`; the dummy space prefix when
///    `tokenizer.ggml.add_space_prefix` (default true) at the start and after each special token;
///    BOS added by default.
///  - `tokenizer.ggml.model = "gpt2"` (byte-level BPE): tokens, ranked merges
///    (`tokenizer.ggml.merges`, "left right"), the pre-tokenizer of `tokenizer.ggml.pre`
///    (gguf_pre_tokenizer), GPT-2 byte-to-unicode alphabet; BOS not added by default.
/// Both: text is read as llama.cpp reads it (invalid UTF-8 bytes become U+FFFD each; one known
/// difference: an encoded surrogate such as ED A0 80, which llama.cpp hands to byte-level BPE as
/// its three bytes, becomes U+FFFD here);
/// tokens typed Control, UserDefined or Unknown in `tokenizer.ggml.token_type` are found in
/// the text first and become their own ids (llama.cpp tokenize with parse_special = true);
/// `tokenizer.ggml.add_bos_token` / `add_eos_token` decide whether encode(text, true) puts BOS in
/// front / EOS at the end (encode(text, false) adds neither). bos/eos ids from
/// `tokenizer.ggml.bos_token_id` / `eos_token_id`.
/// Throws Error naming the file and the key for other models, unknown pre-tokenizers, arrays of
/// different lengths, ids out of range, merges naming tokens that do not exist.
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& file);

}  // namespace kvcompact

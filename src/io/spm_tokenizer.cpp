// SentencePiece-style BPE tokenizer (llama2.c run.c semantics): see spm_tokenizer.h.
#include "io/spm_tokenizer.h"

#include <cmath>
#include <queue>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/// 0..255 when `p` is exactly "<0xNN>" (hex digits), else -1 (run.c: sscanf "<0x%02hhX>").
int parse_byte_piece(const std::string& p) {
  if (p.size() != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
  int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

// run.c only merges pairs whose score beats its initial best_score of -1e10.
constexpr float kMinMergeScore = -1e10f;

}  // namespace

SpmTokenizer::SpmTokenizer(std::vector<std::string> pieces, std::vector<float> scores, int bos_id,
                           int eos_id, std::string source)
    : pieces_(std::move(pieces)),
      scores_(std::move(scores)),
      bos_id_(bos_id),
      eos_id_(eos_id),
      source_(std::move(source)) {
  if (pieces_.empty()) throw Error(fmt::format("{}: tokenizer vocabulary is empty", source_));
  if (pieces_.size() != scores_.size()) {
    throw Error(fmt::format("{}: tokenizer has {} pieces but {} scores", source_, pieces_.size(),
                            scores_.size()));
  }
  const int n = vocab_size();
  if (bos_id_ < 0 || bos_id_ >= n || eos_id_ < 0 || eos_id_ >= n) {
    throw Error(fmt::format("{}: BOS id {} / EOS id {} out of range for a vocabulary of {} tokens",
                            source_, bos_id_, eos_id_, n));
  }
  for (int i = 0; i < 256; ++i) byte_token_[i] = -1;
  byte_value_.assign(pieces_.size(), -1);
  index_.reserve(pieces_.size() * 2);
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(scores_[i])) {
      throw Error(fmt::format("{}: token {} has a non-finite score", source_, i));
    }
    index_.emplace(pieces_[i], i);  // keeps the first id of duplicate pieces
    int b = parse_byte_piece(pieces_[i]);
    if (b >= 0) {
      byte_value_[i] = static_cast<int16_t>(b);
      if (byte_token_[b] < 0) byte_token_[b] = i;
    }
  }
}

void SpmTokenizer::check_token(int token) const {
  if (token < 0 || token >= vocab_size()) {
    throw Error(fmt::format("{}: token id {} out of range [0, {})", source_, token, vocab_size()));
  }
}

const std::string& SpmTokenizer::piece(int token) const {
  check_token(token);
  return pieces_[token];
}

float SpmTokenizer::score(int token) const {
  check_token(token);
  return scores_[token];
}

int SpmTokenizer::lookup(std::string_view p) const {
  auto it = index_.find(std::string(p));
  return it == index_.end() ? -1 : it->second;
}

std::string SpmTokenizer::decode_token(int prev, int token) const {
  check_token(token);
  const std::string& p = pieces_[token];
  if (byte_value_[token] >= 0) return std::string(1, static_cast<char>(byte_value_[token]));
  if (prev == bos_id_ && !p.empty() && p[0] == ' ') return p.substr(1);
  return p;
}

std::vector<int> SpmTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> ids = encode_fragment(text, /*dummy_prefix=*/true);
  if (add_bos) ids.insert(ids.begin(), bos_id_);
  return ids;
}

std::vector<int> SpmTokenizer::encode_fragment(std::string_view text, bool dummy_prefix) const {
  std::vector<int> ids;
  ids.reserve(text.size() + 2);
  if (dummy_prefix && !text.empty()) {
    // Dummy prefix: run.c looks up " " (if absent, fall back to the byte token like any text).
    int sp = lookup(" ");
    if (sp >= 0) {
      ids.push_back(sp);
    } else if (byte_token_[0x20] >= 0) {
      ids.push_back(byte_token_[0x20]);
    } else {
      throw Error(fmt::format("{}: vocabulary has neither \" \" nor <0x20> for the dummy prefix",
                              source_));
    }
  }
  // Codepoints, grouped exactly as run.c does it.
  std::string buf;
  for (std::size_t c = 0; c < text.size(); ++c) {
    const auto byte = static_cast<unsigned char>(text[c]);
    if ((byte & 0xC0) != 0x80) buf.clear();
    buf.push_back(static_cast<char>(byte));
    if (c + 1 < text.size() && (static_cast<unsigned char>(text[c + 1]) & 0xC0) == 0x80 &&
        buf.size() < 4) {
      continue;
    }
    auto it = index_.find(buf);
    if (it != index_.end()) {
      ids.push_back(it->second);
    } else {
      for (char ch : buf) {
        int t = byte_token_[static_cast<unsigned char>(ch)];
        if (t < 0) {
          throw Error(fmt::format("{}: vocabulary has no byte token <0x{:02X}> for byte fallback",
                                  source_, static_cast<unsigned char>(ch)));
        }
        ids.push_back(t);
      }
    }
    buf.clear();
  }

  // Merges: doubly linked list over symbol slots + max-heap of candidate pairs ordered by
  // (score desc, left slot asc). Slot order equals token order, so "leftmost on ties" is the
  // smallest left slot, exactly like run.c's strict '>' scan from the left.
  const int n = static_cast<int>(ids.size());
  if (n >= 2) {
    std::vector<int> prev(n), next(n);
    for (int i = 0; i < n; ++i) {
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    struct Cand {
      float score;
      int left, right;       // slots
      int left_id, right_id;  // ids when queued (staleness check)
      int merged_id;
    };
    auto worse = [](const Cand& a, const Cand& b) {
      if (a.score != b.score) return a.score < b.score;
      return a.left > b.left;
    };
    std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> heap(worse);
    std::string cat;
    auto push_pair = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      cat.assign(pieces_[ids[l]]);
      cat.append(pieces_[ids[r]]);
      auto it = index_.find(cat);
      if (it == index_.end()) return;
      const float s = scores_[it->second];
      if (!(s > kMinMergeScore)) return;
      heap.push(Cand{s, l, r, ids[l], ids[r], it->second});
    };
    for (int i = 0; i + 1 < n; ++i) push_pair(i, i + 1);
    std::vector<char> alive(n, 1);
    while (!heap.empty()) {
      Cand c = heap.top();
      heap.pop();
      if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right ||
          ids[c.left] != c.left_id || ids[c.right] != c.right_id) {
        continue;  // stale
      }
      ids[c.left] = c.merged_id;
      alive[c.right] = 0;
      next[c.left] = next[c.right];
      if (next[c.right] >= 0) prev[next[c.right]] = c.left;
      push_pair(prev[c.left], c.left);
      push_pair(c.left, next[c.left]);
    }
    std::vector<int> merged;
    merged.reserve(n);
    for (int i = 0; i >= 0; i = next[i]) merged.push_back(ids[i]);
    ids.swap(merged);
  }
  return ids;
}

}  // namespace kvcompact

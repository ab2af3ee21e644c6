// llama.cpp's SPM session (llm_tokenizer_spm_session in llama-vocab.cpp): see spm_session.h.
#include "io/spm_session.h"

#include <algorithm>
#include <map>
#include <queue>

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {

namespace {

/// unicode.cpp unicode_len_utf8: bytes of a UTF-8 sequence by its lead byte's high nibble.
std::size_t utf8_len(char lead) {
  static const std::size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[static_cast<unsigned char>(lead) >> 4];
}

struct Symbol {
  int prev, next;
  std::size_t off, n;  // bytes of the escaped text
};

struct Bigram {
  int left, right;
  float score;
  std::size_t size;
};

struct BigramWorse {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

}  // namespace

SpmSession::SpmSession(const std::vector<std::string>& pieces, const std::vector<float>& scores, std::string source)
    : scores_(scores), source_(std::move(source)) {
  index_.reserve(pieces.size() * 2);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    // llama.cpp renames empty pieces "[EMPTY_i]"; duplicates keep the last id (token_to_id).
    index_[pieces[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : pieces[i]] = static_cast<int>(i);
  }
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
    int t = lookup(buf);
    if (t < 0) t = lookup(std::string(1, static_cast<char>(b)));
    byte_tokens_[b] = t;
  }
}

int SpmSession::lookup(std::string_view piece) const {
  const auto it = index_.find(std::string(piece));
  return it == index_.end() ? -1 : it->second;
}

int SpmSession::byte_token(unsigned char b) const {
  if (byte_tokens_[b] < 0)
    throw Error(fmt::format("{}: vocabulary has no byte token <0x{:02X}> for byte fallback", source_, b));
  return byte_tokens_[b];
}

std::vector<int> SpmSession::tokenize(std::string_view raw) const {
  static const std::string kSpace = "\xE2\x96\x81";
  std::string text;
  text.reserve(raw.size() + raw.size() / 2);
  for (char c : raw) {
    if (c == ' ') {
      text += kSpace;
    } else {
      text.push_back(c);
    }
  }
  std::vector<int> out;
  if (text.empty()) return out;
  std::vector<Symbol> sym;
  for (std::size_t off = 0; off < text.size();) {
    const std::size_t n = std::min(utf8_len(text[off]), text.size() - off);
    const int index = static_cast<int>(sym.size());
    sym.push_back({index - 1, off + n == text.size() ? -1 : index + 1, off, n});
    off += n;
  }
  std::priority_queue<Bigram, std::vector<Bigram>, BigramWorse> queue;
  std::map<std::string, std::pair<int, int>> rev_merge;
  auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    std::string cat = text.substr(sym[left].off, sym[left].n + sym[right].n);
    const int token = lookup(cat);
    if (token < 0) return;
    queue.push({left, right, scores_[token], cat.size()});
    rev_merge[std::move(cat)] = {left, right};
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  // Resegment (recursive in llama.cpp; an explicit stack here, same order).
  std::vector<int> stack;
  for (int i = 0; i != -1; i = sym[i].next) {
    stack.push_back(i);
    while (!stack.empty()) {
      const int s = stack.back();
      stack.pop_back();
      const std::string piece = text.substr(sym[s].off, sym[s].n);
      const int token = lookup(piece);
      if (token >= 0) {
        out.push_back(token);
        continue;
      }
      const auto p = rev_merge.find(piece);
      if (p == rev_merge.end()) {
        for (char c : piece) out.push_back(byte_token(static_cast<unsigned char>(c)));
        continue;
      }
      stack.push_back(p->second.second);
      stack.push_back(p->second.first);
    }
  }
  return out;
}

}  // namespace kvcompact

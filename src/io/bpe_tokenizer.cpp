// BPE model of tokenizer.json; see bpe_tokenizer.h.
#include "io/bpe_tokenizer.h"

#include <fmt/format.h>

#include <queue>

#include "core/error.h"
#include "core/utf8.h"

namespace kvcompact {
namespace {

struct ByteMaps {
  std::array<std::uint32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8{};
  std::unordered_map<std::uint32_t, int> from_cp;
  ByteMaps() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? static_cast<std::uint32_t>(b) : static_cast<std::uint32_t>(256 + n++);
      to_utf8[b] = utf8::encode(to_cp[b]);
      from_cp[to_cp[b]] = b;
    }
  }
};

const ByteMaps& byte_maps() {
  static const ByteMaps maps;
  return maps;
}

}  // namespace

std::uint32_t byte_to_unicode(unsigned char b) { return byte_maps().to_cp[b]; }

int unicode_to_byte(std::uint32_t cp) {
  const auto& m = byte_maps().from_cp;
  auto it = m.find(cp);
  return it == m.end() ? -1 : it->second;
}

void append_byte_level(std::string& out, std::string_view bytes) {
  const auto& m = byte_maps().to_utf8;
  for (char c : bytes) out += m[static_cast<unsigned char>(c)];
}

BpeModel::BpeModel(std::unordered_map<std::string, int> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, Options options,
                   const std::string& source)
    : vocab_(std::move(vocab)), options_(std::move(options)), source_(source) {
  merges_.reserve(merges.size() * 2);
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const int ia = token_id(a), ib = token_id(b), im = token_id(a + b);
    if (ia < 0 || ib < 0) {
      throw Error(fmt::format("{}: merge {} ('{}' '{}') names a token missing from the vocabulary", source, r, a, b));
    }
    if (im < 0) {
      throw Error(fmt::format("{}: merge {} ('{}' '{}'): merged token missing from the vocabulary", source, r, a, b));
    }
    merges_.insert_or_assign(key(ia, ib), Merge{static_cast<int>(r), im});  // a repeated pair: the last rank wins, as in the library
  }
  for (int b = 0; b < 256; ++b) byte_tokens_[b] = token_id(fmt::format("<0x{:02X}>", b));
  if (!options_.unk_token.empty()) unk_id_ = token_id(options_.unk_token);
}

int BpeModel::token_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (int id = token_id(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  std::string w;
  if (cacheable) {
    w.assign(word);
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(w);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::move(w), std::move(ids));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int>& out) const {
  struct Symbol {
    int id;          // vocabulary id
    int prev, next;  // neighbours, -1 at the ends
    bool alive;
  };
  std::vector<Symbol> sym;
  auto add = [&](int id) {
    const int n = static_cast<int>(sym.size());
    sym.push_back({id, n - 1, -1, true});
    if (n > 0) sym[n - 1].next = n;
  };
  bool pending_unk = false;  // an unk symbol not yet added (the library's `unk`)
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t b = i;
    utf8::next(word, i);
    if (const int id = token_id(word.substr(b, i - b)); id >= 0) {
      if (pending_unk) add(unk_id_);
      pending_unk = false;
      add(id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (std::size_t k = b; k < i; ++k) all = all && byte_tokens_[static_cast<unsigned char>(word[k])] >= 0;
      if (all) {
        for (std::size_t k = b; k < i; ++k) add(byte_tokens_[static_cast<unsigned char>(word[k])]);
        continue;
      }
    }
    if (options_.unk_token.empty()) continue;
    if (unk_id_ < 0) {
      throw Error(fmt::format("{}: unk_token '{}' is not in the vocabulary (needed for a character of '{}')", source_,
                              options_.unk_token, std::string(word)));
    }
    if (pending_unk && !options_.fuse_unk) add(unk_id_);
    pending_unk = true;
  }
  if (pending_unk) add(unk_id_);

  struct Cand {
    int rank;
    int pos;
    int new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
  auto lookup = [&](int pos) -> const Merge* {
    const int nx = sym[pos].next;
    if (nx < 0) return nullptr;
    auto it = merges_.find(key(sym[pos].id, sym[nx].id));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (int p = 0; p + 1 < static_cast<int>(sym.size()); ++p) {
    if (const Merge* m = lookup(p)) queue.push({m->rank, p, m->id});
  }
  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    if (!sym[c.pos].alive) continue;
    const Merge* m = lookup(c.pos);
    if (!m || m->id != c.new_id) continue;  // stale entry (the library compares the merged id)
    const int nx = sym[c.pos].next;
    sym[c.pos].id = c.new_id;
    sym[c.pos].next = sym[nx].next;
    sym[nx].alive = false;
    if (sym[c.pos].next >= 0) sym[sym[c.pos].next].prev = c.pos;
    if (const int pv = sym[c.pos].prev; pv >= 0) {
      if (const Merge* mp = lookup(pv)) queue.push({mp->rank, pv, mp->id});
    }
    if (const Merge* mn = lookup(c.pos)) queue.push({mn->rank, c.pos, mn->id});
  }
  for (int p = sym.empty() ? -1 : 0; p >= 0; p = sym[p].next) out.push_back(sym[p].id);
}

}  // namespace kvcompact

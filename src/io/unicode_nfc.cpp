// NFC normalization (UAX #15) with generated tables; see unicode_nfc.h.
#include "io/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "core/utf8.h"

namespace kvcompact {
namespace {

#include "io/unicode_nfc_tables.inc"

constexpr std::uint32_t kInvalid = 0xFFFFFFFFu;  // marks an invalid byte (stored in `raw`)
constexpr std::uint32_t SBase = 0xAC00, LBase = 0x1100, VBase = 0x1161, TBase = 0x11A7;
constexpr std::uint32_t LCount = 19, VCount = 21, TCount = 28, NCount = VCount * TCount,
                        SCount = LCount * NCount;

int ccc(std::uint32_t cp) {
  if (cp < 0x300 || cp == kInvalid) return 0;
  const auto* end = std::end(kCcc);
  const auto* it = std::lower_bound(std::begin(kCcc), end, cp,
                                    [](const std::uint32_t (&e)[2], std::uint32_t c) { return e[0] < c; });
  return (it != end && (*it)[0] == cp) ? static_cast<int>((*it)[1]) : 0;
}

const std::uint32_t* decomposition(std::uint32_t cp) {
  if (cp < 0xC0 || cp == kInvalid) return nullptr;
  const auto* end = std::end(kDecomp);
  const auto* it = std::lower_bound(std::begin(kDecomp), end, cp,
                                    [](const std::uint32_t (&e)[3], std::uint32_t c) { return e[0] < c; });
  return (it != end && (*it)[0] == cp) ? *it : nullptr;
}

/// Primary composite of (a, b), or 0.
std::uint32_t compose(std::uint32_t a, std::uint32_t b) {
  if (a >= LBase && a < LBase + LCount && b >= VBase && b < VBase + VCount) {
    return SBase + ((a - LBase) * VCount + (b - VBase)) * TCount;
  }
  if (a >= SBase && a < SBase + SCount && (a - SBase) % TCount == 0 && b > TBase && b < TBase + TCount) {
    return a + (b - TBase);
  }
  const auto* end = std::end(kComp);
  const auto* it = std::lower_bound(std::begin(kComp), end, std::pair{a, b},
                                    [](const std::uint32_t (&e)[3], std::pair<std::uint32_t, std::uint32_t> k) {
                                      return e[0] < k.first || (e[0] == k.first && e[1] < k.second);
                                    });
  return (it != end && (*it)[0] == a && (*it)[1] == b) ? (*it)[2] : 0;
}

void decompose(std::uint32_t cp, std::vector<std::uint32_t>& out) {
  if (cp >= SBase && cp < SBase + SCount) {
    const std::uint32_t s = cp - SBase;
    out.push_back(LBase + s / NCount);
    out.push_back(VBase + (s % NCount) / TCount);
    if (s % TCount != 0) out.push_back(TBase + s % TCount);
    return;
  }
  const std::uint32_t* d = decomposition(cp);
  if (!d) {
    out.push_back(cp);
    return;
  }
  decompose(d[1], out);
  if (d[2] != 0) decompose(d[2], out);
}

}  // namespace

const char* nfc_unicode_version() { return kNfcUnicodeVersion; }

std::string nfc_normalize(std::string_view text) {
  // Fast path: ASCII is always NFC.
  bool ascii = true;
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) { ascii = false; break; }
  }
  if (ascii) return std::string(text);

  // Decompose; invalid bytes are kept in `raw` and stand as kInvalid (a starter) in `cps`.
  std::vector<std::uint32_t> cps;
  std::vector<unsigned char> raw;
  cps.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t at = i;
    const std::uint32_t cp = utf8::next(text, i, kInvalid);
    if (cp == kInvalid) {
      cps.push_back(kInvalid);
      raw.push_back(static_cast<unsigned char>(text[at]));
    } else {
      decompose(cp, cps);
    }
  }
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (std::size_t i = 0; i < cps.size();) {
    if (ccc(cps[i]) == 0) { ++i; continue; }
    std::size_t j = i;
    while (j < cps.size() && ccc(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i), cps.begin() + static_cast<std::ptrdiff_t>(j),
                     [](std::uint32_t a, std::uint32_t b) { return ccc(a) < ccc(b); });
    i = j;
  }
  // Canonical composition.
  std::vector<std::uint32_t> out;
  out.reserve(cps.size());
  std::ptrdiff_t starter = -1;  // index in `out` of the last starter, -1 when none
  int last_cc = -1;             // combining class of the last character appended after the starter
  for (std::uint32_t c : cps) {
    const int cc = ccc(c);
    if (starter >= 0 && c != kInvalid && out[starter] != kInvalid) {
      const bool blocked = last_cc != -1 && (last_cc == 0 || last_cc >= cc);
      if (!blocked) {
        if (std::uint32_t p = compose(out[starter], c)) {
          out[starter] = p;
          continue;
        }
      }
    }
    out.push_back(c);
    if (cc == 0) {
      starter = static_cast<std::ptrdiff_t>(out.size()) - 1;
      last_cc = -1;
    } else {
      last_cc = cc;
    }
  }
  std::string result;
  result.reserve(text.size());
  std::size_t r = 0;
  for (std::uint32_t c : out) {
    if (c == kInvalid) result += static_cast<char>(raw[r++]);
    else utf8::append(result, c);
  }
  return result;
}

}  // namespace kvcompact

// Unicode Normalization Form C (UAX #15), for the NFC normalizer of tokenizer.json (Qwen3).
#pragma once

#include <string>
#include <string_view>

namespace kvcompact {

/// NFC of UTF-8 text (UAX #15: canonical decomposition, canonical ordering by combining class,
/// canonical composition; Hangul syllables algorithmically). Tables are generated from the
/// Unicode Character Database by scripts/gen_nfc_tables.py (version: nfc_unicode_version()).
/// Bytes that are not valid UTF-8 are copied unchanged and block composition across them.
/// Never throws.
std::string nfc_normalize(std::string_view text);

/// The Unicode version of the NFC tables, e.g. "14.0.0".
const char* nfc_unicode_version();

}  // namespace kvcompact

// Error messages are one printable line of valid UTF-8 (core/error.h), whatever bytes a corrupt
// file put into them. Expected strings worked out by hand from RFC 3629.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(ErrorMessage, ValidUtf8PassesUnchanged) {
  for (const std::string& s : {std::string("plain ascii: 1.5 is outside [0, 1]"), std::string("\xC4\xA0the"),  // Ġ
                              std::string("caf\xC3\xA9"), std::string("\xE2\x82\xAC"),                        // €
                              std::string("\xF0\x9F\x98\x80"), std::string("tab\tkept")})
    EXPECT_EQ(printable_one_line(s), s);
}

TEST(ErrorMessage, InvalidBytesAndControlCharactersAreEscaped) {
  EXPECT_EQ(printable_one_line("'\xC4\xA0\xE6'"), "'\xC4\xA0\\xe6'");  // a token cut inside a character
  EXPECT_EQ(printable_one_line("a\nb\r"), "a\\x0ab\\x0d");
  EXPECT_EQ(printable_one_line("\xC0\xAF"), "\\xc0\\xaf");              // overlong '/'
  EXPECT_EQ(printable_one_line("\xED\xA0\x80"), "\\xed\\xa0\\x80");     // a UTF-16 surrogate
  EXPECT_EQ(printable_one_line("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(printable_one_line("\xFF"), "\\xff");
  EXPECT_EQ(printable_one_line(std::string("nul\0!", 5)), "nul\\x00!");
}

TEST(ErrorMessage, ErrorCarriesTheEscapedText) {
  const Error e(std::string("vocab.bin: token 7 '\xE6' is not valid"));
  EXPECT_STREQ(e.what(), "vocab.bin: token 7 '\\xe6' is not valid");
}

}}  // namespace
}  // namespace kvcompact

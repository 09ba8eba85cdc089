// tiktoken files on a toy vocabulary: base64 tokens, merges recovered from ranks (lowest-ranked
// pair first, whole pieces looked up directly), decode, and clear errors for malformed files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/loaders.h"
#include "tokenizer/tokenizer.h"

namespace strata::tok {
namespace {

std::string b64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t w =
        (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(w >> s) & 63];
  }
  if (bytes.size() - i == 1) {
    const uint32_t w = uint8_t(bytes[i]) << 16;
    out += kAlphabet[(w >> 18) & 63];
    out += kAlphabet[(w >> 12) & 63];
    out += "==";
  } else if (bytes.size() - i == 2) {
    const uint32_t w = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    for (int s : {18, 12, 6}) out += kAlphabet[(w >> s) & 63];
    out += "=";
  }
  return out;
}

std::string write_file(const std::string& text) {
  char tmpl[] = "/tmp/strata_tiktoken_XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ::close(fd);
  std::ofstream(tmpl, std::ios::binary) << text;
  return tmpl;
}

// 256 single bytes (rank = byte value), then multi-byte tokens in rank order.
std::string toy_file(const std::vector<std::string>& extra) {
  std::string text;
  int rank = 0;
  for (int b = 0; b < 256; ++b)
    text += b64(std::string(1, char(b))) + " " + std::to_string(rank++) + "\n";
  for (const auto& t : extra) text += b64(t) + " " + std::to_string(rank++) + "\n";
  return text;
}

TEST(TiktokenTest, MergesFollowRanksAndWholePiecesAreLookedUp) {
  // Ranks: "ab" 256, "bc" 257, "abc" 258, " x" 259, "cd" 260, "bcd" 261.
  const std::string path = write_file(toy_file({"ab", "bc", "abc", " x", "cd", "bcd"}));
  ASSERT_TRUE(looks_like_tiktoken(path));
  auto parts = load_tiktoken(path);
  ASSERT_TRUE(parts.ok()) << parts.status().to_string();
  auto t = Tokenizer::from_parts(std::move(parts).value());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const Tokenizer& tok = **t;
  auto enc = [&](const std::string& text) {
    auto ids = tok.encode(text, true);
    return ids.ok() ? *ids : std::vector<int32_t>{-1};
  };
  EXPECT_EQ(tok.vocab_size(), 262);
  EXPECT_EQ(tok.info().format, "tiktoken");
  EXPECT_EQ(enc("abc"), (std::vector<int32_t>{258}));  // a whole token
  // "abcd": "ab" (256) merges first (before "bc" 257 and "cd" 260), then "ab"+"c" = "abc" (258)
  // before "cd"; "abc"+"d" is no token.
  EXPECT_EQ(enc("abcd"), (std::vector<int32_t>{258, 'd'}));
  // "bcdd": "bc" (257) first, then "bc"+"d" = "bcd" (261).
  EXPECT_EQ(enc("bcdd"), (std::vector<int32_t>{261, 'd'}));
  // The split pattern keeps the space with the word: " x" is one piece and one token.
  EXPECT_EQ(enc("ab x"), (std::vector<int32_t>{256, 259}));
  const std::vector<int32_t> ids = {256, 259, 0xe4, 0xbd, 0xa0};
  EXPECT_EQ(tok.decode(ids, false), "ab x\xe4\xbd\xa0");
  std::remove(path.c_str());
}

TEST(TiktokenTest, MalformedFilesAreClearErrors) {
  struct Case {
    std::string text, message;
  } cases[] = {
      {toy_file({"ab"}) + "@@@@ 257\n", "line 258: not a base64 token"},
      {toy_file({}) + b64("ab") + " 300\n", "line 257: rank 300 out of order"},
      {toy_file({}) + b64("ab") + " x\n", "line 257: not a rank"},
      {b64("a") + " 0\n", "fewer than 256 tokens"},
  };
  for (const auto& c : cases) {
    const std::string path = write_file(c.text);
    auto parts = load_tiktoken(path);
    ASSERT_FALSE(parts.ok());
    EXPECT_NE(parts.status().message().find(c.message), std::string::npos)
        << parts.status().message();
    EXPECT_NE(parts.status().message().find(path), std::string::npos);
    std::remove(path.c_str());
  }
  // A SentencePiece protobuf starts with a field tag byte, never "<base64> <digits>".
  const std::string sp = write_file(std::string("\n\x0b\n\x05<unk>", 9));
  EXPECT_FALSE(looks_like_tiktoken(sp));
  std::remove(sp.c_str());
}

}  // namespace
}  // namespace strata::tok

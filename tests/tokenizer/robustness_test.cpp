// Malformed and hostile inputs: corrupt tokenizer.json and tokenizer.model files (a corpus of
// named cases plus a brief deterministic fuzz), pathological texts, and concurrent use. Every
// case must end in a value or a clear error, never a crash (the sanitizer build checks memory).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "core/file_util.h"
#include "core/rng.h"
#include "test_util.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/sp_proto.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_parts.h"

namespace strata::tok {
namespace {

Result<std::shared_ptr<const Tokenizer>> from_json(const std::string& text) {
  auto parts = parse_tokenizer_json(text, "test.json");
  if (!parts.ok()) return parts.status();
  return Tokenizer::from_parts(std::move(parts).value());
}

std::string tiny_json() {
  auto text = read_file(strata::testing::repo_path("models/strata-tiny/tokenizer.json"));
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  return text.ok() ? *text : "";
}

// A small valid tokenizer.json to derive broken ones from.
const char* kSmallJson = R"({
  "added_tokens": [{"id": 5, "content": "<s>", "special": true}],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "c": 4},
            "merges": ["a b"]}
})";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

TEST(RobustnessTest, SmallJsonWorks) {
  auto t = from_json(kSmallJson);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(*(*t)->encode("ab c"), (std::vector<int32_t>{5, 2, 3, 4}));
  EXPECT_EQ((*t)->decode(*(*t)->encode("ab c")), "ab c");
}

TEST(RobustnessTest, MalformedTokenizerJsonGivesClearErrors) {
  struct Case {
    std::string text;
    std::string expect;  // a fragment of the error message
  };
  const std::string s = kSmallJson;
  std::vector<Case> cases = {
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {"[]", "JSON object"},
      {"{}", "model"},
      {"null", "JSON object"},
      {replace(s, "\"type\": \"BPE\"", "\"type\": \"WordPiece\""), "WordPiece"},
      {replace(s, "\"type\": \"Split\"", "\"type\": \"BertPreTokenizer\""), "BertPreTokenizer"},
      {replace(s, "{\"type\": \"NFC\"}", "{\"type\": \"BertNormalizer\"}"), "BertNormalizer"},
      {replace(s, "\"decoder\": {\"type\": \"ByteLevel\"}", "\"decoder\": {\"type\": \"CTC\"}"),
       "CTC"},
      {replace(s, "\"\\\\s+\"", "\"(unclosed\""), "(unclosed"},
      {replace(s, "\"a b\"", "\"a zz\""), "zz"},
      {replace(s, "\"a b\"", "\"ab\""), "not 'left right'"},
      {replace(s, "\"a b\"", "42"), "not a pair"},
      {replace(s, "\"a\": 0", "\"a\": -1"), "invalid id"},
      {replace(s, "\"a\": 0", "\"a\": \"zero\""), "invalid id"},
      {replace(s, "\"vocab\": {", "\"vocab\": [{"), ""},
      {replace(s, "\"ids\": [5]", "\"ids\": [99]"), "out of range"},
      {replace(s, "\"special_tokens\": {\"<s>\"", "\"special_tokens\": {\"<x>\""), "<s>"},
      {replace(s, "\"behavior\": \"Isolated\"", "\"behavior\": \"Sideways\""), "Sideways"},
      {replace(s, "{\"id\": 5, \"content\": \"<s>\"", "{\"id\": -5, \"content\": \"<s>\""),
       "negative"},
      {replace(s, "\"content\": \"<s>\"", "\"content\": 7"), ""},
      // Found by fuzz_tokenizer_json: one huge id sized every per-id table by it (out of
      // memory), and an added token id of INT32_MAX overflowed id + 1.
      {replace(s, "\"a\": 0", "\"a\": 2000000000"), "an id of 2000000000"},
      {replace(s, "{\"id\": 5,", "{\"id\": 2147483647,"), "far beyond"},
      {replace(s, "{\"id\": 5,", "{\"id\": 4294967296,"), "not a valid id"},
      {replace(s, "{\"id\": 5,", "{\"id\": 1e20,"), "not a valid id"},
      // Found by fuzz_tokenizer_json: numbers read as int32 with nlohmann's unchecked get<>()
      // (undefined behaviour for floats out of range).
      {replace(s, "\"ids\": [5]", "\"ids\": [1.1e130]"), "expected a 32-bit integer"},
      {replace(s, "\"ids\": [5]", "\"ids\": [4294967301]"), "expected a 32-bit integer"},
      {replace(s, "\"ids\": [5]", "\"ids\": 5"), "must be a list"},
      {replace(s, "\"decoder\": {\"type\": \"ByteLevel\"}",
               "\"decoder\": {\"type\": \"Strip\", \"content\": \" \", \"start\": 1e30}"),
       "decoder Strip start"},
      {replace(s, "\"post_processor\": {\"type\": \"TemplateProcessing\",",
               "\"post_processor\": {\"type\": \"BertProcessing\", \"cls\": [\"<s>\", 5.5], "
               "\"sep\": [\"<s>\", 5],"),
       "post_processor cls"},
      {replace(s, "\"merges\": [\"a b\"]", "\"merges\": {}"), ""},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto t = from_json(c.text);
    ASSERT_FALSE(t.ok()) << "case " << i << " accepted";
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos)
        << "message: " << t.status().message();
  }
}

TEST(RobustnessTest, FuzzedTokenizerJsonNeverCrashes) {
  std::vector<std::string> seeds = {kSmallJson, tiny_json()};
  Rng rng(2024);
  int loaded = 0, rejected = 0;
  for (const auto& seed : seeds) {
    ASSERT_FALSE(seed.empty());
    for (int i = 0; i < 150; ++i) {
      std::string text = seed;
      switch (i % 3) {
        case 0:  // truncation
          text.resize(rng.below(text.size()));
          break;
        case 1:  // random byte changes
          for (int k = 0; k < 1 + static_cast<int>(rng.below(4)); ++k) {
            text[rng.below(text.size())] = static_cast<char>(rng.below(256));
          }
          break;
        default: {  // swap in a structural token somewhere
          static const char* kBits[] = {"null", "[]",   "{}",    "-1",
                                        "\"\"", "true", "1e999", "\"\\u0000\""};
          size_t at = rng.below(text.size());
          text.insert(at, kBits[rng.below(8)]);
        }
      }
      auto t = from_json(text);
      if (!t.ok()) {
        EXPECT_FALSE(t.status().message().empty());
        ++rejected;
        continue;
      }
      ++loaded;
      auto ids = (*t)->encode("Hello, wörld! <|bos|> 123");
      if (ids.ok()) (void)(*t)->decode(*ids, false);
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(loaded, 0);
}

// Protobuf encoding helpers for a toy SentencePiece model.
void put_varint(std::string* out, uint64_t v) {
  do {
    uint8_t b = v & 0x7F;
    v >>= 7;
    out->push_back(static_cast<char>(b | (v ? 0x80 : 0)));
  } while (v);
}
void put_bytes(std::string* out, uint32_t field, const std::string& bytes) {
  put_varint(out, (field << 3) | 2);
  put_varint(out, bytes.size());
  *out += bytes;
}
void put_int(std::string* out, uint32_t field, int64_t v) {
  put_varint(out, field << 3);
  put_varint(out, static_cast<uint64_t>(v));
}
std::string piece(const std::string& text, float score, int type) {
  std::string p;
  put_bytes(&p, 1, text);
  put_varint(&p, (2 << 3) | 5);
  char buf[4];
  std::memcpy(buf, &score, 4);
  p.append(buf, 4);
  put_int(&p, 3, type);
  return p;
}

std::string toy_spm_model() {
  std::string m;
  put_bytes(&m, 1, piece("<unk>", 0, 2));
  put_bytes(&m, 1, piece("<s>", 0, 3));
  put_bytes(&m, 1, piece("</s>", 0, 3));
  for (const char* p : {"\xE2\x96\x81", "a", "b",
                        "\xE2\x96\x81"
                        "a",
                        "ab",
                        "\xE2\x96\x81"
                        "ab"}) {
    put_bytes(&m, 1, piece(p, -static_cast<float>(std::strlen(p)), 1));
  }
  std::string trainer;
  put_int(&trainer, 3, 2);    // BPE
  put_int(&trainer, 40, 0);   // unk_id
  put_int(&trainer, 43, -1);  // pad_id: a negative int32 is a 10-byte varint
  put_bytes(&m, 2, trainer);
  std::string normalizer;
  put_bytes(&normalizer, 1, "identity");
  put_int(&normalizer, 4, 0);  // remove_extra_whitespaces = false
  put_bytes(&m, 3, normalizer);
  return m;
}

TEST(RobustnessTest, SentencePieceProtoParsesAndFuzzNeverCrashes) {
  std::string model = toy_spm_model();
  auto proto = parse_sentencepiece_model(model, "toy.model");
  ASSERT_TRUE(proto.ok()) << proto.status().to_string();
  EXPECT_EQ(proto->pieces.size(), 9u);
  EXPECT_EQ(proto->model_type, 2);
  EXPECT_EQ(proto->pad_id, -1);
  EXPECT_FALSE(proto->remove_extra_whitespaces);
  EXPECT_TRUE(proto->add_dummy_prefix);
  std::string path = ::testing::TempDir() + "/toy_spm.model";
  ASSERT_TRUE(write_file(path, model).ok());
  auto t = Tokenizer::load(path);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(*(*t)->encode("ab a"), (std::vector<int32_t>{1, 8, 6}));
  EXPECT_EQ((*t)->decode(*(*t)->encode("ab a")), "ab a");

  Rng rng(99);
  for (int i = 0; i < 400; ++i) {
    std::string bad = model;
    if (i % 2 == 0) {
      bad.resize(rng.below(bad.size()));
    } else {
      for (int k = 0; k < 3; ++k) bad[rng.below(bad.size())] = static_cast<char>(rng.below(256));
    }
    auto p = parse_sentencepiece_model(bad, "fuzz.model");
    if (!p.ok()) {
      EXPECT_FALSE(p.status().message().empty());
    }
  }
  EXPECT_FALSE(parse_sentencepiece_model("", "empty.model").ok());
  EXPECT_FALSE(parse_sentencepiece_model("{\"not\": \"protobuf\"}", "json.model").ok());
}

TEST(RobustnessTest, LoadErrorsNameThePath) {
  auto missing = Tokenizer::load("/nonexistent/dir");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/dir"), std::string::npos);
  std::string empty_dir = ::testing::TempDir() + "/empty_tok_dir";
  (void)write_file(empty_dir + ".txt", "x");
  auto not_tok = Tokenizer::load(empty_dir + ".txt");
  ASSERT_FALSE(not_tok.ok());
  EXPECT_NE(not_tok.status().message().find("not a tokenizer"), std::string::npos);
}

// vocab.json naming an id far beyond its size is refused before any table is sized by it; a few
// unused ids are fine.
TEST(RobustnessTest, VocabJsonWithAHugeIdIsAnError) {
  char tmpl[] = "/tmp/strata_vocab_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  ASSERT_TRUE(write_file(dir + "/merges.txt", "#version: 0.2\na b\n").ok());
  ASSERT_TRUE(write_file(dir + "/vocab.json", R"({"a": 0, "b": 1, "ab": 1900000000})").ok());
  auto t = Tokenizer::load(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("corrupt"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("vocab.json"), std::string::npos) << t.status().message();
  ASSERT_TRUE(write_file(dir + "/vocab.json", R"({"a": 0, "b": 1, "ab": 1000})").ok());
  t = Tokenizer::load(dir);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)->vocab_size(), 1001);
  EXPECT_EQ(*(*t)->encode("ab", false), (std::vector<int32_t>{1000}));
}

// Found by fuzzing tokenizer_config.json: an added_tokens_decoder flag that is not a boolean
// threw nlohmann's type_error out of Tokenizer::load (std::terminate: the server died at start).
// Non-boolean flags are ignored, as for the config's other flags.
TEST(RobustnessTest, ConfigFlagsThatAreNotBooleansDoNotThrow) {
  char tmpl[] = "/tmp/strata_config_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  ASSERT_TRUE(write_file(dir + "/tokenizer.json", kSmallJson).ok());
  ASSERT_TRUE(write_file(dir + "/tokenizer_config.json",
                         R"({"added_tokens_decoder": {"4": {"content": "c", "special": 1,
                             "lstrip": "yes", "rstrip": null, "normalized": [true]}}})")
                  .ok());
  auto t = Tokenizer::load(dir);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_FALSE((*t)->is_special(4));
  EXPECT_EQ(*(*t)->encode("ab c"), (std::vector<int32_t>{5, 2, 3, 4}));
}

TEST(RobustnessTest, PathologicalTextsEncodeAndRoundTrip) {
  auto t = Tokenizer::load(strata::testing::repo_path("models/strata-tiny"));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  std::vector<std::string> texts = {
      std::string(200000, ' '),  // one long whitespace run
      std::string(200000, 'a'),  // one long word
      std::string(100000, '\n') + "x",
      std::string("\0\0\x01\x7f", 4),  // control characters, NUL
      "<|eos|><|eos|><|bos|>" + std::string(1000, '<'),
  };
  std::string emoji;
  for (int i = 0; i < 5000; ++i) emoji += "👨‍👩‍👧‍👦🇯🇵";
  texts.push_back(emoji);
  for (const auto& text : texts) {
    auto ids = (*t)->encode(text, false);
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    EXPECT_EQ((*t)->decode(*ids, false), text);
  }
}

TEST(RobustnessTest, ConcurrentEncodeDecodeMatchesSerial) {
  auto t = Tokenizer::load(strata::testing::repo_path("models/strata-tiny"));
  ASSERT_TRUE(t.ok());
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) {
    texts.push_back("request " + std::to_string(i) + ": ünïcode 世界 🙂 <|user|>" +
                    std::string(i, 'x'));
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& s : texts) expected.push_back(*(*t)->encode(s, false));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int rep = 0; rep < 50; ++rep) {
        for (size_t i = th; i < texts.size(); i += 2) {
          auto ids = (*t)->encode(texts[i], false);
          if (!ids.ok() || *ids != expected[i] || (*t)->decode(*ids, false) != texts[i])
            ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace strata::tok

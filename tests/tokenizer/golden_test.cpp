// Golden tests: real vocabularies from ../shared/data against the reference implementations'
// recorded outputs (Hugging Face transformers/tokenizers, SentencePiece/llama2.c, ollama, Meta).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/json.h"
#include "core/strings.h"
#include "io/writers.h"
#include "test_util.h"
#include "tokenizer/loaders.h"
#include "tokenizer/tokenizer.h"

namespace strata {
namespace {

using testing::shared_data_path;

Json load_json(const std::string& rel) {
  auto j = read_json_file(shared_data_path(rel));
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  return j.ok() ? *j : Json();
}

std::shared_ptr<const Tokenizer> load_tok(const std::string& rel) {
  auto t = Tokenizer::load(shared_data_path(rel));
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : nullptr;
}

std::vector<int32_t> encode(const Tokenizer& t, const std::string& text, bool special) {
  auto ids = t.encode(text, special);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

std::vector<std::string> pieces(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(t.id_to_piece(id));
  return out;
}

// Llama-3 from Meta's BPE files (encoder.json + vocab.bpe) with the Llama-3 split pattern and the
// special tokens the vectors use.
std::shared_ptr<const Tokenizer> load_llama3(bool add_bos) {
  Json vectors = load_json("tokenizer-tests/llama3_tokenizer_vectors.json");
  tok::BpeFilesOptions options;
  options.preset = "llama3";
  for (const auto& [content, id] : vectors["special_tokens"].items()) {
    tok::AddedToken t;
    t.id = id.get<int32_t>();
    t.content = content;
    t.special = true;
    options.added_tokens.push_back(t);
  }
  if (add_bos) options.prefix_ids = {128000};
  auto parts =
      tok::load_bpe_files(shared_data_path("tokenizers/llama3/llama3.2_encoder.json"),
                          shared_data_path("tokenizers/llama3/llama3.2_vocab.bpe"), options);
  EXPECT_TRUE(parts.ok()) << parts.status().to_string();
  if (!parts.ok()) return nullptr;
  auto t = Tokenizer::from_parts(std::move(parts).value());
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : nullptr;
}

// swift-transformers' tokenizer_tests.json entries for one model.
void check_swift_cases(const Tokenizer& t, const std::string& model, bool clean_up) {
  Json all = load_json("tokenizer-tests/swift-transformers/tokenizer_tests.json");
  ASSERT_TRUE(all.contains(model));
  int n = 0;
  for (const auto& c : all[model]) {
    std::string input = c["input"];
    auto expected = c["encoded"]["input_ids"].get<std::vector<int32_t>>();
    auto ids = encode(t, input, true);
    EXPECT_EQ(ids, expected) << model << " input: " << input;
    EXPECT_EQ(t.decode(ids, false, clean_up), c["decoded_with_special"].get<std::string>())
        << model << " input: " << input;
    EXPECT_EQ(t.decode(ids, true, clean_up), c["decoded_without_special"].get<std::string>())
        << model << " input: " << input;
    ++n;
  }
  EXPECT_GE(n, 18);
}

// swift-transformers' multilingual baselines (transformers 4.57.1).
void check_multilingual(const Tokenizer& t, const std::string& baseline) {
  STRATA_REQUIRE_SHARED("tokenizer-tests/swift-transformers-multilingual/inputs.json");
  Json inputs = load_json("tokenizer-tests/swift-transformers-multilingual/inputs.json");
  Json base = load_json("tokenizer-tests/swift-transformers-multilingual/baselines/" + baseline);
  int n = 0;
  for (const auto& in : inputs["inputs"]) {
    std::string id = in["id"], text = in["text"];
    ASSERT_TRUE(base["entries"].contains(id)) << id;
    const Json& e = base["entries"][id];
    auto ids = encode(t, text, true);
    EXPECT_EQ(ids, e["input_ids"].get<std::vector<int32_t>>()) << baseline << " " << id;
    EXPECT_EQ(pieces(t, ids), e["tokens"].get<std::vector<std::string>>()) << baseline << " " << id;
    EXPECT_EQ(t.decode(ids, false), e["decoded_with_special"].get<std::string>()) << id;
    EXPECT_EQ(t.decode(ids, true), e["decoded_skip_special"].get<std::string>()) << id;
    ++n;
  }
  EXPECT_EQ(n, 30);
}

// swift-transformers' *_encoded.json: one long French text with pieces and ids.
void check_encoded_file(const Tokenizer& t, const std::string& file, bool add_special) {
  Json j = load_json("tokenizer-tests/swift-transformers/" + file);
  std::string text = j["text"];
  auto expected = j["token_ids"].get<std::vector<int32_t>>();
  auto ids = encode(t, text, add_special);
  EXPECT_EQ(ids, expected) << file;
  std::vector<std::string> bpe = j["bpe_tokens"];
  std::vector<int32_t> body(ids.begin() + (ids.size() - bpe.size()), ids.end());
  EXPECT_EQ(pieces(t, body), bpe) << file;
  // decoded_text keeps special tokens (e.g. "<s> Fatouville...").
  EXPECT_EQ(t.decode(ids, false), j["decoded_text"].get<std::string>()) << file;
}

TEST(GoldenGpt2, SwiftTransformersVectors) {
  STRATA_REQUIRE_SHARED("tokenizers/gpt2/vocab.json");
  auto t = load_tok("tokenizers/gpt2");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 50257);
  EXPECT_EQ(t->eos_token_id(), 50256);
  EXPECT_EQ(t->info().format, "vocab.json+merges.txt");
  // distilgpt2 shares GPT-2's tokenizer; its decoded strings had clean_up_tokenization applied.
  check_swift_cases(*t, "distilgpt2", /*clean_up=*/true);
  check_encoded_file(*t, "gpt2_encoded_tokens.json", false);
  check_multilingual(*t, "openai-community__gpt2.json");
  // The special token written in text is one token, as transformers matches special tokens.
  EXPECT_EQ(encode(*t, "a<|endoftext|>b", true), (std::vector<int32_t>{64, 50256, 65}));
}

TEST(GoldenQwen25, MultilingualBaseline) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  auto t = load_tok("tokenizers/qwen2.5");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 151665);
  check_multilingual(*t, "Qwen__Qwen2.5-0.5B.json");
  // Chat-format special tokens are single tokens; eos is <|im_end|> for the Instruct config.
  auto ids = encode(*t, "<|im_start|>user\nHi<|im_end|>", true);
  EXPECT_EQ(ids, (std::vector<int32_t>{151644, 872, 198, 13048, 151645}));
  EXPECT_EQ(t->eos_token_id(), 151645);
  EXPECT_TRUE(t->is_special(151645));
  EXPECT_FALSE(t->is_special(151657));  // <tool_call> is an added, non-special token
  EXPECT_EQ(t->decode(ids, true), "user\nHi");
  EXPECT_FALSE(t->chat_template().empty());
}

TEST(GoldenLlama3, OllamaAndMetaVectors) {
  STRATA_REQUIRE_SHARED("tokenizers/llama3/llama3.2_encoder.json");
  auto t = load_llama3(/*add_bos=*/false);
  ASSERT_TRUE(t);
  Json vectors = load_json("tokenizer-tests/llama3_tokenizer_vectors.json");
  int n = 0;
  for (const auto& c : vectors["encode"]) {
    std::string text = c["text"];
    bool with_bos_eos = c.value("with_bos_eos", false);
    auto ids = encode(*t, text, false);
    if (with_bos_eos) {
      ids.insert(ids.begin(), 128000);
      ids.push_back(128001);
    }
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << text;
    ++n;
  }
  EXPECT_GT(n, 20);
}

TEST(GoldenLlama3, SwiftTransformersVectors) {
  STRATA_REQUIRE_SHARED("tokenizers/llama3/llama3.2_encoder.json");
  auto t = load_llama3(/*add_bos=*/true);
  ASSERT_TRUE(t);
  // Llama-3.2's tokenizer_config.json sets clean_up_tokenization_spaces.
  check_swift_cases(*t, "pcuenq/Llama-3.2-1B-Instruct-tokenizer", /*clean_up=*/true);
  check_encoded_file(*t, "llama_3.2_encoded.json", true);
}

// Meta's own Llama 3 tokenizer file (tiktoken: base64 token + rank per line, as shipped in
// original/tokenizer.model) and OpenAI-format encoder.json + vocab.bpe, found by Tokenizer::load
// from a directory or a file path: the same ids as the vectors (which include the specials), BOS
// added, and identical to each other on the multilingual inputs.
TEST(GoldenLlama3, TiktokenFileAndEncoderJsonDirectory) {
  STRATA_REQUIRE_SHARED("tokenizers/llama3/llama3_tokenizer.model.tiktoken");
  auto tik = load_tok("tokenizers/llama3/llama3_tokenizer.model.tiktoken");
  ASSERT_TRUE(tik);
  EXPECT_EQ(tik->info().format, "tiktoken (Llama 3)");
  EXPECT_EQ(tik->bos_token_id(), 128000);
  // A directory holding only encoder.json + vocab.bpe (links to the shared files).
  char tmpl[] = "/tmp/strata_llama3_bpe_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  for (const char* f : {"llama3.2_encoder.json", "llama3.2_vocab.bpe"}) {
    ASSERT_EQ(::symlink(shared_data_path(std::string("tokenizers/llama3/") + f).c_str(),
                        (dir + "/" + f).c_str()),
              0);
  }
  auto bpe = Tokenizer::load(dir);
  ASSERT_TRUE(bpe.ok()) << bpe.status().to_string();
  Json vectors = load_json("tokenizer-tests/llama3_tokenizer_vectors.json");
  for (const Tokenizer* t : {tik.get(), bpe->get()}) {
    for (const auto& c : vectors["encode"]) {
      // The vectors' ids hold BOS and EOS only when with_bos_eos; the tokenizer adds BOS only.
      std::vector<int32_t> want = c["ids"];
      if (c.value("with_bos_eos", false)) {
        want.pop_back();
      } else {
        want.insert(want.begin(), 128000);
      }
      EXPECT_EQ(encode(*t, c["text"], true), want) << t->info().format << ": " << c["text"];
    }
    for (const auto& c : vectors["chat_format"]) {
      std::vector<int32_t> want = c["ids"];
      std::string text = t->decode(want, /*skip_special_tokens=*/false);
      EXPECT_EQ(encode(*t, text, false), want) << t->info().format;
    }
  }
  Json inputs = load_json("tokenizer-tests/swift-transformers-multilingual/inputs.json");
  for (const auto& in : inputs["inputs"]) {
    const std::string text = in["text"];
    const auto ids = encode(*tik, text, true);
    EXPECT_EQ(ids, encode(**bpe, text, true)) << in["id"];
    EXPECT_EQ(tik->decode(ids, true), text) << in["id"];
  }
  for (const char* f : {"llama3.2_encoder.json", "llama3.2_vocab.bpe"})
    ::unlink((dir + "/" + f).c_str());
  ::rmdir(dir.c_str());
}

TEST(GoldenLlama2, SentencePieceModelVectors) {
  STRATA_REQUIRE_SHARED("tokenizers/llama2/tokenizer.model");
  auto t = load_tok("tokenizers/llama2/tokenizer.model");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 32000);
  EXPECT_EQ(t->bos_token_id(), 1);
  EXPECT_EQ(t->eos_token_id(), 2);
  EXPECT_EQ(t->info().model, "SentencePiece BPE");
  Json vectors = load_json("tokenizer-tests/llama2_tokenizer_vectors.json");
  for (const auto& c : vectors["encode"]) {
    EXPECT_EQ(encode(*t, c["text"], true), c["ids"].get<std::vector<int32_t>>()) << c["text"];
  }
  check_swift_cases(*t, "coreml-projects/Llama-2-7b-chat-coreml", /*clean_up=*/false);
  check_encoded_file(*t, "llama_encoded.json", true);
  // TinyLlama uses the Llama-2 vocabulary.
  check_multilingual(*t, "TinyLlama__TinyLlama-1.1B-Chat-v1.0.json");
}

TEST(GoldenStories260K, TokenizerJsonMatchesGoldenPrompts) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf/tokenizer.json");
  auto t = load_tok("models/stories260K-hf");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 512);
  EXPECT_EQ(t->bos_token_id(), 1);
  EXPECT_EQ(t->eos_token_id(), 2);
  Json golden = load_json("golden/stories260K.json");
  int n = 0;
  for (const auto& c : golden["cases"]) {
    std::string prompt = c["prompt"];
    auto expected = c["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(encode(*t, prompt, true), expected) << "prompt '" << prompt << "'";
    // The continuation detokenised after the prompt is the recorded completion_text. (With an
    // empty prompt the recording keeps llama.cpp's leading space, which HF's decode strips.)
    if (!prompt.empty()) {
      std::vector<int32_t> all = expected;
      auto gen = c["generated_ids"].get<std::vector<int32_t>>();
      all.insert(all.end(), gen.begin(), gen.end());
      std::string head = t->decode(expected, true);
      std::string full = t->decode(all, true);
      ASSERT_EQ(full.substr(0, head.size()), head);
      EXPECT_EQ(full.substr(head.size()), c["completion_text"].get<std::string>()) << prompt;
    }
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST(GoldenStories260K, GgufVocabularyMatchesGoldenPromptsAndTokenizerJson) {
  STRATA_REQUIRE_SHARED("models/stories260K.gguf");
  auto g = load_tok("models/stories260K.gguf");
  auto h = load_tok("models/stories260K-hf");
  ASSERT_TRUE(g && h);
  EXPECT_EQ(g->info().format, "gguf");
  EXPECT_EQ(g->vocab_size(), 512);
  EXPECT_EQ(g->bos_token_id(), 1);
  EXPECT_EQ(g->eos_token_id(), 2);
  Json golden = load_json("golden/stories260K.json");
  for (const auto& c : golden["cases"]) {
    EXPECT_EQ(encode(*g, c["prompt"], true), c["prompt_ids"].get<std::vector<int32_t>>());
  }
  // The GGUF and tokenizer.json vocabularies tokenize and detokenize alike.
  Json inputs = load_json("tokenizer-tests/swift-transformers-multilingual/inputs.json");
  for (const auto& in : inputs["inputs"]) {
    std::string text = in["text"];
    auto ids = encode(*g, text, true);
    EXPECT_EQ(ids, encode(*h, text, true)) << text;
    EXPECT_EQ(g->decode(ids, true), h->decode(ids, true)) << text;
    EXPECT_EQ(g->decode(ids, true), text);
  }
}

// Writes a GGUF holding a byte-level BPE vocabulary from vocab.json + merges.txt (added tokens
// typed control or user-defined, as llama.cpp's converter does).
std::string write_bpe_gguf(const std::string& name, const std::string& vocab_rel,
                           const std::string& merges_rel, const Json& added, const std::string& pre,
                           std::vector<io::GgufMeta> extra) {
  Json vocab = load_json(vocab_rel);
  std::vector<std::string> tokens(vocab.size());
  for (const auto& [piece, id] : vocab.items()) tokens[id.get<size_t>()] = piece;
  std::vector<int32_t> types(tokens.size(), 1);
  for (const auto& [id_text, t] : added.items()) {
    size_t id = std::stoul(id_text);
    if (id >= tokens.size()) {
      tokens.resize(id + 1);
      types.resize(id + 1, 1);
    }
    tokens[id] = t["content"];
    types[id] = t.value("special", false) ? 3 : 4;
  }
  auto merges_text = read_file(shared_data_path(merges_rel));
  EXPECT_TRUE(merges_text.ok());
  std::vector<std::string> merges;
  for (const auto& line : split(*merges_text, '\n')) {
    if (!line.empty() && !starts_with(line, "#version")) merges.push_back(line);
  }
  std::vector<io::GgufMeta> meta = {
      {"general.architecture", std::string("llama")},
      {"tokenizer.ggml.model", std::string("gpt2")},
      {"tokenizer.ggml.pre", pre},
      {"tokenizer.ggml.tokens", tokens},
      {"tokenizer.ggml.token_type", types},
      {"tokenizer.ggml.merges", merges},
  };
  meta.insert(meta.end(), extra.begin(), extra.end());
  std::string path = ::testing::TempDir() + "/" + name + ".gguf";
  Status st = io::write_gguf(path, meta, {});
  EXPECT_TRUE(st.ok()) << st.to_string();
  return path;
}

TEST(GoldenGguf, Qwen2VocabularyMatchesVocabMergesFiles) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  Json config = load_json("tokenizers/qwen2.5/tokenizer_config.json");
  std::string path =
      write_bpe_gguf("qwen25_vocab", "tokenizers/qwen2.5/vocab.json",
                     "tokenizers/qwen2.5/merges.txt", config["added_tokens_decoder"], "qwen2",
                     {{"tokenizer.ggml.eos_token_id", uint32_t{151645}},
                      {"tokenizer.ggml.padding_token_id", uint32_t{151643}},
                      {"tokenizer.ggml.add_bos_token", false},
                      {"tokenizer.chat_template", config["chat_template"].get<std::string>()}});
  auto g = Tokenizer::load(path);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto d = load_tok("tokenizers/qwen2.5");
  ASSERT_TRUE(d);
  EXPECT_EQ((*g)->vocab_size(), d->vocab_size());
  EXPECT_EQ((*g)->eos_token_id(), 151645);
  EXPECT_EQ((*g)->chat_template(), d->chat_template());
  check_multilingual(**g, "Qwen__Qwen2.5-0.5B.json");
  for (std::string text :
       {"<|im_start|>system\nYou are helpful.<|im_end|>\n<tool_call>{}</tool_call>",
        "  leading and trailing  ", "a\n\n\tb 12345 ''s 'LL"}) {
    auto ids = encode(**g, text, true);
    EXPECT_EQ(ids, encode(*d, text, true)) << text;
    EXPECT_EQ((*g)->decode(ids, true), d->decode(ids, true)) << text;
    EXPECT_EQ((*g)->decode(ids, false), text);
  }
}

TEST(GoldenGguf, Llama3VocabularyMatchesVectors) {
  STRATA_REQUIRE_SHARED("tokenizers/llama3/llama3.2_encoder.json");
  Json vectors = load_json("tokenizer-tests/llama3_tokenizer_vectors.json");
  Json added = Json::object();
  for (const auto& [content, id] : vectors["special_tokens"].items()) {
    added[std::to_string(id.get<int>())] = {{"content", content}, {"special", true}};
  }
  std::string path = write_bpe_gguf("llama3_vocab", "tokenizers/llama3/llama3.2_encoder.json",
                                    "tokenizers/llama3/llama3.2_vocab.bpe", added, "llama-bpe",
                                    {{"tokenizer.ggml.bos_token_id", uint32_t{128000}},
                                     {"tokenizer.ggml.eos_token_id", uint32_t{128009}}});
  auto g = Tokenizer::load(path);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  // Without tokenizer.ggml.add_bos_token, Llama-3 vocabularies add BOS (llama.cpp's default).
  EXPECT_TRUE((*g)->info().add_bos);
  for (const auto& c : vectors["encode"]) {
    std::string text = c["text"];
    auto ids = encode(**g, text, false);
    if (c.value("with_bos_eos", false)) {
      ids.insert(ids.begin(), 128000);
      ids.push_back(128001);
    }
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << text;
  }
}

TEST(GoldenRepoModel, StrataTinyByteLevelTokenizer) {
  auto t = Tokenizer::load(testing::repo_path("models/strata-tiny"));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const Tokenizer& tok = **t;
  EXPECT_EQ(tok.bos_token_id(), 256);
  EXPECT_EQ(tok.eos_token_id(), 257);
  EXPECT_EQ(tok.info().tokenizer_class, "PreTrainedTokenizerFast");
  EXPECT_FALSE(tok.chat_template().empty());
  // No merges: one token per byte, BOS first; special tokens written in the text are matched.
  auto ids = encode(tok, "Hé<|eos|>", true);
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids[0], 256);
  EXPECT_EQ(ids[4], 257);
  EXPECT_EQ(tok.decode(ids, true), "Hé");
  EXPECT_EQ(tok.decode(ids, false), "<|bos|>Hé<|eos|>");
}

TEST(GoldenMixtral, TokenizerJsonLoadsAndRoundTrips) {
  STRATA_REQUIRE_SHARED("tokenizers/mixtral/tokenizer.json");
  auto t = load_tok("tokenizers/mixtral");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 32000);
  EXPECT_EQ(t->bos_token_id(), 1);
  EXPECT_EQ(t->eos_token_id(), 2);
  EXPECT_TRUE(t->info().add_bos);
  Json inputs = load_json("tokenizer-tests/swift-transformers-multilingual/inputs.json");
  std::vector<std::string> texts = {
      "Hello world", "  two leading spaces", "trailing  ", "line\nbreaks\r\n\ttabs", "", "x"};
  for (const auto& in : inputs["inputs"]) texts.push_back(in["text"]);
  for (const auto& text : texts) {
    auto ids = encode(*t, text, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(t->decode(ids, true), text);
  }
  // Known pieces: "▁Hello" and byte fallback for characters outside the vocabulary.
  auto ids = encode(*t, "Hello 🦙", false);
  EXPECT_EQ(pieces(*t, ids).front(), "▁Hello");
  EXPECT_EQ(t->decode(ids, true), "Hello 🦙");
}

}  // namespace
}  // namespace strata

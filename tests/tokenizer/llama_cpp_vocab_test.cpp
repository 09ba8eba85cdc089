// GGUF vocabularies against llama.cpp's tokenizer test vectors. llama.cpp's repository carries
// vocabulary-only GGUF files (models/ggml-vocab-NAME.gguf), each with test inputs (.gguf.inp: texts
// separated by "\n__ggml_vocab_test__\n") and the ids Hugging Face's tokenizer gives them without
// special tokens (.gguf.out: one line of space-separated ids per input). The files are read from a
// llama.cpp checkout beside the project ($STRATA_LLAMA_CPP, else <repo>/../llama.cpp), never
// copied in; without a checkout there are no cases and CheckoutHasTestVocabularies skips, saying
// where it looked.
//
// One test case per .inp/.out pair. A case skips (naming the reason) when its .gguf is absent from
// the checkout or its vocabulary type is one Strata does not implement (unsupported_models());
// every other case must load, reproduce every expected id sequence, decode the expected ids back
// to the input (BERT's lower-cased, accent-stripped text aside) and re-encode that to the same ids.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/json.h"
#include "core/strings.h"
#include "io/writers.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace strata {
namespace {

using testing::path_exists;
using testing::shared_data_path;

// tokenizer.ggml.model values Strata does not implement, with the reason a case skips.
const std::map<std::string, std::string>& unsupported_models() {
  static const std::map<std::string, std::string> m = {
      {"t5", "Unigram (UGM) vocabularies need SentencePiece's precompiled character map"},
      {"rwkv", "RWKV's trie tokenizer is not implemented"},
      {"plamo2", "PLaMo-2's Aho-Corasick tokenizer is not implemented"},
      {"gemma4", "BPE over raw UTF-8 with SentencePiece-style spaces is not implemented"},
  };
  return m;
}

std::string llama_cpp_dir() {
  if (const char* env = std::getenv("STRATA_LLAMA_CPP"); env != nullptr && *env) return env;
  return std::string(STRATA_SOURCE_DIR) + "/../llama.cpp";
}

std::string models_dir() {
  return llama_cpp_dir() + "/models";
}

// Vocabulary names (NAME in ggml-vocab-NAME.gguf.inp) with both test files, sorted.
std::vector<std::string> vocab_names() {
  std::vector<std::string> names;
  DIR* d = ::opendir(models_dir().c_str());
  if (d == nullptr) return names;
  const std::string prefix = "ggml-vocab-", suffix = ".gguf.inp";
  while (dirent* e = ::readdir(d)) {
    std::string f = e->d_name;
    if (f.size() <= prefix.size() + suffix.size() || !f.starts_with(prefix) ||
        !f.ends_with(suffix)) {
      continue;
    }
    std::string name = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
    if (path_exists(models_dir() + "/" + prefix + name + ".gguf.out")) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// Splits the .inp text at the separator and pairs each piece with its .out line.
::testing::AssertionResult read_cases(const std::string& inp_path, const std::string& out_path,
                                      std::vector<Case>* cases) {
  auto inp = read_file(inp_path);
  if (!inp.ok()) return ::testing::AssertionFailure() << inp.status().to_string();
  auto out = read_file(out_path);
  if (!out.ok()) return ::testing::AssertionFailure() << out.status().to_string();
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp->size();) {
    size_t next = inp->find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp->substr(pos));
      break;
    }
    texts.push_back(inp->substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::string> lines;
  std::istringstream out_lines(*out);
  for (std::string line; std::getline(out_lines, line);) lines.push_back(line);
  if (texts.size() != lines.size()) {
    return ::testing::AssertionFailure() << inp_path << " has " << texts.size() << " inputs but "
                                         << out_path << " has " << lines.size() << " lines";
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    Case c;
    c.text = texts[i];
    std::istringstream ids(lines[i]);
    for (std::string id; ids >> id;) {
      char* end = nullptr;
      long v = std::strtol(id.c_str(), &end, 10);
      if (end == id.c_str() || *end != '\0') {
        return ::testing::AssertionFailure()
               << out_path << " line " << i + 1 << ": '" << id << "' is not a token id";
      }
      c.ids.push_back(static_cast<int32_t>(v));
    }
    cases->push_back(std::move(c));
  }
  return ::testing::AssertionSuccess();
}

// "id'piece' id'piece' ..." for failure messages.
std::string describe_ids(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id) + "'" + t.id_to_piece(id) + "'";
  }
  return s;
}

TEST(LlamaCppVocabs, CheckoutHasTestVocabularies) {
  if (!path_exists(models_dir())) {
    GTEST_SKIP() << "no llama.cpp checkout at '" << llama_cpp_dir()
                 << "': clone https://github.com/ggml-org/llama.cpp beside the project or set "
                    "STRATA_LLAMA_CPP to one to run the GGUF vocabulary tests";
  }
  EXPECT_FALSE(vocab_names().empty()) << models_dir() << " has no ggml-vocab-*.gguf.inp/.out pairs";
}

class LlamaCppVocab : public ::testing::TestWithParam<std::string> {};

// Encodes every case (no special tokens added) and compares with the expected ids; decodes the
// expected ids and re-encodes the text.
void check_cases(const Tokenizer& t, const std::vector<Case>& cases) {
  const bool wordpiece = t.info().model == "WordPiece";
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto ids = t.encode(c.text, /*add_special_tokens=*/false);
    ASSERT_TRUE(ids.ok()) << "input " << i + 1 << " '" << c.text
                          << "': " << ids.status().to_string();
    if (*ids != c.ids) ++failures;
    EXPECT_EQ(*ids, c.ids) << "input " << i + 1 << " '" << c.text << "'\n  expected "
                           << describe_ids(t, c.ids) << "\n  got      " << describe_ids(t, *ids);
    // Decoding the expected ids gives the text back, except through BERT's lower-casing and
    // accent stripping; re-encoding the decoded text gives the same ids.
    std::string back = t.decode(c.ids, /*skip_special_tokens=*/false);
    if (!wordpiece) {
      EXPECT_EQ(back, c.text) << "decoding the ids of input " << i + 1;
    }
    auto again = t.encode(back, false);
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_EQ(*again, c.ids) << "re-encoding '" << back << "', the decoded input " << i + 1;
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " inputs differ";
}

TEST_P(LlamaCppVocab, TokenizesLikeTheReference) {
  const std::string base = models_dir() + "/ggml-vocab-" + GetParam() + ".gguf";
  if (!path_exists(base)) {
    GTEST_SKIP() << base
                 << " is absent (only its .inp/.out are in the checkout; a clone without large "
                    "files leaves it out)";
  }
  std::vector<Case> cases;
  ASSERT_TRUE(read_cases(base + ".inp", base + ".out", &cases));
  ASSERT_FALSE(cases.empty());
  auto loaded = Tokenizer::load(base);
  if (!loaded.ok()) {
    for (const auto& [model, reason] : unsupported_models()) {
      if (loaded.status().message().find("tokenizer.ggml.model '" + model + "'") !=
          std::string::npos) {
        GTEST_SKIP() << base << ": vocabulary type '" << model << "' is not supported: " << reason;
      }
    }
  }
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  check_cases(**loaded, cases);
}

// Two vocabularies whose .gguf a clone may lack, rebuilt as GGUF files (byte-level BPE, typed
// and named as llama.cpp's converter writes them) from ../shared/data: Qwen2.5's vocab.json +
// merges.txt (the BPE of Qwen1.5, from which ggml-vocab-qwen2's ids were made) and Llama 3.2's
// encoder.json + vocab.bpe (Llama 3's).
std::string write_shared_bpe_gguf(const std::string& name, const std::string& vocab_rel,
                                  const std::string& merges_rel, const std::string& pre) {
  auto vocab = read_json_file(shared_data_path(vocab_rel));
  EXPECT_TRUE(vocab.ok()) << vocab.status().to_string();
  if (!vocab.ok()) return "";
  std::vector<std::string> tokens(vocab->size());
  for (const auto& [piece, id] : vocab->items()) tokens.at(id.get<size_t>()) = piece;
  auto merges_text = read_file(shared_data_path(merges_rel));
  EXPECT_TRUE(merges_text.ok()) << merges_text.status().to_string();
  if (!merges_text.ok()) return "";
  std::vector<std::string> merges;
  for (const auto& line : split(*merges_text, '\n')) {
    if (!line.empty() && !starts_with(line, "#version")) merges.push_back(line);
  }
  std::vector<io::GgufMeta> meta = {
      {"general.architecture", std::string("llama")},
      {"tokenizer.ggml.model", std::string("gpt2")},
      {"tokenizer.ggml.pre", pre},
      {"tokenizer.ggml.tokens", tokens},
      {"tokenizer.ggml.token_type", std::vector<int32_t>(tokens.size(), 1)},
      {"tokenizer.ggml.merges", merges},
  };
  std::string path = ::testing::TempDir() + "/llama_cpp_vectors_" + name + ".gguf";
  Status st = io::write_gguf(path, meta, {});
  EXPECT_TRUE(st.ok()) << st.to_string();
  return st.ok() ? path : "";
}

void check_on_shared_vocab(const std::string& name, const std::string& vocab_rel,
                           const std::string& merges_rel, const std::string& pre) {
  const std::string base = models_dir() + "/ggml-vocab-" + name + ".gguf";
  if (!path_exists(base + ".inp")) {
    GTEST_SKIP() << "no " << base << ".inp (llama.cpp checkout at '" << llama_cpp_dir() << "')";
  }
  STRATA_REQUIRE_SHARED(vocab_rel);
  std::vector<Case> cases;
  ASSERT_TRUE(read_cases(base + ".inp", base + ".out", &cases));
  std::string path = write_shared_bpe_gguf(name, vocab_rel, merges_rel, pre);
  ASSERT_FALSE(path.empty());
  auto loaded = Tokenizer::load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  check_cases(**loaded, cases);
}

TEST(LlamaCppVectorsOnSharedVocabs, Qwen2) {
  check_on_shared_vocab("qwen2", "tokenizers/qwen2.5/vocab.json", "tokenizers/qwen2.5/merges.txt",
                        "qwen2");
}

TEST(LlamaCppVectorsOnSharedVocabs, LlamaBpe) {
  check_on_shared_vocab("llama-bpe", "tokenizers/llama3/llama3.2_encoder.json",
                        "tokenizers/llama3/llama3.2_vocab.bpe", "llama-bpe");
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}

// Without a checkout the list is empty; CheckoutHasTestVocabularies says so.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LlamaCppVocab);
INSTANTIATE_TEST_SUITE_P(Models, LlamaCppVocab, ::testing::ValuesIn(vocab_names()), case_name);

}  // namespace
}  // namespace strata

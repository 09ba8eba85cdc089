// GGUF vocabularies against llama.cpp's tokenizer test vectors. llama.cpp's repository carries
// vocabulary-only GGUF files (models/ggml-vocab-NAME.gguf), each with test inputs (.gguf.inp: texts
// separated by "\n__ggml_vocab_test__\n") and the ids Hugging Face's tokenizer gives them without
// special tokens (.gguf.out: one line of space-separated ids per input). The files are read from a
// llama.cpp checkout beside the project ($STRATA_LLAMA_CPP, else <repo>/../llama.cpp), never
// copied in; without a checkout every case skips with a message saying where it looked.
//
// One test case per .inp/.out pair. A case skips (naming the reason) when its .gguf is absent from
// the checkout or its vocabulary type is one Strata does not implement (kUnsupportedModels);
// every other case must load and reproduce every expected id sequence.
#include <gtest/gtest.h>
#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace strata {
namespace {

using testing::path_exists;

// tokenizer.ggml.model values Strata does not implement, with the reason a case skips.
const std::map<std::string, std::string>& unsupported_models() {
  static const std::map<std::string, std::string> m = {};
  return m;
}

std::string llama_cpp_dir() {
  if (const char* env = std::getenv("STRATA_LLAMA_CPP"); env != nullptr && *env) return env;
  return std::string(STRATA_SOURCE_DIR) + "/../llama.cpp";
}

std::string models_dir() { return llama_cpp_dir() + "/models"; }

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
  EXPECT_FALSE(vocab_names().empty())
      << models_dir() << " has no ggml-vocab-*.gguf.inp/.out pairs";
}

class LlamaCppVocab : public ::testing::TestWithParam<std::string> {};

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
  const Tokenizer& t = **loaded;
  const bool wordpiece = t.info().model == "WordPiece";
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto ids = t.encode(c.text, /*add_special_tokens=*/false);
    ASSERT_TRUE(ids.ok()) << "input " << i + 1 << " '" << c.text << "': " << ids.status().to_string();
    if (*ids != c.ids) ++failures;
    std::string back = t.decode(c.ids, /*skip_special_tokens=*/false);
    auto again = t.encode(back, false);
    if (back != c.text) std::cerr << "TEXT " << GetParam() << " '" << c.text << "' -> '" << back << "'\n";
    EXPECT_EQ(*ids, c.ids) << "input " << i + 1 << " '" << c.text << "'\n  expected "
                           << describe_ids(t, c.ids) << "\n  got      " << describe_ids(t, *ids);
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " inputs differ";
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

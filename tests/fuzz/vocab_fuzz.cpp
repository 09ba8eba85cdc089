// The other tokenizer files, loaded through Tokenizer::load as a user's path would be. The first
// byte of the input picks the format and the rest is the file:
//   'm'  tokenizer.model: a SentencePiece protobuf, or tiktoken text (Llama 3)
//   'b'  vocab.json, merges.txt and optionally tokenizer_config.json, separated by NUL bytes
//   'j'  tokenizer.json and optionally tokenizer_config.json, separated by a NUL byte
//   'g'  a .gguf file's vocabulary (tokenizer.ggml.*)
// A tokenizer that loads is then used (see tokenizer_exercise.h). Promises checked: no crash, no
// exception; a refusal says something; encode gives ids below vocab_size().
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_targets.h"
#include "tokenizer_exercise.h"

namespace strata::fuzz {
namespace {

// A private directory for the files, made once per process and removed at exit.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "strata-fuzz-vocab-XXXXXX");
    STRATA_CHECK(::mkdtemp(templ.data()) != nullptr) << "mkdtemp failed";
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string write(const std::string& dir, const std::string& name, std::string_view bytes) {
  std::filesystem::create_directories(dir);
  std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  STRATA_CHECK(out.good()) << "cannot write " << path;
  return path;
}

// A file per piece; an absent or empty piece leaves the file out.
void write_or_remove(const std::string& dir, const std::string& name, std::string_view bytes) {
  if (!bytes.empty()) {
    write(dir, name, bytes);
  } else {
    std::error_code ec;
    std::filesystem::remove(dir + "/" + name, ec);
  }
}

// `bytes` split at its first n - 1 NUL bytes into n pieces (missing ones empty).
std::vector<std::string_view> split_at_nul(std::string_view bytes, size_t n) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < n) {
    size_t nul = bytes.find('\0');
    if (nul == std::string_view::npos) break;
    out.push_back(bytes.substr(0, nul));
    bytes.remove_prefix(nul + 1);
  }
  out.push_back(bytes);
  out.resize(n);
  return out;
}

}  // namespace

int vocab(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static TempDir tmp;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string load_path;
  switch (data[0]) {
    case 'm':
      load_path = write(tmp.path() + "/m", "tokenizer.model", rest);
      break;
    case 'b': {
      std::vector<std::string_view> files = split_at_nul(rest, 3);
      load_path = tmp.path() + "/b";
      write(load_path, "vocab.json", files[0]);
      write(load_path, "merges.txt", files[1]);
      write_or_remove(load_path, "tokenizer_config.json", files[2]);
      break;
    }
    case 'j': {
      std::vector<std::string_view> files = split_at_nul(rest, 2);
      load_path = tmp.path() + "/j";
      write(load_path, "tokenizer.json", files[0]);
      write_or_remove(load_path, "tokenizer_config.json", files[1]);
      break;
    }
    case 'g':
      load_path = write(tmp.path() + "/g", "vocab.gguf", rest);
      break;
    default:
      return 0;
  }
  auto tok = Tokenizer::load(load_path);
  if (!tok.ok()) {
    STRATA_FUZZ_CHECK(!tok.status().message().empty());
    return 0;
  }
  exercise_tokenizer(*tok);
  return 0;
}

}  // namespace strata::fuzz

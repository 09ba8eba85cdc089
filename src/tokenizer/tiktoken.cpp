// tiktoken BPE files (Meta's Llama 3 tokenizer.model, OpenAI's *.tiktoken): see loaders.h.
#include <algorithm>
#include <array>
#include <fstream>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "core/file_util.h"
#include "core/strings.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/loaders.h"

namespace strata::tok {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding; false on any other character or a bad length.
bool base64_decode(std::string_view in, std::string* out) {
  out->clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad > 0 || (v[k] = base64_value(c)) < 0) {
        return false;
      }
    }
    const uint32_t w = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out->push_back(static_cast<char>(w >> 16));
    if (pad < 2) out->push_back(static_cast<char>((w >> 8) & 0xff));
    if (pad < 1) out->push_back(static_cast<char>(w & 0xff));
  }
  return true;
}

}  // namespace

bool looks_like_tiktoken(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string line;
  if (!f || !std::getline(f, line)) return false;
  const size_t sp = line.find(' ');
  if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size()) return false;
  for (size_t i = 0; i < sp; ++i)
    if (base64_value(line[i]) < 0 && line[i] != '=') return false;
  for (size_t i = sp + 1; i < line.size(); ++i)
    if ((line[i] < '0' || line[i] > '9') && !(line[i] == '\r' && i + 1 == line.size()))
      return false;
  return true;
}

std::vector<AddedToken> llama3_special_tokens(int32_t first_id) {
  // The named ones, by offset from first_id; every other id is <|reserved_special_token_N|>,
  // N counting up over those ids in order.
  static const std::array<std::pair<int, const char*>, 8> kNamed = {{
      {0, "<|begin_of_text|>"},
      {1, "<|end_of_text|>"},
      {4, "<|finetune_right_pad_id|>"},
      {6, "<|start_header_id|>"},
      {7, "<|end_header_id|>"},
      {8, "<|eom_id|>"},
      {9, "<|eot_id|>"},
      {10, "<|python_tag|>"},
  }};
  std::vector<AddedToken> out;
  int reserved = 0;
  for (int i = 0; i < 256; ++i) {
    AddedToken t;
    t.id = first_id + i;
    t.special = true;
    for (const auto& [offset, name] : kNamed)
      if (offset == i) t.content = name;
    if (t.content.empty())
      t.content = "<|reserved_special_token_" + std::to_string(reserved++) + "|>";
    out.push_back(std::move(t));
  }
  return out;
}

void set_llama3_specials(TokenizerParts* parts) {
  parts->added_tokens = llama3_special_tokens(128000);
  parts->prefix_ids = {128000};
  parts->info.bos_token = "<|begin_of_text|>";
  parts->info.bos_id = 128000;
  parts->info.eos_token = "<|end_of_text|>";
  parts->info.eos_id = 128001;
  parts->info.add_bos = true;
}

Result<TokenizerParts> load_tiktoken(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, read_file(path));
  std::vector<std::string> tokens;
  std::unordered_map<std::string, int32_t> ranks;
  std::string bytes;
  for (const auto& [line_no, line] : text_lines(text)) {
    const size_t sp = line.find(' ');
    // (line_no is copied: lambdas capture structured bindings only from clang 16 on.)
    auto bad = [&, line_no = line_no](const std::string& why) {
      return invalid_argument("'" + path + "' line " + std::to_string(line_no) + ": " + why +
                              " (expected '<base64 token> <rank>' per line)");
    };
    if (sp == std::string_view::npos || !base64_decode(line.substr(0, sp), &bytes))
      return bad("not a base64 token");
    int64_t rank = 0;
    for (char c : line.substr(sp + 1)) {
      if (c < '0' || c > '9' || rank > INT32_MAX / 10) return bad("not a rank");
      rank = rank * 10 + (c - '0');
    }
    if (rank != static_cast<int64_t>(tokens.size()))
      return bad("rank " + std::to_string(rank) + " out of order");
    ranks.emplace(bytes, static_cast<int32_t>(rank));
    tokens.push_back(bytes);
  }
  if (tokens.size() < 256) return invalid_argument("'" + path + "' holds fewer than 256 tokens");
  // tiktoken merges the adjacent pair whose concatenation has the lowest rank. As a merges list:
  // every split (left, right) of a token into two tokens, ordered by the token's rank (then by
  // the parts' ranks), so that a pair's priority is the rank of what it makes.
  Vocab vocab;
  vocab.reserve(tokens.size());
  struct Merge {
    int32_t rank, left, right;
  };
  std::vector<Merge> order;
  for (size_t r = 0; r < tokens.size(); ++r) {
    vocab.set(static_cast<int32_t>(r), bytes_to_byte_level(tokens[r]));
    const std::string& t = tokens[r];
    for (size_t i = 1; i < t.size(); ++i) {
      auto l = ranks.find(t.substr(0, i)), rr = ranks.find(t.substr(i));
      if (l != ranks.end() && rr != ranks.end())
        order.push_back({static_cast<int32_t>(r), l->second, rr->second});
    }
  }
  std::sort(order.begin(), order.end(), [](const Merge& a, const Merge& b) {
    return std::tie(a.rank, a.left, a.right) < std::tie(b.rank, b.left, b.right);
  });
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(order.size());
  for (const Merge& m : order) merges.emplace_back(vocab.piece(m.left), vocab.piece(m.right));
  BpeFilesOptions options;
  options.preset = "llama3";  // cl100k's split pattern, whole-word lookups first (as tiktoken)
  STRATA_ASSIGN_OR_RETURN(TokenizerParts parts, byte_level_bpe_parts(std::move(vocab), merges,
                                                                     options, "'" + path + "'"));
  const bool llama3 = tokens.size() == 128000;
  if (llama3) set_llama3_specials(&parts);
  parts.info.format = llama3 ? "tiktoken (Llama 3)" : "tiktoken";
  return parts;
}

}  // namespace strata::tok

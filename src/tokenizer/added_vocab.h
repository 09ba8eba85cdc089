// Added tokens (special and user-added): matched in the text before the model runs and never
// split. Matching is leftmost-longest; `lstrip`/`rstrip` swallow neighbouring whitespace and
// `single_word` only matches outside words, as in Hugging Face tokenizers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // skipped by decode(skip_special_tokens=true)
  bool lstrip = false;       // also consumes whitespace on its left
  bool rstrip = false;       // also consumes whitespace on its right
  bool single_word = false;  // only matches when not inside a word
  bool normalized = false;   // matched against normalised text instead of the raw input
};

// One piece of a split: either an added token (id >= 0) or plain text (id == -1) covering bytes
// [begin, end) of the split string.
struct TextPiece {
  int32_t id;
  size_t begin;
  size_t end;
};

class AddedTokenMatcher {
 public:
  // Keeps the tokens whose `normalized` flag equals `normalized`; tokens with empty content are
  // ignored. `tokens` must outlive nothing: contents are copied.
  void build(const std::vector<AddedToken>& tokens, bool normalized);
  bool empty() const { return tokens_.empty(); }

  // Splits `text` (valid UTF-8) into pieces covering it in order; appends to *out.
  void split(std::string_view text, std::vector<TextPiece>* out) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
    int32_t token = -1;                             // index into tokens_ when a token ends here
  };
  // Longest token starting at text[pos]; returns its index or -1 and sets *len.
  int32_t longest_at(std::string_view text, size_t pos, size_t* len) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace strata::tok

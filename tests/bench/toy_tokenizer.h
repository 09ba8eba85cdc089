// A tiny tokenizer for dataset tests: 'a'..'z' are ids 0..25, ' ' is 26, "th" merges into 27
// (so decode -> encode does not always round-trip), 28 is a BOS special token. Other bytes are
// dropped. With known_vocab = false it reports no vocabulary, like the server tokenizer.
#pragma once

#include "bench/prompt_tokenizer.h"

namespace strata::bench::testing {

class ToyTokenizer : public PromptTokenizer {
 public:
  explicit ToyTokenizer(bool known_vocab) : known_vocab_(known_vocab) {}

  static TokenIds encode_one(const std::string& s) {
    TokenIds out;
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (c == 't' && i + 1 < s.size() && s[i + 1] == 'h') {
        out.push_back(27);
        ++i;
      } else if (c >= 'a' && c <= 'z') {
        out.push_back(c - 'a');
      } else if (c == ' ') {
        out.push_back(26);
      }
    }
    return out;
  }

  Result<std::vector<TokenIds>> encode(const std::vector<std::string>& texts) override {
    encode_calls++;
    std::vector<TokenIds> out;
    for (const auto& t : texts) out.push_back(encode_one(t));
    return out;
  }

  Result<std::vector<std::string>> decode(const std::vector<TokenIds>& ids) override {
    std::vector<std::string> out;
    for (const auto& v : ids) {
      std::string s;
      for (int32_t id : v) {
        if (id < 26)
          s += static_cast<char>('a' + id);
        else if (id == 26)
          s += ' ';
        else if (id == 27)
          s += "th";
        else if (id != 28)
          return invalid_argument("toy: id out of range");
      }
      out.push_back(s);
    }
    return out;
  }

  int64_t vocab_size() const override { return known_vocab_ ? 29 : 0; }
  std::vector<int32_t> special_ids() const override { return {28}; }
  int num_special_tokens_to_add() override { return 1; }
  std::string description() const override { return "toy"; }

  int encode_calls = 0;

 private:
  bool known_vocab_;
};

}  // namespace strata::bench::testing

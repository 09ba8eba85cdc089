// PromptTokenizer over the local tokenizer module (`--tokenizer PATH`).
#include <mutex>

#include "bench/prompt_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace strata::bench {

namespace {

class LocalTokenizer : public PromptTokenizer {
 public:
  LocalTokenizer(std::shared_ptr<const Tokenizer> tok, std::string path)
      : tok_(std::move(tok)), path_(std::move(path)) {}

  Result<std::vector<TokenIds>> encode(const std::vector<std::string>& texts) override {
    std::vector<TokenIds> out;
    out.reserve(texts.size());
    for (const auto& t : texts) {
      auto ids = tok_->encode(t, /*add_special_tokens=*/false);
      if (!ids.ok()) return ids.status().with_context("tokenizing with " + path_);
      out.push_back(std::move(ids).value());
    }
    return out;
  }

  Result<std::vector<std::string>> decode(const std::vector<TokenIds>& ids) override {
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (const auto& v : ids) out.push_back(tok_->decode(v, /*skip_special_tokens=*/false));
    return out;
  }

  int64_t vocab_size() const override { return tok_->vocab_size(); }

  std::vector<int32_t> special_ids() const override {
    std::call_once(specials_once_, [&] {
      for (int32_t id = 0; id < tok_->vocab_size(); ++id) {
        if (tok_->is_special(id)) specials_.push_back(id);
      }
    });
    return specials_;
  }

  int num_special_tokens_to_add() override {
    auto with = tok_->encode("hello", true);
    auto without = tok_->encode("hello", false);
    if (!with.ok() || !without.ok()) return 0;
    return std::max(0, static_cast<int>(with->size()) - static_cast<int>(without->size()));
  }

  std::string description() const override { return "the local tokenizer " + path_; }

 private:
  std::shared_ptr<const Tokenizer> tok_;
  std::string path_;
  mutable std::once_flag specials_once_;
  mutable std::vector<int32_t> specials_;
};

}  // namespace

Result<std::unique_ptr<PromptTokenizer>> make_local_tokenizer(const std::string& path) {
  auto tok = Tokenizer::load(path);
  if (!tok.ok()) return tok.status().with_context("--tokenizer " + path);
  return make_local_tokenizer(std::move(tok).value(), path);
}

std::unique_ptr<PromptTokenizer> make_local_tokenizer(std::shared_ptr<const Tokenizer> tok,
                                                      std::string path) {
  return std::make_unique<LocalTokenizer>(std::move(tok), std::move(path));
}

}  // namespace strata::bench

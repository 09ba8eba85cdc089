#include "tokenizer/incremental_detokenizer.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace strata {

namespace {

constexpr size_t kContextIds = 5;  // prompt ids kept as decoder context

// Length of the common prefix of a and b, backed off to a UTF-8 character boundary.
size_t common_prefix(std::string_view a, std::string_view b) {
  size_t n = 0, m = std::min(a.size(), b.size());
  while (n < m && a[n] == b[n]) ++n;
  while (n > 0 && n < b.size() && (static_cast<uint8_t>(b[n]) & 0xC0) == 0x80) --n;
  return n;
}

// "<0xAB>": a SentencePiece byte-fallback piece.
bool is_byte_piece(const std::string& p) {
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>';
}

bool ends_with_replacement(std::string_view s) {
  return s.size() >= 3 && s.substr(s.size() - 3) == tok::kReplacementUtf8;
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                               std::span<const int32_t> prompt_ids,
                                               bool skip_special_tokens)
    : tok_(std::move(tokenizer)), skip_special_(skip_special_tokens) {
  for (int32_t id : prompt_ids) {
    if (id < 0 || id >= tok_->vocab_size()) continue;
    if (skip_special_ && tok_->is_special(id)) continue;
    ids_.push_back(id);
  }
  // Keep a few ids of context, starting at the beginning of a run of byte-fallback tokens: the
  // decoder reads such a run as a whole, so a window starting inside one would garble it.
  size_t start = ids_.size() > kContextIds ? ids_.size() - kContextIds : 0;
  for (size_t extra = 0; start > 0 && extra < 16 && is_byte_piece(tok_->id_to_piece(ids_[start])) &&
                         is_byte_piece(tok_->id_to_piece(ids_[start - 1]));
       ++extra) {
    --start;
  }
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(start));
  prefix_offset_ = 0;
  read_offset_ = ids_.size();
}

std::string IncrementalDetokenizer::add(int32_t id) {
  if (id < 0 || id >= tok_->vocab_size()) return "";
  if (skip_special_ && tok_->is_special(id)) return "";
  ids_.push_back(id);
  return release(/*at_end=*/false);
}

std::string IncrementalDetokenizer::flush() {
  if (read_offset_ >= ids_.size()) return "";
  return release(/*at_end=*/true);
}

std::string IncrementalDetokenizer::release(bool at_end) {
  std::span<const int32_t> all(ids_);
  std::string prefix_text =
      tok_->decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  std::string new_text = tok_->decode(all.subspan(prefix_offset_), skip_special_);
  if (!at_end && (new_text.size() <= prefix_text.size() || ends_with_replacement(new_text))) {
    return "";  // nothing new yet, or a character still incomplete
  }
  size_t keep = common_prefix(prefix_text, new_text);
  std::string out = new_text.substr(keep);
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  // Drop ids that can no longer be in a window.
  if (prefix_offset_ > 64) {
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_));
    read_offset_ -= prefix_offset_;
    prefix_offset_ = 0;
  }
  text_ += out;
  return out;
}

}  // namespace strata

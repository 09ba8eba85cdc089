#include "tokenizer/wordpiece.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace strata::tok {

Result<std::unique_ptr<WordPieceModel>> WordPieceModel::create(Vocab vocab,
                                                               WordPieceConfig config) {
  std::optional<int32_t> unk = vocab.find(config.unk_token);
  if (!unk) {
    return invalid_argument("WordPiece unk token '" + config.unk_token +
                            "' is not in the vocabulary");
  }
  std::unique_ptr<WordPieceModel> m(new WordPieceModel());
  m->vocab_ = std::move(vocab);
  m->config_ = std::move(config);
  m->unk_id_ = *unk;
  return m;
}

void WordPieceModel::encode(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  // Byte offset where each character starts, and the end.
  std::vector<size_t> bounds;
  for (size_t pos = 0; pos < word.size();) {
    bounds.push_back(pos);
    pos += std::min<size_t>(utf8_len(static_cast<uint8_t>(word[pos])), word.size() - pos);
  }
  const size_t n_chars = bounds.size();
  bounds.push_back(word.size());
  if (n_chars > config_.max_input_chars_per_word) {
    ids->push_back(unk_id_);
    return;
  }
  const size_t first = ids->size();
  const std::string& prefix = config_.continuing_subword_prefix;
  std::string key;
  size_t start = 0;  // in characters
  while (start < n_chars) {
    std::optional<int32_t> found;
    size_t end = n_chars;
    for (; end > start; --end) {
      std::string_view part = word.substr(bounds[start], bounds[end] - bounds[start]);
      if (start == 0) {
        found = vocab_.find(part);
      } else {
        key.assign(prefix);
        key.append(part);
        found = vocab_.find(key);
      }
      if (found) break;
    }
    if (!found) {  // the whole word is unknown
      ids->resize(first);
      ids->push_back(unk_id_);
      return;
    }
    ids->push_back(*found);
    start = end;
  }
}

}  // namespace strata::tok

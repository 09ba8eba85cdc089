#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_parts.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace strata {

namespace tok {

struct TokenizerImpl {
  TokenizerParts parts;
  int32_t vocab_size = 0;
  std::vector<std::string> pieces;         // id -> piece (added tokens override the model's)
  std::vector<uint8_t> special;            // id -> special added token
  std::vector<std::string> decoded_bytes;  // byte-level decoder fast path: id -> raw bytes
  bool byte_level_decode = false;
  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>> added_index;
  AddedTokenMatcher raw_matcher;         // tokens matched on the input text
  AddedTokenMatcher normalized_matcher;  // tokens matched on normalised text
};

namespace {

// Scratch space reused by encode() on each thread.
struct EncodeScratch {
  std::vector<TextPiece> raw_pieces;
  std::vector<TextPiece> norm_pieces;
  std::string normalized;
  PreTokens pre;
};

EncodeScratch& encode_scratch() {
  thread_local EncodeScratch s;
  return s;
}

}  // namespace

}  // namespace tok

using tok::TokenizerImpl;

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_parts(tok::TokenizerParts parts) {
  if (!parts.model) return internal_error("tokenizer has no model");
  auto impl = std::make_unique<TokenizerImpl>();
  int32_t n = parts.model->vocab_size();
  const size_t count = static_cast<size_t>(n) + parts.added_tokens.size();
  for (const auto& t : parts.added_tokens) {
    if (t.id < 0) return invalid_argument("added token '" + t.content + "' has a negative id");
    if (!tok::plausible_max_id(t.id, count))
      return invalid_argument("added token '" + t.content + "' has id " + std::to_string(t.id) +
                              ", far beyond the vocabulary's " + std::to_string(count) +
                              " tokens; the tokenizer files are corrupt");
    n = std::max(n, t.id + 1);
  }
  impl->vocab_size = n;
  impl->pieces.resize(n);
  impl->special.assign(n, 0);
  for (int32_t id = 0; id < parts.model->vocab_size(); ++id) {
    impl->pieces[id] = parts.model->id_to_piece(id);
  }
  for (const auto& t : parts.added_tokens) {
    impl->pieces[t.id] = t.content;
    impl->special[t.id] = t.special ? 1 : 0;
    impl->added_index.emplace(t.content, t.id);
  }
  impl->raw_matcher.build(parts.added_tokens, /*normalized=*/false);
  // Tokens matched on normalised text are themselves normalised first (as the reference does).
  std::vector<tok::AddedToken> normalized_tokens;
  for (const auto& t : parts.added_tokens) {
    if (!t.normalized) continue;
    tok::AddedToken copy = t;
    if (!parts.normalizer.empty()) {
      STRATA_RETURN_IF_ERROR(parts.normalizer.apply(t.content, &copy.content));
    }
    normalized_tokens.push_back(std::move(copy));
  }
  impl->normalized_matcher.build(normalized_tokens, /*normalized=*/true);
  if (parts.decoder.is_byte_level_only()) {
    impl->byte_level_decode = true;
    impl->decoded_bytes.resize(n);
    for (int32_t id = 0; id < n; ++id) {
      if (!tok::byte_level_to_bytes(impl->pieces[id], &impl->decoded_bytes[id])) {
        impl->decoded_bytes[id] = impl->pieces[id];
      }
    }
  }
  for (int32_t id : parts.prefix_ids) {
    if (id < 0 || id >= n) return invalid_argument("post-processor token id out of range");
  }
  for (int32_t id : parts.suffix_ids) {
    if (id < 0 || id >= n) return invalid_argument("post-processor token id out of range");
  }
  impl->parts = std::move(parts);
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl)));
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                               bool add_special_tokens) const {
  size_t bad = tok::utf8_invalid_offset(text);
  if (bad != std::string_view::npos) {
    return invalid_argument("text is not valid UTF-8 (bad byte 0x" +
                            [&] {
                              static const char* hex = "0123456789abcdef";
                              auto c = static_cast<uint8_t>(text[bad]);
                              return std::string{hex[c >> 4], hex[c & 15]};
                            }() +
                            " at byte offset " + std::to_string(bad) +
                            "); send UTF-8 encoded text");
  }
  const auto& p = impl_->parts;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special_tokens) ids.insert(ids.end(), p.prefix_ids.begin(), p.prefix_ids.end());

  tok::EncodeScratch& s = tok::encode_scratch();
  s.raw_pieces.clear();
  if (impl_->raw_matcher.empty()) {
    if (!text.empty()) s.raw_pieces.push_back({-1, 0, text.size()});
  } else {
    impl_->raw_matcher.split(text, &s.raw_pieces);
  }
  for (const auto& piece : s.raw_pieces) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
      continue;
    }
    std::string_view segment = text.substr(piece.begin, piece.end - piece.begin);
    std::string_view normalized = segment;
    if (!p.normalizer.empty()) {
      STRATA_RETURN_IF_ERROR(p.normalizer.apply(segment, &s.normalized));
      normalized = s.normalized;
    }
    s.norm_pieces.clear();
    if (impl_->normalized_matcher.empty()) {
      s.norm_pieces.push_back({-1, 0, normalized.size()});
    } else {
      impl_->normalized_matcher.split(normalized, &s.norm_pieces);
    }
    for (const auto& np : s.norm_pieces) {
      if (np.id >= 0) {
        ids.push_back(np.id);
        continue;
      }
      std::string_view sub = normalized.substr(np.begin, np.end - np.begin);
      bool at_start = piece.begin == 0 && np.begin == 0;
      if (p.pre_tokenizer.empty()) {
        p.model->encode(sub, &ids);
        continue;
      }
      STRATA_RETURN_IF_ERROR(p.pre_tokenizer.run(sub, at_start, &s.pre));
      for (size_t i = 0; i < s.pre.ranges.size(); ++i) p.model->encode(s.pre.piece(i), &ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), p.suffix_ids.begin(), p.suffix_ids.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const TokenizerImpl& m = *impl_;
  auto keep = [&](int32_t id) {
    return id >= 0 && id < m.vocab_size && !(skip_special_tokens && m.special[id]);
  };
  if (m.byte_level_decode) {
    std::string bytes;
    for (int32_t id : ids) {
      if (keep(id)) bytes += m.decoded_bytes[id];
    }
    return tok::utf8_lossy(bytes);
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (keep(id)) tokens.push_back(m.pieces[id]);
  }
  return m.parts.decoder.decode(std::move(tokens));
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens,
                              bool clean_up_tokenization_spaces) const {
  std::string text = decode(ids, skip_special_tokens);
  return clean_up_tokenization_spaces ? clean_up_tokenization(std::move(text)) : text;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const TokenizerImpl& m = *impl_;
  if (id < 0 || id >= m.vocab_size) return "";
  if (m.byte_level_decode) return m.decoded_bytes[id];
  const std::string& piece = m.pieces[id];
  if (m.special[id]) return piece;
  const tok::Decoder& decoder = m.parts.decoder;
  if (decoder.has_step(tok::DecoderStep::Kind::kByteFallback)) {
    int b = tok::byte_token_value(piece);
    if (b >= 0) return std::string(1, static_cast<char>(b));
  }
  // Decoded after an anchor token, so that steps which treat the first token specially (a
  // leading space stripped) see this one in the middle of a text.
  std::string text = decoder.decode({"a", piece});
  return !text.empty() && text[0] == 'a' ? text.substr(1) : text;
}

int32_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}
std::optional<int32_t> Tokenizer::bos_token_id() const {
  return impl_->parts.info.bos_id;
}
std::optional<int32_t> Tokenizer::eos_token_id() const {
  return impl_->parts.info.eos_id;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view piece) const {
  auto it = impl_->added_index.find(piece);
  if (it != impl_->added_index.end()) return it->second;
  return impl_->parts.model->piece_to_id(piece);
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  if (id < 0 || id >= impl_->vocab_size) return "";
  return impl_->pieces[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size && impl_->special[id] != 0;
}

const TokenizerInfo& Tokenizer::info() const {
  return impl_->parts.info;
}

std::string Tokenizer::chat_template(std::string_view name) const {
  const auto& templates = impl_->parts.info.chat_templates;
  if (name.empty()) return templates.empty() ? "" : templates.front().second;
  for (const auto& [n, t] : templates) {
    if (n == name) return t;
  }
  return "";
}

std::string clean_up_tokenization(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    std::string out;
    tok::replace_all(text, from, to, &out);
    text.swap(out);
  }
  return text;
}

}  // namespace strata

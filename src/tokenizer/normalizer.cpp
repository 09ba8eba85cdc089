#include "tokenizer/normalizer.h"

#include <unicode/uchar.h>

namespace strata::tok {

void replace_all(std::string_view in, std::string_view from, std::string_view to,
                 std::string* out) {
  if (from.empty()) {
    out->append(in);
    return;
  }
  size_t pos = 0;
  for (;;) {
    size_t hit = in.find(from, pos);
    if (hit == std::string_view::npos) break;
    out->append(in.substr(pos, hit - pos));
    out->append(to);
    pos = hit + from.size();
  }
  out->append(in.substr(pos));
}

namespace {

Status replace_regex(const Regex& re, std::string_view in, std::string_view to, std::string* out) {
  size_t pos = 0, b = 0, e = 0;
  while (pos <= in.size()) {
    int rc = re.find(in, pos, &b, &e);
    if (rc < 0)
      return invalid_argument("Replace normalizer regex failed: " + Regex::error_message(rc));
    if (rc == 0) break;
    out->append(in.substr(pos, b - pos));
    out->append(to);
    if (e == b) {  // empty match: keep one character and move on
      if (b >= in.size()) {
        pos = in.size() + 1;
        break;
      }
      size_t n = std::min<size_t>(utf8_len(static_cast<uint8_t>(in[b])), in.size() - b);
      out->append(in.substr(b, n));
      e = b + n;
    }
    pos = e;
  }
  if (pos < in.size()) out->append(in.substr(pos));
  return ok_status();
}

void strip(std::string_view in, bool left, bool right, std::string* out) {
  size_t b = 0, e = in.size();
  if (left) {
    while (b < e) {
      size_t q = b;
      if (!is_whitespace(utf8_next(in, &q))) break;
      b = q;
    }
  }
  if (right) {
    while (e > b) {
      size_t p = e - 1;
      while (p > b && (static_cast<uint8_t>(in[p]) & 0xC0) == 0x80) --p;
      size_t q = p;
      if (!is_whitespace(utf8_next(in, &q))) break;
      e = p;
    }
  }
  out->append(in.substr(b, e - b));
}

void strip_accents(std::string_view in, std::string* out) {
  size_t pos = 0;
  while (pos < in.size()) {
    size_t start = pos;
    char32_t c = utf8_next(in, &pos);
    if (!is_nonspacing_mark(c)) out->append(in.substr(start, pos - start));
  }
}

// Unicode general category C* (control, format, unassigned, private use, surrogate).
bool is_other_category(char32_t c) {
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_UNASSIGNED:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}

// The CJK Unified Ideographs blocks (and extensions, compatibility ideographs) BERT isolates.
bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void bert_clean(std::string_view in, const NormalizerStep& step, std::string* out) {
  size_t pos = 0;
  while (pos < in.size()) {
    size_t start = pos;
    char32_t c = utf8_next(in, &pos);
    if (step.clean_text) {
      bool space_like = c == '\t' || c == '\n' || c == '\r' || is_whitespace(c);
      if (space_like) {
        out->push_back(' ');
        continue;
      }
      if (c == 0 || c == kReplacementChar || is_other_category(c)) continue;
    }
    if (step.handle_chinese_chars && is_cjk_ideograph(c)) {
      out->push_back(' ');
      out->append(in.substr(start, pos - start));
      out->push_back(' ');
      continue;
    }
    out->append(in.substr(start, pos - start));
  }
}

// SentencePiece's whitespace handling around an identity character map.
void spm_whitespace(std::string_view in, const NormalizerStep& step, std::string* out) {
  std::string collapsed;
  if (step.remove_extra_whitespaces) {
    size_t b = in.find_first_not_of(' ');
    if (b == std::string_view::npos) return;
    size_t e = in.find_last_not_of(' ');
    bool prev_space = false;
    for (char c : in.substr(b, e + 1 - b)) {
      if (c == ' ' && prev_space) continue;
      prev_space = c == ' ';
      collapsed.push_back(c);
    }
    in = collapsed;
  }
  if (in.empty()) return;
  std::string_view space = step.escape_whitespaces ? kSpmSpace : " ";
  if (step.add_dummy_prefix) out->append(space);
  if (step.escape_whitespaces) {
    replace_all(in, " ", kSpmSpace, out);
  } else {
    out->append(in);
  }
}

}  // namespace

Status Normalizer::apply(std::string_view in, std::string* out) const {
  out->assign(in);
  std::string tmp;
  for (const auto& step : steps_) {
    tmp.clear();
    switch (step.kind) {
      case NormalizerStep::Kind::kNfc:
        STRATA_RETURN_IF_ERROR(normalize_utf8(NormalForm::kNFC, *out, &tmp));
        break;
      case NormalizerStep::Kind::kNfd:
        STRATA_RETURN_IF_ERROR(normalize_utf8(NormalForm::kNFD, *out, &tmp));
        break;
      case NormalizerStep::Kind::kNfkc:
        STRATA_RETURN_IF_ERROR(normalize_utf8(NormalForm::kNFKC, *out, &tmp));
        break;
      case NormalizerStep::Kind::kNfkd:
        STRATA_RETURN_IF_ERROR(normalize_utf8(NormalForm::kNFKD, *out, &tmp));
        break;
      case NormalizerStep::Kind::kLowercase:
        STRATA_RETURN_IF_ERROR(lowercase_utf8(*out, &tmp));
        break;
      case NormalizerStep::Kind::kPrepend:
        if (!out->empty()) {
          tmp = step.pattern;
          tmp += *out;
        }
        break;
      case NormalizerStep::Kind::kReplace:
        if (step.regex) {
          STRATA_RETURN_IF_ERROR(replace_regex(*step.regex, *out, step.content, &tmp));
        } else {
          replace_all(*out, step.pattern, step.content, &tmp);
        }
        break;
      case NormalizerStep::Kind::kStrip:
        strip(*out, step.left, step.right, &tmp);
        break;
      case NormalizerStep::Kind::kStripAccents:
        strip_accents(*out, &tmp);
        break;
      case NormalizerStep::Kind::kSpmWhitespace:
        spm_whitespace(*out, step, &tmp);
        break;
      case NormalizerStep::Kind::kBertClean:
        bert_clean(*out, step, &tmp);
        break;
    }
    out->swap(tmp);
  }
  return ok_status();
}

}  // namespace strata::tok

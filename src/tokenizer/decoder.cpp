#include "tokenizer/decoder.h"

#include <cstdlib>

#include "core/strings.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace strata::tok {

namespace {

using Tokens = std::vector<std::string>;

Tokens byte_level(Tokens tokens) {
  std::string bytes, one;
  for (const auto& t : tokens) {
    if (byte_level_to_bytes(t, &one)) {
      bytes += one;
    } else {
      bytes += t;  // a piece outside the byte table (an added token) is taken as it is
    }
  }
  return {utf8_lossy(bytes)};
}

}  // namespace

int byte_token_value(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

namespace {

Tokens byte_fallback(Tokens tokens) {
  Tokens out;
  std::string pending;
  auto flush = [&]() {
    if (pending.empty()) return;
    if (is_valid_utf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending.size(); ++i) out.emplace_back(kReplacementUtf8);
    }
    pending.clear();
  };
  for (auto& t : tokens) {
    int b = byte_token_value(t);
    if (b >= 0) {
      pending.push_back(static_cast<char>(b));
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  return out;
}

Tokens strip(Tokens tokens, const DecoderStep& step) {
  size_t p = 0;
  char32_t content = step.content.empty() ? 0 : utf8_next(step.content, &p);
  for (auto& t : tokens) {
    std::vector<std::pair<size_t, size_t>> chars;  // byte ranges of each character
    size_t pos = 0;
    while (pos < t.size()) {
      size_t start = pos;
      utf8_next(t, &pos);
      chars.emplace_back(start, pos);
    }
    auto char_at = [&](size_t i) {
      size_t q = chars[i].first;
      return utf8_next(t, &q);
    };
    size_t start_cut = 0, stop_cut = chars.size();
    for (size_t i = 0; i < static_cast<size_t>(step.start) && i < chars.size(); ++i) {
      if (char_at(i) != content) break;
      start_cut = i + 1;
    }
    for (size_t i = 0; i < static_cast<size_t>(step.stop) && i < chars.size(); ++i) {
      size_t index = chars.size() - i - 1;
      if (index < start_cut || char_at(index) != content) break;
      stop_cut = index;
    }
    if (start_cut >= stop_cut) {
      t.clear();
    } else {
      t = t.substr(chars[start_cut].first, chars[stop_cut - 1].second - chars[start_cut].first);
    }
  }
  return tokens;
}

Tokens replace(Tokens tokens, const DecoderStep& step) {
  for (auto& t : tokens) {
    std::string out;
    if (step.regex) {
      size_t pos = 0, b = 0, e = 0;
      while (pos <= t.size() && step.regex->find(t, pos, &b, &e) == 1 && e > b) {
        out.append(t, pos, b - pos);
        out += step.content;
        pos = e;
      }
      if (pos < t.size()) out.append(t, pos, std::string::npos);
    } else {
      replace_all(t, step.pattern, step.content, &out);
    }
    t.swap(out);
  }
  return tokens;
}

Tokens metaspace(Tokens tokens, const DecoderStep& step) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string out;
    std::string_view t = tokens[i];
    size_t pos = 0;
    while (pos < t.size()) {
      if (!step.replacement.empty() &&
          t.compare(pos, step.replacement.size(), step.replacement) == 0) {
        if (!(i == 0 && step.strip_first)) out.push_back(' ');
        pos += step.replacement.size();
      } else {
        size_t n = std::min<size_t>(utf8_len(static_cast<uint8_t>(t[pos])), t.size() - pos);
        out.append(t.substr(pos, n));
        pos += n;
      }
    }
    tokens[i].swap(out);
  }
  return tokens;
}

Tokens wordpiece(Tokens tokens, const DecoderStep& step) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string& t = tokens[i];
    if (i > 0) {
      if (!step.prefix.empty() && t.starts_with(step.prefix)) {
        t.erase(0, step.prefix.size());
      } else {
        t = " " + t;
      }
    }
    if (step.cleanup) t = clean_up_tokenization(std::move(t));
  }
  return tokens;
}

}  // namespace

bool Decoder::has_step(DecoderStep::Kind kind) const {
  for (const auto& step : steps_) {
    if (step.kind == kind) return true;
  }
  return false;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (steps_.empty()) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  for (const auto& step : steps_) {
    switch (step.kind) {
      case DecoderStep::Kind::kByteLevel:
        tokens = byte_level(std::move(tokens));
        break;
      case DecoderStep::Kind::kByteFallback:
        tokens = byte_fallback(std::move(tokens));
        break;
      case DecoderStep::Kind::kFuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecoderStep::Kind::kStrip:
        tokens = strip(std::move(tokens), step);
        break;
      case DecoderStep::Kind::kReplace:
        tokens = replace(std::move(tokens), step);
        break;
      case DecoderStep::Kind::kMetaspace:
        tokens = metaspace(std::move(tokens), step);
        break;
      case DecoderStep::Kind::kWordPiece:
        tokens = wordpiece(std::move(tokens), step);
        break;
    }
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

}  // namespace strata::tok

#include "sampling/stop_checker.h"

#include <algorithm>

namespace strata::sampling {
namespace {

constexpr size_t kTypicalPieceBytes = 256;

bool contains(std::span<const int32_t> ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Bytes at the end of s[from, size) that start a UTF-8 character not yet complete.
size_t incomplete_utf8_tail(const std::string& s, size_t from) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n - from; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) {
      need = 2;
    } else if ((c & 0xF0) == 0xE0) {
      need = 3;
    } else if ((c & 0xF8) == 0xF0) {
      need = 4;
    }
    return back < need ? back : 0;
  }
  return 0;  // no lead byte in reach: not a partial character we could complete
}

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kNone:
      break;
  }
  return "";
}

StopDecision check_stop(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                        int32_t last_token, int64_t num_output_tokens, int64_t num_prompt_tokens,
                        int64_t max_model_len) {
  StopDecision d;
  if ((params.max_tokens && num_output_tokens >= *params.max_tokens) ||
      (max_model_len > 0 && num_prompt_tokens + num_output_tokens >= max_model_len)) {
    d.reason = FinishReason::kLength;
    return d;
  }
  if (num_output_tokens < params.min_tokens) return d;
  if (!params.ignore_eos && contains(eos_token_ids, last_token)) {
    d.reason = FinishReason::kStop;
    d.stopped_by_token = true;
    return d;
  }
  if (contains(params.stop_token_ids, last_token)) {
    d.reason = FinishReason::kStop;
    d.stop_token_id = last_token;
    d.stopped_by_token = true;
  }
  return d;
}

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop, bool include_stop_str_in_output)
    : stop_(std::move(stop)), include_(include_stop_str_in_output) {
  // validate() rejects empty stop strings; drop any that get here so they cannot match everywhere.
  stop_.erase(
      std::remove_if(stop_.begin(), stop_.end(), [](const std::string& s) { return s.empty(); }),
      stop_.end());
  for (const auto& s : stop_) max_len_ = std::max(max_len_, s.size());
  // Room for typical streamed pieces, so feeding them does not allocate.
  buf_.reserve(max_len_ + kTypicalPieceBytes);
  out_.reserve(max_len_ + kTypicalPieceBytes);
}

StopStringMatcher::Update StopStringMatcher::feed(std::string_view text, bool can_stop) {
  Update update;
  out_.clear();
  if (stopped_) return update;
  const size_t old_len = buf_.size();
  buf_.append(text);

  if (can_stop && !text.empty()) {
    // A new match must end inside the new text; the earliest end wins, then the longest.
    size_t best_end = std::string::npos, best_len = 0;
    int best = -1;
    for (size_t k = 0; k < stop_.size(); ++k) {
      const std::string& s = stop_[k];
      const size_t from = old_len + 1 > s.size() ? old_len + 1 - s.size() : 0;
      const size_t pos = buf_.find(s, from);
      if (pos == std::string::npos) continue;
      const size_t end = pos + s.size();
      if (best < 0 || end < best_end || (end == best_end && s.size() > best_len)) {
        best = static_cast<int>(k);
        best_end = end;
        best_len = s.size();
      }
    }
    if (best >= 0) {
      const size_t cut = include_ ? best_end : best_end - best_len;
      if (cut > released_) out_.assign(buf_, released_, cut - released_);
      buf_.clear();
      released_ = 0;
      stopped_ = true;
      update.text = out_;
      update.stopped = true;
      update.stop_index = best;
      return update;
    }
  }

  // Hold back the longest tail that is a proper prefix of a stop string (unless the stop string
  // would be released anyway), and any incomplete UTF-8 character.
  const size_t pending = buf_.size() - released_;
  size_t hold = 0;
  if (!include_) {
    const std::string_view tail(buf_);
    for (const auto& s : stop_) {
      for (size_t len = std::min(s.size() - 1, pending); len > hold; --len) {
        if (tail.substr(tail.size() - len) == std::string_view(s).substr(0, len)) {
          hold = len;
          break;
        }
      }
    }
  }
  hold = std::max(hold, incomplete_utf8_tail(buf_, released_));
  const size_t release_end = buf_.size() - hold;
  if (release_end > released_) {
    out_.assign(buf_, released_, release_end - released_);
    released_ = release_end;
  }
  trim();
  update.text = out_;
  return update;
}

std::string_view StopStringMatcher::flush() {
  out_.clear();
  if (stopped_) return out_;
  out_.assign(buf_, released_, std::string::npos);
  released_ = buf_.size();
  trim();
  return out_;
}

void StopStringMatcher::trim() {
  // Keep up to max_len_ - 1 released bytes: a stop string released early (include mode) may
  // still complete with them.
  const size_t keep = max_len_ > 0 ? max_len_ - 1 : 0;
  if (released_ > keep) {
    const size_t drop = released_ - keep;
    buf_.erase(0, drop);
    released_ -= drop;
  }
}

}  // namespace strata::sampling

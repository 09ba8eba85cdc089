#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling/vector_math.h"

namespace strata::sampling {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kChunk = 64;  // values per chunk maximum
}  // namespace

void LogprobsComputer::reserve(int64_t n, int num_top) {
  chunk_max_.reserve((n + kChunk - 1) / kChunk);
  heap_.reserve(std::max(num_top, 0));
}

void LogprobsComputer::compute(const float* x, int64_t n, int32_t token, int num_top,
                               TokenLogprobs* out) {
  // Chunk maxima give the row maximum and let the top-k scan skip whole chunks.
  chunk_max_.resize((n + kChunk - 1) / kChunk);
  heap_.reserve(std::max(num_top, 0));
  chunk_max(x, n, kChunk, chunk_max_.data());
  float m = kNegInf;
  for (float c : chunk_max_) m = c > m ? c : m;
  // log_softmax(x) = x - max - log(sum(exp(x - max))); NaN entries count as -inf.
  const double sum = m > kNegInf ? sum_exp(x, n, m) : 0.0;
  const float log_sum = static_cast<float>(std::log(sum));  // -inf when nothing is finite
  auto logprob = [&](float v) { return (v - m) - log_sum; };

  const float xt = x[token];
  const int64_t rank = count_at_least(x, n, xt);
  out->chosen = {token, logprob(xt), static_cast<int32_t>(std::max<int64_t>(rank, 1))};

  // The num_top best (logit desc, id asc) with a heap whose front is the worst kept. Ids grow
  // during the scan, so a later token beats the front only with a strictly larger logit.
  auto ranks_before = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  const int64_t k = std::min<int64_t>(std::max(num_top, 0), n);
  heap_.clear();
  if (k > 0) {
    float front = kNegInf;
    for (int64_t c = 0, begin = 0; begin < n; ++c, begin += kChunk) {
      const bool full = static_cast<int64_t>(heap_.size()) == k;
      if (full && !(chunk_max_[c] > front)) continue;
      const int64_t end = std::min(n, begin + kChunk);
      for (int64_t i = begin; i < end; ++i) {
        const float v = x[i] == x[i] ? x[i] : kNegInf;
        if (static_cast<int64_t>(heap_.size()) < k) {
          heap_.emplace_back(v, static_cast<int32_t>(i));
          std::push_heap(heap_.begin(), heap_.end(), ranks_before);
          front = heap_.front().first;
        } else if (v > front) {
          std::pop_heap(heap_.begin(), heap_.end(), ranks_before);
          heap_.back() = {v, static_cast<int32_t>(i)};
          std::push_heap(heap_.begin(), heap_.end(), ranks_before);
          front = heap_.front().first;
        }
      }
    }
    std::sort(heap_.begin(), heap_.end(), ranks_before);
  }
  out->top.clear();
  for (size_t j = 0; j < heap_.size(); ++j) {
    out->top.push_back({heap_[j].second, logprob(heap_[j].first), static_cast<int32_t>(j + 1)});
  }
}

}  // namespace strata::sampling

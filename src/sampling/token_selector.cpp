#include "sampling/token_selector.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "sampling/vector_math.h"

namespace strata::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// top_k up to this finds the k-th logit with a heap; larger k counts tokens per bucket.
constexpr int64_t kHeapTopKMax = 512;
// When top_k / min_p leave at most this many tokens they form an explicit list; otherwise the draw
// runs densely over the row.
constexpr int64_t kListMax = 4096;
// Dense top_p first tries this many of the most likely tokens before the bucket select.
constexpr int64_t kTopPFirstTry = 64;
// Buckets per level of the top_p select; a bucket with at most kSelectSortMax members is sorted.
constexpr int64_t kSelectBuckets = 2048;
constexpr int64_t kSelectSortMax = 2048;
// Values per chunk of the chunk maxima that let scans skip most of a row.
constexpr int64_t kChunk = 64;
// argmax takes chunk maxima this many chunks at a time (a stack buffer).
constexpr int64_t kArgmaxChunks = 256;
// Tokens per block of the dense draw.
constexpr int64_t kBlock = 512;

}  // namespace

int32_t argmax(const float* x, int64_t n) {
  // One pass for the maxima of chunks of kChunk, then a scan of the first chunk holding the max.
  float cm[kArgmaxChunks];
  float m = kNegInf;
  int64_t at = -1;
  for (int64_t base = 0; base < n; base += kChunk * kArgmaxChunks) {
    const int64_t len = std::min(n - base, kChunk * kArgmaxChunks);
    chunk_max(x + base, len, kChunk, cm);
    const int64_t chunks = (len + kChunk - 1) / kChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      if (cm[c] > m) {
        m = cm[c];
        at = base + c * kChunk;
      }
    }
  }
  if (at < 0) return 0;  // every logit is -inf or NaN
  for (int64_t i = at; i < n; ++i) {
    if (x[i] == m) return static_cast<int32_t>(i);
  }
  return 0;
}

float TokenSelector::kth_largest(const float* x, int64_t n, int64_t k) {
  if (k <= kHeapTopKMax) {
    // Min-heap of the k largest values seen so far; its front is the k-th largest. Whole chunks
    // whose maximum does not beat the front are skipped.
    heap_.clear();
    int64_t i = 0;
    for (; i < n && static_cast<int64_t>(heap_.size()) < k; ++i) {
      heap_.push_back(x[i] == x[i] ? x[i] : kNegInf);
    }
    std::make_heap(heap_.begin(), heap_.end(), std::greater<float>());
    float lo = heap_.front();
    auto offer = [&](float v) {
      if (v > lo) {
        std::pop_heap(heap_.begin(), heap_.end(), std::greater<float>());
        heap_.back() = v;
        std::push_heap(heap_.begin(), heap_.end(), std::greater<float>());
        lo = heap_.front();
      }
    };
    for (; i < n && i % kChunk != 0; ++i) offer(x[i]);
    for (int64_t c = i / kChunk; i < n; ++c, i += kChunk) {
      if (!(chunk_max_[c] > lo)) continue;
      const int64_t end = std::min(n, i + kChunk);
      for (int64_t j = i; j < end; ++j) offer(x[j]);
    }
    return lo;
  }
  // Large k: count tokens per bucket of the logit range (monotone, so buckets are ranked), find
  // the bucket holding the k-th, and nth_element only its members.
  const float lo = min_finite(x, n);
  float hi = kNegInf;
  for (float c : chunk_max_) hi = c > hi ? c : hi;
  if (!(hi > kNegInf)) return kNegInf;  // nothing finite
  const float scale = hi > lo ? static_cast<float>(kSelectBuckets) / (hi - lo) : 0.0f;
  bucket_.resize(n);
  bucket_indices_all(x, n, lo, scale, kSelectBuckets, bucket_.data());
  counts_.assign(kSelectBuckets, 0);
  for (int64_t i = 0; i < n; ++i) counts_[bucket_[i]]++;
  int64_t above = 0, chosen = 0;
  for (int64_t b = kSelectBuckets - 1; b >= 0; --b) {
    if (above + counts_[b] >= k) {
      chosen = b;
      break;
    }
    above += counts_[b];
  }
  tmp_.clear();
  for (int64_t i = 0; i < n; ++i) {
    if (bucket_[i] == chosen) tmp_.push_back(x[i] == x[i] ? x[i] : kNegInf);
  }
  const int64_t r = k - above;  // 1-based rank inside the bucket
  std::nth_element(tmp_.begin(), tmp_.begin() + (r - 1), tmp_.end(), std::greater<float>());
  return tmp_[r - 1];
}

void TokenSelector::top_m(const float* x, int64_t n, int64_t m) {
  // A heap whose front is the worst of the m best so far. Ids grow during the scan, so a later
  // token beats the front only with a strictly larger logit; once the heap is full, whole chunks
  // whose maximum does not beat the front are skipped.
  auto ranks_before = [](const Cand& a, const Cand& b) {
    return a.x > b.x || (a.x == b.x && a.id < b.id);
  };
  cands_.clear();
  float front = kNegInf;
  auto offer = [&](int64_t i) {
    if (w_[i] <= 0.0f) return;
    if (static_cast<int64_t>(cands_.size()) < m) {
      cands_.push_back({x[i], static_cast<int32_t>(i), w_[i]});
      std::push_heap(cands_.begin(), cands_.end(), ranks_before);
      front = cands_.front().x;
    } else if (x[i] > front) {
      std::pop_heap(cands_.begin(), cands_.end(), ranks_before);
      cands_.back() = {x[i], static_cast<int32_t>(i), w_[i]};
      std::push_heap(cands_.begin(), cands_.end(), ranks_before);
      front = cands_.front().x;
    }
  };
  for (int64_t c = 0, i = 0; i < n; ++c, i += kChunk) {
    if (static_cast<int64_t>(cands_.size()) >= m && !(chunk_max_[c] > front)) continue;
    const int64_t end = std::min(n, i + kChunk);
    for (int64_t j = i; j < end; ++j) offer(j);
  }
}

bool TokenSelector::cut_sorted_cands(double target) {
  std::sort(cands_.begin(), cands_.end(),
            [](const Cand& a, const Cand& b) { return a.x > b.x || (a.x == b.x && a.id < b.id); });
  double mass = 0.0;
  for (size_t j = 0; j < cands_.size(); ++j) {
    mass += cands_[j].w;
    if (mass >= target) {
      cands_.resize(j + 1);
      return true;
    }
  }
  return false;
}

void TokenSelector::cands_to_list() {
  std::sort(cands_.begin(), cands_.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
  list_.clear();
  list_w_.clear();
  total_ = 0.0;
  for (const Cand& c : cands_) {
    list_.push_back(c.id);
    list_w_.push_back(c.w);
    total_ += c.w;
  }
  use_list_ = true;
}

void TokenSelector::bucket_top_p(const float* x, int64_t n, double target, float lo, float hi) {
  // Find the token at which the best-first mass reaches target without sorting the row: bucket
  // the survivors linearly over their logit range (a mass histogram), keep the bucket where the
  // mass crosses target, and repeat on that bucket's members until few remain; sort those.
  // Bucketing is monotone in the logit, so every token of a higher bucket ranks first.
  double above = 0.0;  // mass of the tokens ranked before every remaining candidate
  auto choose = [&]() -> int64_t {
    for (int64_t b = kSelectBuckets - 1; b >= 0; --b) {
      if (hist_[b] > 0.0 && above + hist_[b] >= target) return b;
      above += hist_[b];
    }
    return -1;  // rounding left the target out of reach
  };
  // Level 1 over the whole row; the spare bucket kSelectBuckets collects the dropped tokens.
  float scale = hi > lo ? static_cast<float>(kSelectBuckets) / (hi - lo) : 0.0f;
  bucket_.resize(n);
  bucket_indices(x, w_.data(), n, lo, scale, kSelectBuckets, bucket_.data());
  hist_.assign(kSelectBuckets + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) hist_[bucket_[i]] += w_[i];
  int64_t chosen = choose();
  if (chosen < 0) return;  // keep everything
  cands_.clear();
  for (int64_t i = 0; i < n; ++i) {
    if (bucket_[i] == chosen) cands_.push_back({x[i], static_cast<int32_t>(i), w_[i]});
  }
  // Narrow down while the bucket is large and splits further (members stay in id order).
  bool all_equal = false;
  while (static_cast<int64_t>(cands_.size()) > kSelectSortMax) {
    lo = hi = cands_[0].x;
    for (const Cand& c : cands_) {
      lo = std::min(lo, c.x);
      hi = std::max(hi, c.x);
    }
    all_equal = lo == hi;
    if (all_equal) break;
    scale = static_cast<float>(kSelectBuckets) / (hi - lo);  // may be inf for a tiny range
    auto bucket = [&](float v) {
      float b = (v - lo) * scale;
      b = b > 0.0f ? b : 0.0f;  // NaN (0 * inf) -> 0
      b = b < static_cast<float>(kSelectBuckets - 1) ? b : static_cast<float>(kSelectBuckets - 1);
      return static_cast<int64_t>(b);
    };
    hist_.assign(kSelectBuckets, 0.0);
    for (const Cand& c : cands_) hist_[bucket(c.x)] += c.w;
    const double above_before = above;
    chosen = choose();
    if (chosen < 0) return;
    size_t kept = 0;
    for (const Cand& c : cands_) {
      if (bucket(c.x) == chosen) cands_[kept++] = c;
    }
    if (kept == cands_.size()) {  // no split (a range of a few ulps): sort instead
      above = above_before;
      break;
    }
    cands_.resize(kept);
  }
  // Best first (equal logits are already in id order), then cut where the mass reaches target.
  if (!all_equal) {
    std::sort(cands_.begin(), cands_.end(), [](const Cand& a, const Cand& b) {
      return a.x > b.x || (a.x == b.x && a.id < b.id);
    });
  }
  size_t j = 0;
  double mass = above;
  for (; j + 1 < cands_.size(); ++j) {
    mass += cands_[j].w;
    if (mass >= target) break;
  }
  keep_at_or_above(x, n, cands_[j].x, cands_[j].id, w_.data());
}

void TokenSelector::sum_blocks(int64_t n) {
  const int64_t num_blocks = (n + kBlock - 1) / kBlock;
  block_sum_.resize(num_blocks);
  total_ = 0.0;
  for (int64_t b = 0; b < num_blocks; ++b) {
    block_sum_[b] = sum_range(w_.data(), b * kBlock, std::min(n, (b + 1) * kBlock));
    total_ += block_sum_[b];
  }
}

bool TokenSelector::gather_list(const float* x, int64_t n, float m, float inv_t, float threshold) {
  cands_.clear();
  for (int64_t c = 0, begin = 0; begin < n; ++c, begin += kChunk) {
    if (!(chunk_max_[c] >= threshold)) continue;
    const int64_t end = std::min(n, begin + kChunk);
    for (int64_t i = begin; i < end; ++i) {
      if (x[i] >= threshold && x[i] > kNegInf) {
        const float w = exp_approx((x[i] - m) * inv_t);
        if (w <= 0.0f) continue;
        if (static_cast<int64_t>(cands_.size()) == kListMax) return false;
        cands_.push_back({x[i], static_cast<int32_t>(i), w});
      }
    }
  }
  return true;
}

void TokenSelector::reserve(int64_t n) {
  if (n <= reserved_) return;
  // Worst cases, so that steady-state sampling never allocates: a bucket (or nth_element set)
  // can hold the whole row, lists hold at most kListMax tokens.
  w_.reserve(n);
  bucket_.reserve(n);
  tmp_.reserve(n);
  cands_.reserve(n);
  chunk_max_.reserve((n + kChunk - 1) / kChunk);
  block_sum_.reserve((n + kBlock - 1) / kBlock);
  list_.reserve(kListMax);
  list_w_.reserve(kListMax);
  heap_.reserve(kHeapTopKMax);
  hist_.reserve(kSelectBuckets + 1);
  counts_.reserve(kSelectBuckets);
  reserved_ = n;
}

bool TokenSelector::select(const float* x, int64_t n, const FilterParams& f) {
  reserve(n);
  // Chunk maxima: the row maximum, and whole chunks skipped by the top_k / top_p scans.
  chunk_max_.resize((n + kChunk - 1) / kChunk);
  chunk_max(x, n, kChunk, chunk_max_.data());
  float m = kNegInf;
  for (float c : chunk_max_) m = c > m ? c : m;
  if (!(m > kNegInf)) return false;
  const float inv_t = 1.0f / f.temperature;

  // min_p first (vLLM applies it before top_k/top_p); it keeps p >= min_p * p_max.
  float threshold = kNegInf;
  if (f.min_p > 0.0f) {
    threshold = static_cast<float>(static_cast<double>(m) +
                                   static_cast<double>(f.temperature) * std::log(f.min_p));
  }
  if (f.top_k > 0 && f.top_k < n) threshold = std::max(threshold, kth_largest(x, n, f.top_k));
  const bool top_p = f.top_p < 1.0f;

  if (threshold > kNegInf && gather_list(x, n, m, inv_t, threshold)) {
    // Few survivors (top_k, or a min_p that cuts deep): an explicit list, sorted for top_p.
    if (top_p) {
      double total = 0.0;
      for (const Cand& c : cands_) total += c.w;
      cut_sorted_cands(static_cast<double>(f.top_p) * total);
    }
    cands_to_list();
    return true;
  }

  use_list_ = false;
  w_.resize(n);
  block_sum_.resize((n + kBlock - 1) / kBlock);
  exp_weights_blocks(x, n, m, inv_t, threshold, w_.data(), kBlock, block_sum_.data());
  total_ = 0.0;
  for (double b : block_sum_) total_ += b;
  if (!top_p) return true;
  const double target = static_cast<double>(f.top_p) * total_;
  top_m(x, n, kTopPFirstTry);
  if (cut_sorted_cands(target)) {
    cands_to_list();
    return true;
  }
  // Every token with a weight lies in [max - 87.3 T, max] (exp underflows below); a little
  // slack keeps rounding inside, and bucket_indices clamps anyway.
  const float lo = std::max(threshold, m - 88.0f * f.temperature);
  bucket_top_p(x, n, target, std::min(lo, m), m);
  sum_blocks(n);
  return true;
}

int32_t TokenSelector::sample(const float* x, int64_t n, const FilterParams& f, double u) {
  if (!select(x, n, f)) return 0;
  if (!(total_ > 0.0)) return argmax(x, n);  // only with +inf logits: every weight is 0 or NaN
  const double target = u * total_;
  if (use_list_) {
    double cum = 0.0;
    for (size_t j = 0; j < list_.size(); ++j) {
      cum += list_w_[j];
      if (cum > target) return list_[j];
    }
    return list_.back();  // only when rounding put target at the very end
  }
  // Find the block, then walk inside it.
  double cum = 0.0, cum_before_last = 0.0;
  int64_t chosen = -1, last_block = 0;
  for (int64_t b = 0; b < static_cast<int64_t>(block_sum_.size()); ++b) {
    const double s = block_sum_[b];
    if (s <= 0.0) continue;
    if (cum + s > target) {
      chosen = b;
      break;
    }
    cum_before_last = cum;
    last_block = b;
    cum += s;
  }
  if (chosen < 0) {  // rounding put target at the very end: the last block's last token
    chosen = last_block;
    cum = cum_before_last;
  }
  const int64_t begin = chosen * kBlock, end = std::min(n, begin + kBlock);
  int32_t last = static_cast<int32_t>(begin);
  for (int64_t i = begin; i < end; ++i) {
    if (w_[i] <= 0.0f) continue;
    cum += w_[i];
    last = static_cast<int32_t>(i);
    if (cum > target) return last;
  }
  return last;
}

void TokenSelector::distribution(const float* x, int64_t n, const FilterParams& f,
                                 std::vector<std::pair<int32_t, double>>* out) {
  out->clear();
  if (!select(x, n, f)) {
    out->emplace_back(0, 1.0);
    return;
  }
  if (!(total_ > 0.0)) {
    out->emplace_back(argmax(x, n), 1.0);
    return;
  }
  if (use_list_) {
    for (size_t j = 0; j < list_.size(); ++j) out->emplace_back(list_[j], list_w_[j] / total_);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (w_[i] > 0.0f) out->emplace_back(static_cast<int32_t>(i), w_[i] / total_);
  }
}

}  // namespace strata::sampling

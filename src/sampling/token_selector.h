// Turns one row of processed logits into a token: greedy argmax, or a draw from
// softmax(logits / temperature) restricted by min_p, top_k and top_p (vLLM's order: min_p, then
// top_k, then top_p).
//
// Efficient on large vocabularies, with no full sort: top_k finds the k-th logit with a small
// heap (a bucket count plus nth_element of one bucket for large k); top_p first tries the 64 most
// likely tokens and otherwise finds the exact cut with a bucket select (mass histograms over the
// logit range, refined until a few candidates are left to sort); weights are computed by a
// vectorized exp, and the draw finds its block of 512 tokens from per-block sums before walking
// inside it. The plain full-sort version lives in reference_sampler.h; the parity tests compare
// the two.
//
// Semantics (matching vLLM's masks):
//  - min_p keeps tokens with p >= min_p * p_max, i.e. logit >= max + T * ln(min_p).
//  - top_k keeps tokens whose logit is >= the k-th largest logit (ties at the k-th are kept).
//  - top_p sorts the survivors by probability (ties: lower id first) and keeps the shortest
//    prefix whose mass reaches top_p (the most likely token is always kept).
//  - the draw walks the kept tokens in ascending id order with weights exp((x - max) / T); the
//    same logits and the same u always give the same token.
//  - NaN logits are never chosen; if every logit is -inf or NaN, token 0 is returned.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace strata::sampling {

struct FilterParams {
  float temperature = 1.0f;  // > 0 (greedy requests do not come here)
  int top_k = 0;             // <= 0 or >= vocab: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
};

// Index of the largest logit; ties go to the lowest id; NaN is skipped; all -inf/NaN gives 0.
// x: [n]
int32_t argmax(const float* x, int64_t n);

// Holds reusable scratch (grows to the vocabulary size once); one per thread.
class TokenSelector {
 public:
  // Draws a token from x: [n] with filters f and u uniform in [0, 1).
  int32_t sample(const float* x, int64_t n, const FilterParams& f, double u);

  // The distribution sample() draws from: (token id, probability) for every token with a
  // non-zero weight, ascending ids. For tests and debugging.
  void distribution(const float* x, int64_t n, const FilterParams& f,
                    std::vector<std::pair<int32_t, double>>* out);

  // Grows every buffer to its worst case for rows of n tokens (once per vocabulary size);
  // sample() calls it, owners may call it ahead of use.
  void reserve(int64_t n);

 private:
  struct Cand {
    float x;     // logit
    int32_t id;  // token id
    float w;     // weight exp((x - max) / T)
  };
  // Fills either list_ (kept ids, ascending, with weights in list_w_) or dense weights w_ [n]
  // with their per-block sums. Returns false when no token has a finite logit.
  bool select(const float* x, int64_t n, const FilterParams& f);
  // Fills cands_ (ascending ids) with the tokens at or above threshold that have a weight;
  // false when there are more than kListMax of them.
  bool gather_list(const float* x, int64_t n, float m, float inv_t, float threshold);
  // The k-th largest logit of x (NaN counts as -inf); 1 <= k < n.
  float kth_largest(const float* x, int64_t n, int64_t k);
  // Fills cands_ with the m best tokens of positive dense weight, best first.
  void top_m(const float* x, int64_t n, int64_t m);
  // Sorts cands_ best first and keeps the shortest prefix whose mass reaches target.
  // Returns false (leaving cands_ sorted) when all of them together fall short.
  bool cut_sorted_cands(double target);
  // Moves cands_ into list_ / list_w_ in ascending id order.
  void cands_to_list();
  // Dense top_p: zeroes w_ outside the shortest best-first prefix whose mass reaches target.
  // Every token with a weight has its logit in [lo, hi].
  void bucket_top_p(const float* x, int64_t n, double target, float lo, float hi);
  // block_sum_ and total_ from w_.
  void sum_blocks(int64_t n);

  int64_t reserved_ = 0;
  bool use_list_ = false;
  double total_ = 0.0;             // sum of the kept weights
  std::vector<float> w_;           // [n] dense weights (0 = dropped)
  std::vector<double> block_sum_;  // [ceil(n / kBlock)] sums of w_
  std::vector<float> chunk_max_;   // [ceil(n / kChunk)] maxima of the logits
  std::vector<int32_t> list_;      // kept ids when use_list_, ascending
  std::vector<float> list_w_;      // their weights
  std::vector<float> tmp_;         // nth_element workspace
  std::vector<float> heap_;        // k-th largest heap
  std::vector<Cand> cands_;        // top_p candidates
  std::vector<double> hist_;       // top_p select histogram
  std::vector<uint16_t> bucket_;   // [n] bucket of each token (large top_k, top_p)
  std::vector<int32_t> counts_;    // large top_k bucket counts
};

}  // namespace strata::sampling

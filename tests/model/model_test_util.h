// A tiny driver for model tests: sequences with their own blocks in one KV storage, advanced by
// hand-built forward batches (the engine does this for real).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace strata::testing {

class ModelHarness {
 public:
  // fp8_ds_mla: the MLA cache in that layout (kv_dtype fp8).
  ModelHarness(Model& model, int num_seqs, int64_t max_len, int64_t block_size, DType kv_dtype,
               bool fp8_ds_mla = false)
      : model_(model), block_size_(block_size), lens_(num_seqs, 0) {
    KvSpec s = model.kv_spec();
    blocks_per_seq_ = (max_len + block_size - 1) / block_size;
    auto st = KvStorage::allocate({s.num_layers, num_seqs * blocks_per_seq_ + 1, block_size,
                                   s.num_kv_heads, s.head_dim, kv_dtype, s.has_v, s.aux_dim,
                                   s.ds_mla_latent(fp8_ds_mla)});
    EXPECT_TRUE(st.ok()) << st.status().to_string();
    storage_ = std::move(st).value();
    for (int64_t l = 0; l < s.num_layers; ++l)
      layers_.push_back({kv_dtype, block_size, s.num_kv_heads, s.head_dim, storage_.k(l),
                         storage_.v(l), 1.0f, 1.0f, storage_.k_scales(l), storage_.v_scales(l),
                         storage_.aux(l), s.aux_dim, storage_.aux_scales(l),
                         s.ds_mla_latent(fp8_ds_mla)});
    // Sequence i owns blocks in a scrambled order (block 0 is never used).
    tables_.resize(num_seqs * blocks_per_seq_);
    for (int i = 0; i < num_seqs; ++i)
      for (int64_t b = 0; b < blocks_per_seq_; ++b)
        tables_[i * blocks_per_seq_ + b] =
            static_cast<int32_t>(1 + i + num_seqs * (blocks_per_seq_ - 1 - b));
  }

  // One forward over the given sequences' new tokens; returns the logits of each sequence's
  // last new token ([seqs.size(), vocab]).
  std::vector<float> step(const std::vector<int>& seqs,
                          const std::vector<std::vector<int32_t>>& tokens, const KernelOps& ops) {
    std::vector<float> logits;
    Status st = try_step(seqs, tokens, ops, &logits);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return logits;
  }
  // The same, returning forward()'s status (the sequences advance either way).
  Status try_step(const std::vector<int>& seqs, const std::vector<std::vector<int32_t>>& tokens,
                  const KernelOps& ops, std::vector<float>* out) {
    std::vector<int32_t> ids, pos, qs = {0}, lens, tables, rows;
    std::vector<int64_t> slots;
    for (size_t k = 0; k < seqs.size(); ++k) {
      int s = seqs[k];
      for (int32_t t : tokens[k]) {
        int64_t p = lens_[s]++;
        ids.push_back(t);
        pos.push_back(static_cast<int32_t>(p));
        slots.push_back(int64_t{tables_[s * blocks_per_seq_ + p / block_size_]} * block_size_ +
                        p % block_size_);
      }
      qs.push_back(static_cast<int32_t>(ids.size()));
      lens.push_back(static_cast<int32_t>(lens_[s]));
      tables.insert(tables.end(), tables_.begin() + s * blocks_per_seq_,
                    tables_.begin() + (s + 1) * blocks_per_seq_);
      rows.push_back(qs.back() - 1);
    }
    ForwardBatch b{ids, pos, slots, qs, lens, tables, blocks_per_seq_, rows};
    out->assign(rows.size() * model_.config().vocab_size, 0.0f);
    return model_.forward(b, layers_, ops, out->data());
  }

  std::vector<float> step1(int seq, const std::vector<int32_t>& tokens, const KernelOps& ops) {
    return step({seq}, {tokens}, ops);
  }

 private:
  Model& model_;
  int64_t block_size_;
  int64_t blocks_per_seq_;
  std::vector<int64_t> lens_;
  KvStorage storage_;
  std::vector<PagedKvLayer> layers_;
  std::vector<int32_t> tables_;
};

inline int32_t argmax(const float* v, int64_t n) {
  return static_cast<int32_t>(std::max_element(v, v + n) - v);
}

// Greedy continuation of `prompt` for n tokens, prefilling in chunks of `chunk`.
inline std::vector<int32_t> greedy(Model& model, const std::vector<int32_t>& prompt, int n,
                                   const KernelOps& ops, int64_t chunk = 1 << 30,
                                   int64_t block_size = 16, DType kv = DType::kF32,
                                   bool fp8_ds_mla = false) {
  ModelHarness h(model, 1, static_cast<int64_t>(prompt.size()) + n + 1, block_size, kv, fp8_ds_mla);
  const int64_t V = model.config().vocab_size;
  std::vector<float> logits;
  for (size_t i = 0; i < prompt.size(); i += chunk) {
    size_t e = std::min(prompt.size(), i + static_cast<size_t>(chunk));
    logits = h.step1(0, std::vector<int32_t>(prompt.begin() + i, prompt.begin() + e), ops);
  }
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(logits.data(), V));
    if (i + 1 < n) logits = h.step1(0, {out.back()}, ops);
  }
  return out;
}

}  // namespace strata::testing

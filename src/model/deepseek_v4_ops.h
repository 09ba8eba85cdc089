// DeepSeek-V4 (DeepseekV4ForCausalLM) building blocks: the config, manifold-constrained
// hyper-connections (mHC) with Sinkhorn mixing, sqrt-softplus / hash MoE routing with the
// SwiGLU clamp, MXFP4 and ue8m0-scaled FP8 weights, the compressed sparse attention of one layer
// (compressor, lightning indexer, sliding window + compressed rows + sinks, grouped low-rank O)
// and the KV-cache sizes of the published FP8 layout.
//
// Each op has a plain float64 reference (`*_ref`, loops written from the published description,
// for tests) and, where the engine needs a different shape, a float32 implementation.
//
// Written from the descriptions in (read to understand, no code taken):
//   - DeepSeek-V4 reference inference code `inference/model.py` and `inference/kernel.py`
//     (as mirrored in github.com/Nicooo-Wang/DeepSeek-V4-Pro-code, commit 0ec3a03c2fc3 and
//     20746603cee2), classes Compressor, Indexer, Attention, Gate, Expert, Block, ParallelHead
//     and the functions hc_split_sinkhorn, sparse_attn, precompute_freqs_cis, fp4_gemm;
//   - vllm-project/vllm vllm/model_executor/models/deepseek_v4.py and
//     vllm/model_executor/layers/deepseek_v4_attention.py (KV layout, config handling);
//   - /work/shared/docs/deepseek-v4-and-serving-notes.md section 1.3.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata {
class ThreadPool;
}

namespace strata::dsv4 {

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

enum class Scoring { kSqrtSoftplus, kSigmoid, kSoftmax };
enum class ExpertDtype { kBf16, kFp8, kFp4 };
// kWindow: sliding window only (compress ratio 0 or 1). kCsa: ratio 4, overlapping compressor
// plus the lightning indexer choosing index_topk rows. kHca: ratio 128, every complete row.
enum class AttnKind { kWindow, kCsa, kHca };

// rope_scaling {type: yarn} as V4 uses it: frequency interpolation only (no attention
// magnitude/mscale), applied to the compressed layers' RoPE.
struct Yarn {
  double factor = 1.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t original_max_position_embeddings = 0;  // 0: no YaRN
};

struct DeepseekV4Config {
  std::string architecture;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t head_dim = 0;          // the single shared K=V head
  int64_t qk_rope_head_dim = 0;  // rotated tail of each head
  int64_t q_lora_rank = 0;
  int64_t o_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t sliding_window = 0;
  // [num_hidden_layers]: 0 (window only; the file's 1 is stored as 0), 4 or 128. The file may list
  // more entries (the MTP layer's); only the first num_hidden_layers are read, as vLLM does.
  std::vector<int> compress_ratios;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  Scoring scoring = Scoring::kSqrtSoftplus;
  bool noaux_tc = true;  // topk_method: selection adds the correction bias (ffn.gate.bias)
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;  // 0: no clamp
  int64_t num_hash_layers = 0;
  int64_t hc_mult = 1;
  int64_t hc_sinkhorn_iters = 1;
  double hc_eps = 1e-6;
  double rope_theta = 10000.0;
  double compress_rope_theta = 10000.0;
  Yarn yarn;
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 0;
  int64_t num_nextn_predict_layers = 0;
  ExpertDtype expert_dtype = ExpertDtype::kBf16;
  bool fp8_weights = false;   // quantization_config quant_method fp8 (e4m3 blocks)
  bool ue8m0_scales = false;  // quantization_config scale_fmt ue8m0 (power-of-two scales)
  int64_t weight_block_n = 128;
  int64_t weight_block_k = 128;

  int compress_ratio(int64_t layer) const { return compress_ratios[layer]; }
  AttnKind attn_kind(int64_t layer) const;
  bool hash_routed(int64_t layer) const { return layer < num_hash_layers; }
  int64_t nope_head_dim() const { return head_dim - qk_rope_head_dim; }
  int64_t hc_mix_dim() const { return (2 + hc_mult) * hc_mult; }
};

// Reads a DeepseekV4ForCausalLM config.json object; `overrides` (may be null) is merged on top
// first, recursively into objects (vLLM's --hf-overrides). Errors name the offending key.
Result<DeepseekV4Config> parse_deepseek_v4_config(const nlohmann::json& config,
                                                  const nlohmann::json* overrides = nullptr);

// ---------------------------------------------------------------------------------------------
// RoPE: GPT-J interleaved pairs (2i, 2i + 1) of the last qk_rope_head_dim values
// ---------------------------------------------------------------------------------------------

// inv_freq[i] = theta^(-2i / rope_dim), blended with inv_freq / factor by YaRN's linear ramp
// between the beta_fast and beta_slow correction dims when `yarn` is non-null and has an original
// length > 0. [rope_dim / 2]
std::vector<double> rope_inv_freq(int64_t rope_dim, double theta, const Yarn* yarn);
// The table a layer uses: compressed layers (and their compressor and indexer) compress_rope_theta
// with YaRN; window-only layers rope_theta without YaRN, as DeepSeek's inference/model.py does
// (original_seq_len = 0 there). vLLM's deepseek_v4.py builds every layer's rope as deepseek_yarn
// with the layer's theta; which the checkpoint was trained with is not settled here.
std::vector<double> layer_rope_inv_freq(const DeepseekV4Config& c, int64_t layer);
// Rotates pairs (x[2i], x[2i+1]) by pos * inv_freq[i] (by the negative angle when `inverse`).
void rope_interleaved_ref(double* x, int64_t rope_dim, int64_t pos, const double* inv_freq,
                          bool inverse);
void rope_interleaved(float* x, int64_t rope_dim, int64_t pos, const double* inv_freq,
                      bool inverse);

// ---------------------------------------------------------------------------------------------
// Hyper-connections (mHC). The residual is hc streams x [hc, dim] per token. Before each
// sublayer (attention, FFN), from the RMS-scaled flattened streams:
//   mixes = (fn @ flat(x)) / rms(flat(x))          fn [(2+hc)*hc, hc*dim], rms with rms_norm_eps
//   pre   = sigmoid(mixes[0:hc] * scale[0] + base[0:hc]) + hc_eps
//   post  = 2 * sigmoid(mixes[hc:2hc] * scale[1] + base[hc:2hc])
//   comb  = Sinkhorn(mixes[2hc:] as [hc, hc] (row j, column k) * scale[2] + base[2hc:])
//   input = sum_j pre[j] * x[j]
// and after it, with f the sublayer output:
//   x'[k] = post[k] * f + sum_j comb[j][k] * x[j]
// Sinkhorn: row softmax + hc_eps, divide each column by (its sum + hc_eps), then iters - 1 times
// rows then columns by (sum + hc_eps). The final head collapses with
//   pre = sigmoid(((hc_head_fn @ flat(x)) / rms) * scale[0] + base) + hc_eps,  y = sum_j pre[j]
//   x[j].
// ---------------------------------------------------------------------------------------------

void hc_split_sinkhorn_ref(const double* mixes, const double* scale, const double* base, int hc,
                           int iters, double eps, double* pre, double* post, double* comb);
// x [hc, dim] -> y [dim], post [hc], comb [hc, hc].
void hc_pre_ref(const double* x, int hc, int64_t dim, const double* fn, const double* scale,
                const double* base, int iters, double hc_eps, double norm_eps, double* y,
                double* post, double* comb);
// f [dim], residual [hc, dim] -> out [hc, dim].
void hc_post_ref(const double* f, const double* residual, const double* post, const double* comb,
                 int hc, int64_t dim, double* out);
// x [hc, dim] -> y [dim]; fn [hc, hc*dim], scale [1], base [hc].
void hc_head_ref(const double* x, int hc, int64_t dim, const double* fn, const double* scale,
                 const double* base, double hc_eps, double norm_eps, double* y);

// Float32, batched over tokens: x [n, hc, dim]; y [n, dim]; post [n, hc]; comb [n, hc, hc].
// `pool` may be null (single thread).
struct HcWeights {
  const float* fn = nullptr;     // [(2+hc)*hc, hc*dim] (hc_head: [hc, hc*dim])
  const float* base = nullptr;   // [(2+hc)*hc] (hc_head: [hc])
  const float* scale = nullptr;  // [3] (hc_head: [1])
};
void hc_pre(const float* x, int64_t n, int hc, int64_t dim, const HcWeights& w, int iters,
            float hc_eps, float norm_eps, float* y, float* post, float* comb, ThreadPool* pool);
// f [n, dim], residual [n, hc, dim] -> out [n, hc, dim] (out may alias residual).
void hc_post(const float* f, const float* residual, const float* post, const float* comb, int64_t n,
             int hc, int64_t dim, float* out, ThreadPool* pool);
void hc_head(const float* x, int64_t n, int hc, int64_t dim, const HcWeights& w, float hc_eps,
             float norm_eps, float* y, ThreadPool* pool);

// ---------------------------------------------------------------------------------------------
// MoE routing and the expert activation
//   score    = sqrt(softplus(logit)) (or sigmoid / softmax)
//   select   = the top_k of score + bias (bias may be null; ties: the lower id), or, on a hash
//   layer
//              (layer < num_hash_layers), the token's row of tid2eid [vocab, top_k] (no bias)
//   weights  = the unbiased scores of the chosen experts, divided by their sum when `normalize`
//              (softmax scores are never renormalised), times `scaling`
//   expert   = w2(silu(min(gate, limit)) * clamp(up, -limit, limit)), limit = swiglu_limit > 0
//              (the shared expert clamps the same way)
// ---------------------------------------------------------------------------------------------

struct RoutingConfig {
  int num_experts = 0;
  int top_k = 0;
  Scoring scoring = Scoring::kSqrtSoftplus;
  bool normalize = true;
  double scaling = 1.0;
  Status validate() const;
};
RoutingConfig routing_config(const DeepseekV4Config& c);

// logits [num_experts]; hash_ids [top_k] (the token's tid2eid row) or null for score routing.
void route_token_ref(const RoutingConfig& rc, const double* logits, const double* bias,
                     const int32_t* hash_ids, int32_t* ids, double* weights);
void route_token(const RoutingConfig& rc, const float* logits, const float* bias,
                 const int32_t* hash_ids, int32_t* ids, float* weights);
// A tid2eid table from a checkpoint: every entry must name an expert in [0, num_experts) and no
// row may repeat an expert.
Status check_hash_table(const int32_t* tid2eid, int64_t vocab, int top_k, int num_experts);

double swiglu_clamped_ref(double gate, double up, double limit);
void swiglu_clamped(const float* gate, const float* up, int64_t n, float limit, float* out);

// ---------------------------------------------------------------------------------------------
// MXFP4 experts (expert_dtype "fp4") and ue8m0-scaled FP8 blocks
//   weight [n, k] stored as packed [n, k / 2] bytes, element 2j in the low nibble of byte j and
//   element 2j + 1 in the high nibble (torch float4_e2m1fn_x2 / OCP MX order); e2m1 nibble: sign
//   bit 3, exponent bits 2..1 (bias 1), mantissa bit 0: {0, .5, 1, 1.5, 2, 3, 4, 6} and negatives.
//   scales [n, k / 32] e8m0 bytes: value 2^(e - 127), 0xff is NaN.
//   W[i, j] = e2m1(nibble(i, j)) * e8m0(scales[i, j / 32]).
// FP8 weights with scale_fmt ue8m0: e4m3 values [n, k] with one e8m0 byte per block_n x block_k
// block ([ceil(n / block_n), ceil(k / block_k)]) - or f32 scales that are powers of two.
// ---------------------------------------------------------------------------------------------

inline constexpr int64_t kMxfp4Group = 32;
double e2m1_value(uint8_t nibble);
double e8m0_value(uint8_t e);
// Checks that k is a multiple of 32 (so of the packing too).
Status check_mxfp4_shape(int64_t n, int64_t k);
void dequantize_mxfp4_ref(const uint8_t* packed, const uint8_t* scales, int64_t n, int64_t k,
                          double* w);
// y [m, n] = x [m, k] @ W^T, dequantising one 32-group at a time (float32 accumulation).
void mxfp4_matmul(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t m,
                  int64_t n, int64_t k, float* y, ThreadPool* pool);
// Rounds w [n, k] to MXFP4 as the reference quantiser does: scale = the power of two >= amax/6
// of each group (2^-126 for an all-zero group), value rounded to the nearest e2m1 (ties to the
// even code). For dummy weights and tests.
void quantize_mxfp4(const float* w, int64_t n, int64_t k, uint8_t* packed, uint8_t* scales);
// w[i, j] = e4m3(q[i, j]) * 2^(scales[i / bn, j / bk] - 127), row-major [n, k].
void dequantize_fp8_ue8m0_ref(const uint8_t* q, const uint8_t* scales, int64_t n, int64_t k,
                              int64_t bn, int64_t bk, double* w);
// A checkpoint's f32 block scales as e8m0 bytes; fails (naming `what`) unless each is a
// positive power of two within e8m0's range.
Status f32_scales_to_e8m0(const float* s, int64_t count, const std::string& what, uint8_t* out);

// ---------------------------------------------------------------------------------------------
// Checkpoint layout (Hugging Face DeepSeek-V4 safetensors names)
// ---------------------------------------------------------------------------------------------

// One tensor of the checkpoint: its name, safetensors dtype ("BF16", "F32", "F8_E4M3", "F8_E8M0",
// "I8" for two packed e2m1 values per byte, "I64") and shape.
struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t bytes() const;
};
// Every tensor a checkpoint of this config holds, in a fixed order: embed/head/norm/hc_head_*,
// then layers.N.* (attn.{wq_a,wq_b,wkv,wo_a,wo_b}.{weight,scale}, attn_sink, q_norm, kv_norm,
// attn.compressor.* on ratio 4/128 layers, attn.indexer.* on ratio-4 layers, ffn.experts.E.w1-3,
// ffn.gate.{weight, bias | tid2eid on hash layers}, ffn.shared_experts.w1-3, attn_norm, ffn_norm,
// hc_{attn,ffn}_{base,fn,scale}), then, with `include_mtp`, mtp.K.* (a window-only, score-routed
// layer plus e_proj, h_proj, enorm, hnorm, norm, hc_head_*). Linear weights are e4m3 with one
// scale per 128 x 128 block when quantization_config is fp8 (else BF16) - an e8m0 byte with
// MXFP4 experts, an f32 with FP8 experts (the Base checkpoints, as vLLM reads them); routed
// experts follow expert_dtype (fp4: I8 [n, k/2] + e8m0 [n, k/32]; fp8: e4m3 blocks). For the
// published Flash config this is 69 187 tensors and 159 609 485 896 bytes, as its
// model.safetensors.index.json lists.
std::vector<TensorSpec> checkpoint_tensors(const DeepseekV4Config& c, bool include_mtp);

// ---------------------------------------------------------------------------------------------
// KV cache sizes
// ---------------------------------------------------------------------------------------------

// One token of one layer in V4's FP8 KV layout: nope e4m3 bytes + rope bf16 values + one ue8m0
// scale byte per 64 nope values + one pad byte (vLLM deepseek_v4_attention.py `head_bytes`):
// 448 + 128 + 7 + 1 = 584 for head_dim 512 / rope 64. Requires nope % 64 == 0.
Result<int64_t> kv_token_bytes_fp8(int64_t head_dim, int64_t rope_dim);

// The FP8 KV block as vLLM's quantize_and_insert_k_cache writes it (a block of `block_tokens`
// tokens): first every token's data - nope e4m3 bytes then rope bf16 values (448 + 128 = 576) -
// then every token's scales - one ue8m0 byte per 64 nope values then one zero pad byte (7 + 1) -
// the block padded to a multiple of the data size. A value reads e4m3(byte) * 2^(scale - 127);
// the scale is the power of two >= amax / 448 of its 64 values (amax at least 1e-4, as the
// reference's act_quant clamps).
struct Fp8KvBlockLayout {
  int64_t block_tokens = 0, nope = 0, rope = 0;
  int64_t data_bytes() const { return nope + 2 * rope; }
  int64_t scale_bytes() const { return nope / 64 + 1; }
  int64_t data_offset(int64_t slot) const { return slot * data_bytes(); }
  int64_t scale_offset(int64_t slot) const {
    return block_tokens * data_bytes() + slot * scale_bytes();
  }
  int64_t block_bytes() const;
};
Result<Fp8KvBlockLayout> fp8_kv_block_layout(int64_t head_dim, int64_t rope_dim,
                                             int64_t block_tokens);
// row [nope + rope] -> the token's bytes in `block` at `slot`; and back.
void pack_kv_token_fp8(const Fp8KvBlockLayout& l, const float* row, int64_t slot, uint8_t* block);
void unpack_kv_token_fp8(const Fp8KvBlockLayout& l, const uint8_t* block, int64_t slot, float* row);

// Rows each kind of KV holds for one sequence of `context_len` tokens, summed over the layers.
struct KvCounts {
  int64_t window_rows = 0;   // min(context, sliding_window) per layer, every layer
  int64_t c4_rows = 0;       // context / 4 per CSA layer
  int64_t c128_rows = 0;     // context / 128 per HCA layer
  int64_t indexer_rows = 0;  // context / 4 per CSA layer (index_head_dim values each)
  int64_t csa_layers = 0, hca_layers = 0, window_layers = 0;
};
KvCounts kv_counts(const DeepseekV4Config& c, int64_t context_len);

// Bytes of one sequence's KV at `context_len` tokens, by kind, in the FP8 layout
// (kv_token_bytes_fp8 per window / compressed row; indexer keys as vLLM's DeepseekCompressor
// writes them for head 128 without use_fp4_indexer_cache: index_head_dim e4m3 + one f32 scale
// per 128 values = 132 bytes), and what one decode step reads: the window rows, index_topk (or
// fewer) CSA rows plus every indexer key, every HCA row. compressor_state: the f32 pending-window
// state per sequence (kv and score: coff*ratio rows of 2*coff*head_dim values per compressed
// layer, the indexer's too; vLLM's CompressorStateCache), independent of the context.
struct KvBytes {
  int64_t window = 0, c4 = 0, c128 = 0, indexer = 0, compressor_state = 0;
  int64_t total() const { return window + c4 + c128 + indexer + compressor_state; }
  int64_t decode_read = 0;
};
Result<KvBytes> kv_bytes(const DeepseekV4Config& c, int64_t context_len);
// The same context with every layer keeping full MLA-style rows of fp8_ds_mla (656 bytes: V3's
// 512 latent + 64 rope) and reading all of them each step: the baseline V4's layout replaces.
int64_t full_attention_kv_bytes(int64_t num_layers, int64_t context_len);
// The longest context one sequence can hold in `budget_bytes` of KV (kv_bytes(...).total(), which
// grows with the context), 0 when not even one token fits; for checking --max-model-len against
// the memory plan.
Result<int64_t> max_context_for_kv_budget(const DeepseekV4Config& c, int64_t budget_bytes);
// One line for the start-up log: bytes per token per kind and the totals at `context_len`.
std::string kv_summary(const DeepseekV4Config& c, int64_t context_len);

// ---------------------------------------------------------------------------------------------
// One attention layer
// ---------------------------------------------------------------------------------------------

// Weights of one attention layer, row-major [out, in], float64 (the reference's) - names as in
// the checkpoint (layers.N.attn.*).
struct AttnWeights {
  std::vector<double> wq_a;       // [q_lora_rank, dim]
  std::vector<double> q_norm;     // [q_lora_rank]
  std::vector<double> wq_b;       // [heads * head_dim, q_lora_rank]
  std::vector<double> wkv;        // [head_dim, dim]
  std::vector<double> kv_norm;    // [head_dim]
  std::vector<double> attn_sink;  // [heads]
  std::vector<double> wo_a;       // [o_groups * o_lora_rank, heads * head_dim / o_groups]
  std::vector<double> wo_b;       // [dim, o_groups * o_lora_rank]
  // compressor.* (ratio > 0); coff = 2 for ratio 4 (overlap) else 1
  std::vector<double> c_wkv;    // [coff * head_dim, dim]
  std::vector<double> c_wgate;  // [coff * head_dim, dim]
  std::vector<double> c_ape;    // [ratio, coff * head_dim]
  std::vector<double> c_norm;   // [head_dim]
  // indexer.* (ratio 4): its own overlapping compressor of index_head_dim rows
  std::vector<double> i_wq_b;     // [index_n_heads * index_head_dim, q_lora_rank]
  std::vector<double> i_weights;  // [index_n_heads, dim] (weights_proj)
  std::vector<double> i_c_wkv;    // [2 * index_head_dim, dim]
  std::vector<double> i_c_wgate;  // [2 * index_head_dim, dim]
  std::vector<double> i_c_ape;    // [4, 2 * index_head_dim]
  std::vector<double> i_c_norm;   // [index_head_dim]
};
// Random weights of the right shapes for `layer` (tests, dummy loads).
AttnWeights random_attn_weights(const DeepseekV4Config& c, int64_t layer, uint64_t seed);
// Checks the vector sizes against the config.
Status check_attn_weights(const DeepseekV4Config& c, int64_t layer, const AttnWeights& w);

// Compressed rows of a whole sequence x [t, dim] (the layer's normed input): row r pools tokens
// [r*ratio, (r+1)*ratio) (ratio 4: also the previous 4 tokens through the first half of the
// channels), per channel softmax(score + ape) weighted sum of kv, then RMSNorm with `norm`, then
// RoPE at position r*ratio. rows: [t / ratio, out_dim]; returns the row count.
int64_t compress_ref(const double* x, int64_t t, int64_t dim, int ratio, int64_t out_dim,
                     int64_t rope_dim, const double* wkv, const double* wgate, const double* ape,
                     const double* norm, double eps, const double* inv_freq,
                     std::vector<double>* rows);

// The indexer's choice for the token at position `pos` (0-based, its own row included once
// complete): scores s[r] = sum_h relu(q_h . k_r) * w_h * index_head_dim^-1/2 * heads^-1/2 over the
// complete rows r < (pos + 1) / 4, then the index_topk best (ties: the lower row), ascending.
// q [heads, index_head_dim] (roped), w [heads], keys [rows, index_head_dim].
std::vector<int64_t> indexer_topk_ref(const double* q, const double* w, const double* keys,
                                      int64_t pos, int64_t heads, int64_t head_dim, int64_t topk);

// The whole layer on a sequence starting at position 0: x [t, dim] (after attn_norm) -> out
// [t, dim]. Token p attends to raw tokens max(0, p - window + 1) .. p, to the compressed rows it
// may see (HCA: every complete row; CSA: the indexer's top-k of the complete rows) and to a
// per-head sink (a logit with a zero value). The quantisation-aware-training simulations of the
// reference (FP8 rounding of the KV nope part, FP4 rounding and Hadamard rotation in the indexer)
// are not applied: the Hadamard rotation is orthogonal and cancels in q.k.
void attention_ref(const DeepseekV4Config& c, int64_t layer, const AttnWeights& w, const double* x,
                   int64_t t, double* out);

// The engine-shaped float32 layer: one token at a time, keeping what decode keeps per sequence -
// a ring of the last sliding_window KV rows, the compressor's pending window (ratio or 2*ratio
// rows of kv and scores), the compressed rows and, for CSA, the indexer's compressed keys.
class AttentionDecoder {
 public:
  // fp8_kv: window and compressed rows go through the FP8 KV layout (pack_kv_token_fp8) when
  // stored, as an FP8 KV cache keeps them; the indexer keys stay float.
  AttentionDecoder(const DeepseekV4Config& c, int64_t layer, const AttnWeights& w,
                   bool fp8_kv = false);
  // x [dim] of the token at position tokens_seen() -> out [dim].
  void step(const float* x, float* out);
  int64_t tokens_seen() const { return pos_; }
  int64_t compressed_rows() const;
  // Rows the last step attended to: window tokens and compressed rows (indexer-selected for CSA).
  int64_t last_window_rows() const { return last_window_; }
  int64_t last_compressed_rows() const { return last_compressed_; }

 private:
  struct Compressor {
    int ratio = 0;
    int64_t out_dim = 0;
    bool overlap = false;
    std::vector<float> wkv, wgate, ape, norm;
    std::vector<float> kv_state, score_state;  // [coff*ratio, coff*out_dim]
    std::vector<float> rows;                   // [n, out_dim]
    void init(int r, int64_t d, const std::vector<double>& wkv_d,
              const std::vector<double>& wgate_d, const std::vector<double>& ape_d,
              const std::vector<double>& norm_d);
    void push(const float* x, int64_t dim, int64_t pos, float eps, int64_t rope_dim,
              const double* inv_freq, const Fp8KvBlockLayout* fp8);
  };

  const DeepseekV4Config& c_;
  int64_t layer_;
  int ratio_;
  std::vector<double> inv_freq_;
  std::vector<float> wq_a_, q_norm_, wq_b_, wkv_, kv_norm_, sink_, wo_a_, wo_b_, i_wq_b_,
      i_weights_;
  Compressor comp_, icomp_;
  std::vector<float> window_;  // ring [sliding_window, head_dim]
  int64_t pos_ = 0;
  int64_t last_window_ = 0, last_compressed_ = 0;
  bool fp8_kv_ = false;
  Fp8KvBlockLayout fp8_layout_;
};

// ---------------------------------------------------------------------------------------------
// MoE layer, decoder block and a whole tiny model
// ---------------------------------------------------------------------------------------------

// One layer's ffn.*: router, MXFP4 routed experts (the published expert_dtype fp4) and a dense
// shared expert of moe_intermediate_size * n_shared_experts.
struct MoeWeights {
  std::vector<double> gate;      // [n_routed_experts, dim]
  std::vector<double> bias;      // [n_routed_experts] (score-routed layers; empty on hash layers)
  std::vector<int32_t> tid2eid;  // [vocab, num_experts_per_tok] (hash layers)
  // Per expert: w1/w3 [inter, dim] and w2 [dim, inter] as MXFP4 packed bytes and e8m0 scales.
  std::vector<std::vector<uint8_t>> w1, w1_scale, w3, w3_scale, w2, w2_scale;
  std::vector<double> shared_w1, shared_w3;  // [shared, dim]
  std::vector<double> shared_w2;             // [dim, shared]
};

// y [dim] = sum over the routed experts e of weight_e * w2_e(swiglu_clamped(w1_e x, w3_e x))
//         + shared(x), for the token `token_id` (read on hash layers). x: after ffn_norm.
void moe_ref(const DeepseekV4Config& c, int64_t layer, const MoeWeights& w, const double* x,
             int32_t token_id, double* y);

struct BlockWeights {
  AttnWeights attn;
  MoeWeights ffn;
  std::vector<double> attn_norm, ffn_norm;                      // [dim]
  std::vector<double> hc_attn_fn, hc_attn_base, hc_attn_scale;  // [mix, hc*dim], [mix], [3]
  std::vector<double> hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
};
struct ModelWeights {
  std::vector<double> embed, head;                              // [vocab, dim]
  std::vector<double> norm;                                     // [dim]
  std::vector<double> hc_head_fn, hc_head_base, hc_head_scale;  // [hc, hc*dim], [hc], [1]
  std::vector<BlockWeights> layers;
};
// Random weights of the right shapes (experts rounded to MXFP4); for tests and dummy runs.
ModelWeights random_model_weights(const DeepseekV4Config& c, uint64_t seed);

// Reads the checkpoint tensor `spec` (named, typed and shaped as checkpoint_tensors lists it):
// its raw little-endian bytes, spec.bytes() of them.
using TensorReader = std::function<Result<std::vector<uint8_t>>(const TensorSpec& spec)>;
// Builds the weights of the main layers (and, with `mtp`, of mtp.0.*) from a checkpoint: FP8
// weights times their e8m0 block scales, BF16 and F32 as they are, MXFP4 experts kept packed,
// tid2eid (I64) checked and narrowed. Routed experts must be MXFP4 (expert_dtype fp4). Errors name
// the tensor.
struct MtpWeights;
Result<ModelWeights> load_model_weights(const DeepseekV4Config& c, const TensorReader& read,
                                        MtpWeights* mtp = nullptr);

// The whole model on tokens [t] from position 0, float64: embedding copied into hc_mult streams;
// per layer hc_pre -> attn_norm -> attention -> hc_post, hc_pre -> ffn_norm -> MoE -> hc_post;
// then hc_head -> norm -> head. logits: [t, vocab].
// streams (may be null): [t, hc_mult, dim], the residual streams before hc_head (what the MTP
// block consumes).
void model_forward_ref(const DeepseekV4Config& c, const ModelWeights& w, const int32_t* tokens,
                       int64_t t, double* logits, double* streams = nullptr);

// The MTP block (mtp.0.*): for the main model's streams h [hc, dim] at position p and the token
// of position p + 1: x = e_proj(enorm(embed(token))) added to every stream of h_proj(hnorm(h)),
// then one decoder block (window-only attention, score routing), then its own hc_head and norm
// and the shared head. The block runs as layer num_hidden_layers of mtp_config(c).
struct MtpWeights {
  BlockWeights block;
  std::vector<double> e_proj, h_proj;      // [dim, dim]
  std::vector<double> enorm, hnorm, norm;  // [dim]
  std::vector<double> hc_head_fn, hc_head_base, hc_head_scale;
};
// c with one more compress ratio (0: the MTP layer keeps a window only).
DeepseekV4Config mtp_config(const DeepseekV4Config& c);
MtpWeights random_mtp_weights(const DeepseekV4Config& c, uint64_t seed);
// streams [t, hc, dim] of positions 0..t-1 and next_tokens [t] (the token after each position)
// -> logits [t, vocab] for the token after next.
void mtp_forward_ref(const DeepseekV4Config& c, const ModelWeights& w, const MtpWeights& m,
                     const double* streams, const int32_t* next_tokens, int64_t t, double* logits);

// The same model in float32, one token at a time (decode-shaped: per-layer AttentionDecoder
// state; MoE experts through mxfp4_matmul).
class ModelDecoder {
 public:
  ModelDecoder(const DeepseekV4Config& c, const ModelWeights& w);
  ~ModelDecoder();
  ModelDecoder(const ModelDecoder&) = delete;
  ModelDecoder& operator=(const ModelDecoder&) = delete;
  // logits [vocab] of the next token after `token` at position tokens_seen().
  void step(int32_t token, float* logits);
  int64_t tokens_seen() const { return pos_; }
  // The residual streams [hc, dim] after the last step, before hc_head.
  const std::vector<float>& streams() const { return streams_; }

  // One decoder block on the streams h [hc, dim] of one token (layer l's state in `L`).
  struct Layer;
  static void block_step(const DeepseekV4Config& c, int64_t l, Layer& L, const MoeWeights& mw,
                         int32_t token, float* h);

 private:
  const DeepseekV4Config& c_;
  const ModelWeights& w_;
  std::vector<Layer*> layers_;
  std::vector<float> embed_, head_, norm_, hc_head_fn_, hc_head_base_, hc_head_scale_, streams_;
  int64_t pos_ = 0;
};

// The MTP block in float32, one position at a time (its own window state).
class MtpDecoder {
 public:
  MtpDecoder(const DeepseekV4Config& c, const ModelWeights& w, const MtpWeights& m);
  ~MtpDecoder();
  MtpDecoder(const MtpDecoder&) = delete;
  MtpDecoder& operator=(const MtpDecoder&) = delete;
  // streams [hc, dim] of the main model at the next position (0, 1, ... one per call) and
  // next_token, the token after that position -> logits [vocab].
  void step(const float* streams, int32_t next_token, float* logits);

 private:
  const DeepseekV4Config c_;  // mtp_config(c)
  const ModelWeights& w_;
  const MtpWeights& m_;
  ModelDecoder::Layer* layer_;
  std::vector<float> embed_, head_, e_proj_, h_proj_, enorm_, hnorm_, norm_, hc_head_fn_,
      hc_head_base_, hc_head_scale_;
};

}  // namespace strata::dsv4

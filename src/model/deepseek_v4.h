// DeepSeek-V4 (DeepseekV4ForCausalLM) as an engine model: the compressed sparse attention of
// model/deepseek_v4_ops.h (sliding window + compressed rows + lightning indexer + sinks, grouped
// low-rank O), hyper-connected residual streams, sqrt-softplus / hash-routed MoE with MXFP4
// experts, run over the engine's batches with a hybrid KV cache:
//   - paged, per layer and block of block_size tokens (KvSpec::layer_block_bytes): CSA (ratio 4)
//     layers block_size/4 compressed rows then block_size/4 indexer keys, HCA (ratio 128) layers
//     block_size/128 compressed rows, window-only layers nothing. Compressed row r of a layer
//     with ratio R lives in logical block (r*R)/block_size of the sequence's block table, at
//     in-block index ((r*R) % block_size)/R. Rows at the fp8 dtype use the published layout
//     (Fp8KvBlockLayout, 584 B per row for head 512 / rope 64), indexer keys e4m3 + one f32
//     scale per row (132 B for 128 values); other dtypes keep plain rows at the dtype.
//   - per sequence, in a state slot (KvSpec::state_bytes_per_slot, Model::allocate_state): per
//     layer the sliding-window ring (sliding_window rows, row p at p % sliding_window, encoded as
//     the paged rows are) and the compressors' pending kv/score rows (f32; the indexer's too).
// The semantics are those of dsv4::AttentionDecoder / ModelDecoder (tested there against the
// float64 references); the model is tested against dsv4::model_forward_ref in
// tests/model/deepseek_v4_model_test.cpp.
#pragma once

#include <memory>

#include "model/decoder.h"
#include "model/deepseek_v4_ops.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "model/weight_source.h"

namespace strata {

Result<std::unique_ptr<Model>> create_deepseek_v4_model(const ModelConfig& config,
                                                        std::unique_ptr<WeightSource> weights,
                                                        const ModelBuildOptions& options);
Result<ModelMemoryEstimate> estimate_deepseek_v4_model(const ModelConfig& config,
                                                       WeightSource& weights,
                                                       const ModelBuildOptions& options,
                                                       int threads);

// The model from float64 weights (tests): matmul weights packed as `storage` (F32, F16, BF16).
Result<std::unique_ptr<Model>> make_deepseek_v4_model(const dsv4::DeepseekV4Config& c,
                                                      const dsv4::ModelWeights& w, DType storage,
                                                      const WorkspaceLimits& limits,
                                                      ThreadPool* pool);

// The hybrid KV spec of a config (what the model's kv_spec() returns).
KvSpec deepseek_v4_kv_spec(const dsv4::DeepseekV4Config& c);

}  // namespace strata

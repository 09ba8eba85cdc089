// Tensor and pipeline parallelism in the decoder skeleton and the Llama family (model/parallel.h,
// model/decoder.h): N ranks run as threads of this process over a local group (core/comm.h), each
// with its own model holding its shard and stage, its own KV cache and thread pool, all driven with
// the same batches; every rank's logits must equal one process's bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "core/json.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/packed_weight.h"
#include "model/layers.h"
#include "model/llama.h"
#include "model/memory_estimate.h"
#include "model/weight_source.h"
#include "model_test_util.h"
#include "test_util.h"
#include "tiny_models.h"

namespace strata {
namespace {

// The places of a tp x pp deployment (world rank = pp_rank * tp + tp_rank) with their local
// groups.
struct Deployment {
  std::vector<std::vector<std::unique_ptr<Comm>>> tp_groups, pp_groups;  // [stage], [tp_rank]
  std::vector<ModelParallel> places;
};

Deployment make_deployment(int tp, int pp, int64_t num_layers, const std::string& partition = "") {
  Deployment d;
  for (int s = 0; s < pp; ++s) d.tp_groups.push_back(make_local_group(tp));
  for (int r = 0; r < tp; ++r) d.pp_groups.push_back(make_local_group(pp));
  auto ranges = pipeline_layer_ranges(num_layers, pp, partition);
  EXPECT_TRUE(ranges.ok()) << ranges.status().to_string();
  for (int s = 0; s < pp; ++s)
    for (int r = 0; r < tp; ++r) {
      ModelParallel p;
      p.tp_size = tp;
      p.tp_rank = r;
      p.pp_size = pp;
      p.pp_rank = s;
      p.first_layer = (*ranges)[s].begin;
      p.end_layer = (*ranges)[s].end;
      p.tp = tp > 1 ? d.tp_groups[s][r].get() : nullptr;
      p.pp = pp > 1 ? d.pp_groups[r][s].get() : nullptr;
      d.places.push_back(p);
    }
  return d;
}

// Runs fn(rank) on one thread per rank.
void run_ranks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// Every rank's model: one pool of `threads` threads each (the single process may use another
// count: results must not depend on it).
struct Ranks {
  Deployment d;
  std::vector<std::unique_ptr<ThreadPool>> pools;
  std::vector<LoadedModel> models;
};

Ranks load_ranks(LoadOptions o, int tp, int pp, const std::string& partition = "",
                 int threads = 1) {
  Ranks r;
  auto config = load_model_config(o);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  r.d = make_deployment(tp, pp, config->num_hidden_layers, partition);
  for (const ModelParallel& p : r.d.places) {
    r.pools.push_back(std::make_unique<ThreadPool>(threads));
    o.pool = r.pools.back().get();
    o.parallel = p;
    auto m = load_model(o);
    EXPECT_TRUE(m.ok()) << "rank " << p.world_rank() << ": " << m.status().to_string();
    if (!m.ok()) return Ranks{};
    r.models.push_back(std::move(m).value());
  }
  return r;
}

// A fixed scenario's logits: two sequences with their own paged blocks, the first prefilled in
// chunks, then both in one batch (a chunk and a whole prompt), then greedy decode steps of both.
std::vector<std::vector<float>> scenario(Model& m, const KernelOps& ops,
                                         DType kv_dtype = DType::kF32, int decode_steps = 6) {
  const int64_t V = m.config().vocab_size;
  auto tok = [V](int64_t t) { return static_cast<int32_t>(t % V); };
  testing::ModelHarness h(m, 2, 64, 4, kv_dtype);
  std::vector<std::vector<float>> out;
  out.push_back(h.step1(0, {tok(1), tok(403), tok(407)}, ops));
  out.push_back(h.step(
      {0, 1},
      {{tok(261), tok(378)}, {tok(1), tok(300), tok(301), tok(302), tok(303), tok(57), tok(99)}},
      ops));
  for (int i = 0; i < decode_steps; ++i) {
    const std::vector<float>& last = out.back();
    const int32_t a = testing::argmax(last.data(), V), b = testing::argmax(last.data() + V, V);
    out.push_back(h.step({0, 1}, {{a}, {b}}, ops));
  }
  return out;
}

// Bit-exact comparison of two scenario results.
void expect_identical(const std::vector<std::vector<float>>& want,
                      const std::vector<std::vector<float>>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(want[s].size(), got[s].size()) << what << " step " << s;
    if (std::memcmp(want[s].data(), got[s].data(), want[s].size() * sizeof(float)) != 0) {
      size_t i = 0;
      while (i < want[s].size() && std::memcmp(&want[s][i], &got[s][i], sizeof(float)) == 0) ++i;
      ADD_FAILURE() << what << ": step " << s << " logit " << i << " is " << got[s][i]
                    << ", one process gives " << want[s][i];
      return;
    }
  }
}

// Runs the scenario on one process (`threads` compute threads; each rank has 3 - threads) and on
// a tp x pp deployment, with every kernel variant this CPU supports and a float and a bf16 KV
// cache; every rank's logits must equal the single process's.
void check_parallel_equals_single(const LoadOptions& base, int tp, int pp, const std::string& what,
                                  const std::string& partition = "", int threads = 2) {
  SCOPED_TRACE(what + " TP " + std::to_string(tp) + " x PP " + std::to_string(pp));
  ThreadPool pool(threads);
  LoadOptions o = base;
  o.pool = &pool;
  auto single = load_model(o);
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  Ranks r = load_ranks(base, tp, pp, partition, 3 - threads);
  ASSERT_EQ(r.models.size(), static_cast<size_t>(tp * pp));
  // The KV cache's default dtype follows weight_dtype(): every rank reports one process's.
  for (int i = 0; i < tp * pp; ++i)
    EXPECT_EQ(r.models[i].model->weight_dtype(), single->model->weight_dtype()) << "rank " << i;
  for (const KernelVariantInfo* info : supported_kernel_variants(/*with_reference=*/false)) {
    for (DType kv : {DType::kF32, DType::kBF16}) {
      const KernelOps& ops = kernel_ops(info->name);
      const auto want = scenario(*single->model, ops, kv);
      std::vector<std::vector<std::vector<float>>> got(tp * pp);
      run_ranks(tp * pp, [&](int i) { got[i] = scenario(*r.models[i].model, ops, kv); });
      for (int i = 0; i < tp * pp; ++i)
        expect_identical(
            want, got[i],
            what + " " + info->name + " kv " + dtype_name(kv) + " rank " + std::to_string(i));
    }
  }
}

// Each rank's memory estimate (memory_estimate.h) equals what its model holds.
void expect_estimates_match(const LoadOptions& o, Ranks& r) {
  for (size_t i = 0; i < r.models.size(); ++i) {
    const Model& m = *r.models[i].model;
    LoadOptions e = o;
    e.pool = r.pools[i].get();
    e.parallel = r.d.places[i];
    auto est = estimate_model_memory(e, 1);
    ASSERT_TRUE(est.ok()) << est.status().to_string();
    EXPECT_EQ(est->weights.total(), m.weight_bytes_total()) << "rank " << i;
    EXPECT_EQ(est->weights.weight_dtype, m.weight_dtype()) << "rank " << i;
    EXPECT_EQ(est->workspace_bytes, m.workspace_bytes()) << "rank " << i;
    EXPECT_EQ(est->kv_spec.num_layers, m.kv_spec().num_layers) << "rank " << i;
    EXPECT_EQ(est->kv_spec.num_kv_heads, m.kv_spec().num_kv_heads) << "rank " << i;
    EXPECT_EQ(est->kv_spec.head_dim, m.kv_spec().head_dim) << "rank " << i;
  }
}

LoadOptions stories_hf() {
  LoadOptions o;
  o.model = testing::shared_data_path("models/stories260K-hf");
  o.limits = {64, 128, 8};
  return o;
}

// llama-134m's config scaled down, with dummy weights: 5 layers, 12 heads over 6 KV heads.
LoadOptions small_llama(const std::string& dtype) {
  LoadOptions o;
  o.model = testing::repo_path("models/llama-134m");
  o.load_format = "dummy";
  o.dtype = dtype;
  o.seed = 7;
  o.hf_overrides = R"({"hidden_size":96,"intermediate_size":200,"num_hidden_layers":5,)"
                   R"("num_attention_heads":12,"num_key_value_heads":6,"vocab_size":1000})";
  o.limits = {64, 128, 8};
  return o;
}

TEST(TensorParallel, MatmulOutputsDoNotDependOnTheRowsPackedOrTheThreads) {
  // The premise of exact tensor parallelism: y[m, n] is the same value whether the weight holds
  // all rows or a slice of them, and whatever the thread count.
  const int64_t N = 75, K = 96, M = 7;
  Rng rng(3);
  std::vector<float> w(N * K), x(M * K);
  for (float& v : w) v = rng.uniform(-1, 1);
  for (float& v : x) v = rng.uniform(-1, 1);
  ThreadPool one(1), two(2);
  for (const KernelVariantInfo* info : supported_kernel_variants(/*with_reference=*/true)) {
    const KernelOps& ops = kernel_ops(info->name);
    for (DType st : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
      SCOPED_TRACE(info->name + " " + dtype_name(st));
      auto full =
          PackedWeight::pack(reinterpret_cast<const std::byte*>(w.data()), DType::kF32, N, K, st);
      ASSERT_TRUE(full.ok()) << full.status().to_string();
      std::vector<float> y(M * N);
      ops.matmul(x.data(), M, K, *full, y.data(), N, two);
      for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 38}, {38, 75}, {13, 14}, {20, 61}}) {
        auto part = PackedWeight::pack(reinterpret_cast<const std::byte*>(w.data() + b * K),
                                       DType::kF32, e - b, K, st);
        ASSERT_TRUE(part.ok());
        std::vector<float> yp(M * (e - b));
        ops.matmul(x.data(), M, K, *part, yp.data(), e - b, one);
        for (int64_t m = 0; m < M; ++m)
          EXPECT_EQ(
              std::memcmp(yp.data() + m * (e - b), y.data() + m * N + b, (e - b) * sizeof(float)),
              0)
              << "rows [" << b << ", " << e << ") token " << m;
      }
    }
  }
}

TEST(TensorParallel, DummyRowSlicesEqualTheWholeTensorsRows) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kQ8_0}) {
    auto src = make_dummy_source(5, d, 0.02);
    auto whole = src->get("w", {10, 64});
    ASSERT_TRUE(whole.ok());
    const std::vector<std::byte> bytes(whole->data, whole->data + whole->nbytes);
    auto rows = src->get_rows("w", {10, 64}, 3, 7);
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    EXPECT_EQ(rows->shape, (std::vector<int64_t>{4, 64}));
    ASSERT_EQ(rows->nbytes, static_cast<size_t>(dtype_bytes(d, 4 * 64)));
    EXPECT_EQ(std::memcmp(rows->data, bytes.data() + dtype_bytes(d, 3 * 64), rows->nbytes), 0)
        << dtype_name(d);
    EXPECT_FALSE(src->get_rows("w", {10, 64}, 8, 11).ok());
  }
}

// Tensors held in memory (FP8 checkpoint tensors with their block scales).
class MemorySource : public WeightSource {
 public:
  struct Tensor {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::map<std::string, Tensor> tensors;
  TensorNaming naming() const override { return TensorNaming::kHuggingFace; }
  std::string describe() const override { return "memory"; }
  bool has(const std::string& name) const override { return tensors.count(name) > 0; }
  Result<io::TensorRef> get(const std::string& name, const std::vector<int64_t>& shape,
                            DummyInit) override {
    auto it = tensors.find(name);
    if (it == tensors.end()) return not_found("no tensor " + name);
    io::TensorRef t;
    t.name = name;
    t.dtype = it->second.dtype;
    t.shape = it->second.shape;
    t.data = it->second.bytes.data();
    t.nbytes = it->second.bytes.size();
    t.file = "memory";
    STRATA_RETURN_IF_ERROR(check_shape(t, shape, "memory"));
    return t;
  }
};

TEST(TensorParallel, Fp8CheckpointRowSlicesHoldTheWholeTensorsValues) {
  // A block-scaled FP8 tensor [256, 160] (blocks of 128 x 128): any row slice, on its blocks or
  // not, computes exactly the whole weight's rows; fused with a second FP8 part too.
  const int64_t N = 256, K = 160;
  MemorySource src;
  Rng rng(11);
  for (const char* name : {"a.weight", "b.weight"}) {
    MemorySource::Tensor t{DType::kF8E4M3, {N, K}, std::vector<std::byte>(N * K)};
    for (auto& byte : t.bytes) {
      uint8_t v = static_cast<uint8_t>(rng.next_u64());
      if ((v & 0x7f) == 0x7f) v = 0x10;  // not NaN
      byte = static_cast<std::byte>(v);
    }
    src.tensors[name] = std::move(t);
    MemorySource::Tensor s{DType::kF32, {2, 2}, std::vector<std::byte>(4 * sizeof(float))};
    const float scales[4] = {0.01f, 0.02f, 0.03f, 0.005f};
    std::memcpy(s.bytes.data(), scales, sizeof(scales));
    src.tensors[std::string(name) + "_scale_inv"] = std::move(s);
  }
  const Fp8Quantization fp8;
  const TensorName a{"a.weight", ""}, b{"b.weight", ""};
  auto full = load_packed(src, {{a, N}, {b, N}}, K, -1, std::nullopt, fp8);
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  const int64_t M = 3;
  std::vector<float> x(M * K);
  for (float& v : x) v = rng.uniform(-1, 1);
  ThreadPool pool(1);
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  std::vector<float> y(M * 2 * N);
  ops.matmul(x.data(), M, K, *full, y.data(), 2 * N, pool);
  for (auto [lo, hi] :
       {std::pair<int64_t, int64_t>{0, 100}, {100, 256}, {128, 256}, {0, 128}, {37, 38}}) {
    auto part = load_packed(src, {{a, N, lo, hi}, {b, N, lo, hi}}, K, -1, std::nullopt, fp8);
    ASSERT_TRUE(part.ok()) << part.status().to_string();
    const int64_t n = hi - lo;
    std::vector<float> yp(M * 2 * n);
    ops.matmul(x.data(), M, K, *part, yp.data(), 2 * n, pool);
    for (int64_t m = 0; m < M; ++m)
      for (int half = 0; half < 2; ++half)
        EXPECT_EQ(std::memcmp(yp.data() + m * 2 * n + half * n,
                              y.data() + m * 2 * N + half * N + lo, n * sizeof(float)),
                  0)
            << "rows [" << lo << ", " << hi << ") part " << half << " token " << m;
  }
}

TEST(TensorParallel, OnlineFp8QuantizationUnderTp2WhenShardsFallOnItsBlocks) {
  // --quantization fp8 quantizes the layers into 128-row blocks at load: shards of 128 rows keep
  // the whole model's blocks (exact); shards that cut a block are refused with a clear error.
  LoadOptions o = small_llama("bfloat16");
  o.quantization = "fp8";
  o.hf_overrides = R"({"hidden_size":256,"intermediate_size":512,"num_hidden_layers":2,)"
                   R"("num_attention_heads":4,"num_key_value_heads":4,"vocab_size":1000})";
  check_parallel_equals_single(o, 2, 1, "llama fp8");
  o.hf_overrides = R"({"hidden_size":256,"intermediate_size":512,"num_hidden_layers":2,)"
                   R"("num_attention_heads":4,"num_key_value_heads":2,"vocab_size":1000})";
  Deployment d = make_deployment(2, 1, 2);
  ThreadPool pool(1);
  o.pool = &pool;
  o.parallel = d.places[0];
  auto m = load_model(o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().to_string().find("FP8 blocks of 128 rows"), std::string::npos)
      << m.status().to_string();
}

TEST(TensorParallel, AwqAndGptqLayersUnderTp2) {
  // Dummy AWQ / GPTQ checkpoints of the config: the integer layers (and GPTQ's act-order F32
  // fallback, and a quantized output head) sharded by rows.
  for (const char* q :
       {R"({"quant_method":"awq","bits":4,"group_size":32,"zero_point":true,"version":"gemm"})",
        R"({"quant_method":"gptq","bits":4,"group_size":32,"desc_act":true,"sym":true})",
        R"({"quant_method":"gptq","bits":8,"group_size":32,"desc_act":false,"sym":true,)"
        R"("lm_head":true})"}) {
    LoadOptions o = small_llama("float16");
    o.hf_overrides = std::string(R"({"hidden_size":128,"intermediate_size":256,)") +
                     R"("num_hidden_layers":3,"num_attention_heads":8,"num_key_value_heads":4,)" +
                     R"("vocab_size":1000,"torch_dtype":"float16","quantization_config":)" + q +
                     "}";
    o.dtype = "auto";
    check_parallel_equals_single(o, 2, 1, q);
    check_parallel_equals_single(o, 2, 2, q);
    Ranks r = load_ranks(o, 2, 2);
    expect_estimates_match(o, r);
  }
}

TEST(TensorParallel, Stories260KLogitsAreBitIdenticalUnderTpPpAndBoth) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  for (auto [tp, pp] : {std::pair{2, 1}, {1, 2}, {2, 2}, {4, 1}})
    check_parallel_equals_single(stories_hf(), tp, pp, "stories260K");
  // Two threads per rank against one for the single process.
  check_parallel_equals_single(stories_hf(), 2, 2, "stories260K", "", /*threads=*/1);
}

TEST(TensorParallel, KvHeadsReplicatedWhenFewerThanRanks) {
  // stories260K has 4 KV heads: over 8 ranks each rank holds the one its query heads read.
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  check_parallel_equals_single(stories_hf(), 8, 1, "stories260K");
}

TEST(TensorParallel, UnevenPipelineSplits) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  check_parallel_equals_single(stories_hf(), 1, 3, "stories260K 5 layers over 3 stages");
  check_parallel_equals_single(stories_hf(), 2, 2, "STRATA_PP_LAYER_PARTITION=1,4", "1,4");
  check_parallel_equals_single(stories_hf(), 1, 5, "one layer per stage");
}

TEST(TensorParallel, Stories260KGreedyGoldenUnderTp2Pp2) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  STRATA_REQUIRE_SHARED("golden/stories260K.json");
  auto j = read_json_file(testing::shared_data_path("golden/stories260K.json"));
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  Ranks r = load_ranks(stories_hf(), 2, 2);
  ASSERT_EQ(r.models.size(), 4u);
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  int cases = 0;
  for (const auto& c : (*j)["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    auto want = c["generated_ids"].get<std::vector<int32_t>>();
    if (want.size() > 64) want.resize(64);
    if (static_cast<int64_t>(prompt.size() + want.size()) + 1 > 128) continue;
    std::vector<std::vector<int32_t>> got(4);
    run_ranks(4, [&](int i) {
      got[i] = testing::greedy(*r.models[i].model, prompt, static_cast<int>(want.size()), ops,
                               /*chunk=*/5);
    });
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(got[i], want) << "rank " << i << ", prompt of " << prompt.size();
    ++cases;
  }
  EXPECT_GT(cases, 0);
}

TEST(TensorParallel, Stories260KGgufUnderTp2) {
  STRATA_REQUIRE_SHARED("models/stories260K.gguf");
  LoadOptions o = stories_hf();
  o.model = testing::shared_data_path("models/stories260K.gguf");
  check_parallel_equals_single(o, 2, 1, "stories260K.gguf");
  check_parallel_equals_single(o, 2, 2, "stories260K.gguf");
}

TEST(TensorParallel, DummyLlamaLogitsAreBitIdentical) {
  // Odd widths: 96 hidden and 200 intermediate over 3 ranks, 1000 vocabulary rows over 3 and 2.
  for (const char* dtype : {"float32", "bfloat16"}) {
    check_parallel_equals_single(small_llama(dtype), 2, 1, std::string("llama ") + dtype);
    check_parallel_equals_single(small_llama(dtype), 3, 1, std::string("llama ") + dtype);
    check_parallel_equals_single(small_llama(dtype), 3, 2, std::string("llama ") + dtype);
  }
}

TEST(TensorParallel, TinyArchitecturesUnderTp2AndPp2) {
  // Qwen2 biases with one KV head (replicated), Qwen3 q/k norms, Mistral's 8 heads over 2 KV
  // heads, Mixtral's MoE blocks (replicated on every rank for now).
  for (const char* name : {"qwen2_bias", "qwen3_qknorm", "mistral", "mixtral", "llama3_untied"}) {
    const testing::TinyArch* arch = nullptr;
    for (const auto& a : testing::tiny_archs())
      if (std::string(a.name) == name) arch = &a;
    ASSERT_NE(arch, nullptr) << name;
    LoadOptions o;
    o.model = testing::write_tiny_config(arch->config_json);
    o.load_format = "dummy";
    o.dtype = "float32";
    o.seed = 42;
    o.limits = {64, 128, 8};
    check_parallel_equals_single(o, 2, 1, name);
    check_parallel_equals_single(o, 2, 2, name);
  }
}

TEST(TensorParallel, QuantizedGgufUnderTp2) {
  // Q4_0 blocks: every shard is a range of whole rows, so whole blocks.
  STRATA_REQUIRE_SHARED("models/tinyllama-v0/TinyLLama-v0.Q4_0.gguf");
  LoadOptions o;
  o.model = testing::shared_data_path("models/tinyllama-v0/TinyLLama-v0.Q4_0.gguf");
  o.limits = {64, 128, 8};
  check_parallel_equals_single(o, 2, 1, "TinyLLama-v0 Q4_0");
  check_parallel_equals_single(o, 2, 2, "TinyLLama-v0 Q4_0");
}

TEST(TensorParallel, DeepseekUnderTpWithReplicatedAttentionAndUnderPp) {
  // MLA and the MoE blocks ignore the tensor-parallel place for now (replicated on every rank);
  // the skeleton's vocabulary split, dense MLP split and pipeline stages still apply.
  for (const char* name : {"deepseek_v2_lite", "deepseek_v3_fp8", "deepseek_v32"}) {
    const testing::TinyArch* arch = nullptr;
    for (const auto& a : testing::tiny_archs())
      if (std::string(a.name) == name) arch = &a;
    ASSERT_NE(arch, nullptr) << name;
    LoadOptions o;
    o.model = testing::write_tiny_config(arch->config_json);
    o.load_format = "dummy";
    o.dtype = "float32";
    o.seed = 42;
    o.limits = {64, 128, 8};
    check_parallel_equals_single(o, 2, 1, name);
    check_parallel_equals_single(o, 1, 2, name);
    check_parallel_equals_single(o, 2, 2, name);
  }
}

TEST(TensorParallel, EstimatesEqualWhatEveryRankHolds) {
  // Every tiny architecture over TP 2 x PP 2: each rank's estimate (memory_estimate.h) equals its
  // model's weights, workspace and KV cache.
  for (const auto& arch : testing::tiny_archs()) {
    SCOPED_TRACE(arch.name);
    LoadOptions o;
    o.model = testing::write_tiny_config(arch.config_json);
    o.load_format = "dummy";
    o.dtype = "bfloat16";
    o.seed = 42;
    o.limits = {64, 128, 8};
    auto config = load_model_config(o);
    ASSERT_TRUE(config.ok());
    const int tp = config->num_attention_heads % 2 == 0 ? 2 : 1;
    Ranks r = load_ranks(o, tp, 2);
    ASSERT_EQ(r.models.size(), static_cast<size_t>(2 * tp));
    expect_estimates_match(o, r);
  }
}

// Records which tensors a model asks for whole and which by row ranges.
class ShardRecorder : public WeightSource {
 public:
  explicit ShardRecorder(std::unique_ptr<WeightSource> inner) : inner_(std::move(inner)) {}
  TensorNaming naming() const override { return inner_->naming(); }
  std::string describe() const override { return "recorder"; }
  bool has(const std::string& name) const override { return inner_->has(name); }
  Result<io::TensorRef> get(const std::string& name, const std::vector<int64_t>& shape,
                            DummyInit init) override {
    whole[name] = shape;
    return inner_->get(name, shape, init);
  }
  Result<io::TensorRef> get_rows(const std::string& name, const std::vector<int64_t>& shape,
                                 int64_t begin, int64_t end, DummyInit init) override {
    rows[name] = {shape[0], end - begin};
    return inner_->get_rows(name, shape, begin, end, init);
  }
  Result<io::TensorRef> peek(const std::string& name, const std::vector<int64_t>& shape) override {
    return inner_->peek(name, shape);  // metadata only
  }
  void release_generated() override { inner_->release_generated(); }
  std::map<std::string, std::vector<int64_t>> whole;        // name -> shape
  std::map<std::string, std::pair<int64_t, int64_t>> rows;  // name -> (rows, rows read)

 private:
  std::unique_ptr<WeightSource> inner_;
};

TEST(TensorParallel, EachRankReadsOnlyItsShard) {
  LoadOptions o = small_llama("float32");
  auto config = load_model_config(o);
  ASSERT_TRUE(config.ok());
  Deployment d = make_deployment(2, 2, config->num_hidden_layers);
  ThreadPool pool(1);
  for (const ModelParallel& place : d.places) {
    SCOPED_TRACE("rank " + std::to_string(place.world_rank()));
    auto recorder = std::make_unique<ShardRecorder>(make_dummy_source(7, DType::kF32, 0.02));
    ShardRecorder& rec = *recorder;
    ModelBuildOptions b;
    b.pool = &pool;
    b.limits = o.limits;
    b.keep_in_place = false;
    b.parallel = place;
    auto m = create_llama_model(*config, std::move(recorder), b);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    // Only vectors (norms) whole; every matrix a half of its rows (5 layers: 3 + 2 per stage).
    for (const auto& [name, shape] : rec.whole) EXPECT_EQ(shape.size(), 1u) << name;
    int64_t matrices = 0;
    for (const auto& [name, r] : rec.rows) {
      EXPECT_EQ(r.second, r.first / 2) << name;
      ++matrices;
    }
    const int64_t layers = place.pp_rank == 0 ? 3 : 2;
    // q, k, v, o, gate, up, down per layer; the embedding (first stage) or the head (last).
    EXPECT_EQ(matrices, 7 * layers + 1);
  }
}

// Two steps of a multi-token-prediction module (a 12-token prompt, then one token) with given
// input hidden states: the logits of each step.
std::vector<std::vector<float>> mtp_steps(Model& m, const KernelOps& ops) {
  const KvSpec s = m.kv_spec();
  const int64_t bs = 8, H = m.config().hidden_size, V = m.config().vocab_size;
  auto storage = KvStorage::allocate(
      {s.num_layers, 5, bs, s.num_kv_heads, s.head_dim, DType::kF32, s.has_v, s.aux_dim, 0});
  EXPECT_TRUE(storage.ok());
  std::vector<PagedKvLayer> layers;
  for (int64_t l = 0; l < s.num_layers; ++l)
    layers.push_back({DType::kF32, bs, s.num_kv_heads, s.head_dim, storage->k(l), storage->v(l),
                      1.0f, 1.0f, storage->k_scales(l), storage->v_scales(l), storage->aux(l),
                      s.aux_dim, storage->aux_scales(l), 0});
  const std::vector<int32_t> table = {3, 1, 4, 2};
  std::vector<std::vector<float>> out;
  Rng rng(5);
  for (auto [p0, n] : {std::pair<int32_t, int32_t>{0, 12}, {12, 1}}) {
    std::vector<int32_t> ids, pos;
    std::vector<int64_t> slots;
    for (int32_t p = p0; p < p0 + n; ++p) {
      ids.push_back((p * 37 + 5) % static_cast<int32_t>(V));
      pos.push_back(p);
      slots.push_back(int64_t{table[p / bs]} * bs + p % bs);
    }
    std::vector<float> hidden(n * H);
    for (float& v : hidden) v = rng.uniform(-1, 1);
    const std::vector<int32_t> qs = {0, n}, lens = {p0 + n}, rows = {n - 1, 0};
    ForwardBatch b{ids, pos, slots, qs, lens, table, 4, rows, hidden};
    out.emplace_back(rows.size() * V);
    EXPECT_TRUE(m.forward(b, layers, ops, out.back().data()).ok());
  }
  return out;
}

TEST(TensorParallel, MtpModuleUnderTp2) {
  // DeepSeek-V3's MTP layer (its own embedding and head, the eh_proj input stage) over 2 ranks.
  std::string json;
  for (const auto& a : testing::tiny_archs())
    if (std::string(a.name) == "deepseek_v3_fp8") json = a.config_json;
  ASSERT_FALSE(json.empty());
  json.insert(json.find('{') + 1, R"("num_nextn_predict_layers":1,)");
  LoadOptions o;
  o.model = testing::write_tiny_config(json);
  o.load_format = "dummy";
  o.dtype = "float32";
  o.seed = 3;
  o.limits = {64, 128, 8};
  o.mtp_module = true;
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  ThreadPool pool(2);
  LoadOptions so = o;
  so.pool = &pool;
  auto single = load_model(so);
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  const auto want = mtp_steps(*single->model, ops);
  Ranks r = load_ranks(o, 2, 1);
  ASSERT_EQ(r.models.size(), 2u);
  std::vector<std::vector<std::vector<float>>> got(2);
  run_ranks(2, [&](int i) { got[i] = mtp_steps(*r.models[i].model, ops); });
  for (int i = 0; i < 2; ++i) expect_identical(want, got[i], "mtp rank " + std::to_string(i));
  // One layer: no pipeline stages.
  Deployment d = make_deployment(1, 2, 3);
  so.parallel = d.places[0];
  auto staged = load_model(so);
  ASSERT_FALSE(staged.ok());
  EXPECT_NE(staged.status().to_string().find("--pipeline-parallel-size 1"), std::string::npos)
      << staged.status().to_string();
}

TEST(TensorParallel, PerRankWeightBytesAreAboutHalfAtTp2AndEstimated) {
  for (const LoadOptions& base : {small_llama("bfloat16"), stories_hf()}) {
    if (base.load_format != "dummy" && !file_exists(base.model)) continue;
    ThreadPool pool(1);
    LoadOptions o = base;
    o.pool = &pool;
    auto single = load_model(o);
    ASSERT_TRUE(single.ok()) << single.status().to_string();
    const int64_t whole = single->model->weight_bytes_total();
    int64_t linear_whole = 0;
    for (const LinearInfo& l : single->model->linear_layers()) linear_whole += l.bytes;
    Ranks r = load_ranks(base, 2, 1);
    ASSERT_EQ(r.models.size(), 2u);
    int64_t sum = 0;
    for (int i = 0; i < 2; ++i) {
      const Model& m = *r.models[i].model;
      const int64_t bytes = m.weight_bytes_total();
      sum += bytes;
      // Every matmul and the embedding are split; only the norms are replicated.
      EXPECT_LT(bytes, whole * 52 / 100) << base.model << " rank " << i;
      EXPECT_GT(bytes, whole * 48 / 100) << base.model << " rank " << i;
      int64_t linear = 0;
      for (const LinearInfo& l : m.linear_layers()) linear += l.bytes;
      EXPECT_LE(linear, linear_whole / 2 + linear_whole / 50) << "rank " << i;
      // The memory estimate of the rank's place equals what it holds.
      LoadOptions e = base;
      e.pool = r.pools[i].get();
      e.parallel = r.d.places[i];
      auto est = estimate_model_memory(e, 1);
      ASSERT_TRUE(est.ok()) << est.status().to_string();
      EXPECT_EQ(est->weights.total(), bytes) << "rank " << i;
      EXPECT_EQ(est->workspace_bytes, m.workspace_bytes()) << "rank " << i;
      EXPECT_EQ(est->kv_spec.num_kv_heads, m.kv_spec().num_kv_heads);
      EXPECT_EQ(est->kv_spec.num_layers, m.kv_spec().num_layers);
    }
    EXPECT_GE(sum, whole);
  }
}

TEST(TensorParallel, KvSpecIsTheRanksShare) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  Ranks r = load_ranks(stories_hf(), 2, 2, "2,3");
  ASSERT_EQ(r.models.size(), 4u);
  const int64_t want_layers[] = {2, 2, 3, 3};
  for (int i = 0; i < 4; ++i) {
    const KvSpec s = r.models[i].model->kv_spec();
    EXPECT_EQ(s.num_layers, want_layers[i]) << "rank " << i;
    EXPECT_EQ(s.num_kv_heads, 2) << "rank " << i;  // 4 KV heads over 2 ranks
    EXPECT_EQ(s.head_dim, 8);
  }
}

TEST(TensorParallel, IndivisibleHeadsAreAClearError) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  Deployment d = make_deployment(3, 1, 5);
  ThreadPool pool(1);
  LoadOptions o = stories_hf();
  o.pool = &pool;
  o.parallel = d.places[0];
  auto m = load_model(o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().to_string().find(
                "num_attention_heads 8 is not divisible by --tensor-parallel-size 3"),
            std::string::npos)
      << m.status().to_string();
  auto est = estimate_model_memory(o, 1);
  EXPECT_FALSE(est.ok());
}

TEST(TensorParallel, APlaceWithoutItsGroupOrStageIsAnError) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  ThreadPool pool(1);
  LoadOptions o = stories_hf();
  o.pool = &pool;
  o.parallel.tp_size = 2;  // no tp group
  auto m = load_model(o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().to_string().find("needs the group"), std::string::npos)
      << m.status().to_string();
  Deployment d = make_deployment(1, 2, 5);
  o.parallel = d.places[1];
  o.parallel.end_layer = 4;  // the last stage must end at the last layer
  m = load_model(o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().to_string().find("are not a stage"), std::string::npos)
      << m.status().to_string();
}

TEST(TensorParallel, HiddenStatesAndPromptLogitsComeFromTheLastStage) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  ThreadPool pool(2);
  LoadOptions o = stories_hf();
  o.pool = &pool;
  auto single = load_model(o);
  ASSERT_TRUE(single.ok());
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 300};
  const std::vector<int32_t> rows = {0, 2, 5};
  auto run = [&](Model& m, std::vector<float>* logits, std::vector<float>* hidden) {
    testing::ModelHarness h(m, 1, 32, 4, DType::kF32);
    h.step1(0, prompt, ops);
    logits->resize(rows.size() * m.config().vocab_size);
    hidden->resize(rows.size() * m.config().hidden_size * 2);
    EXPECT_TRUE(m.compute_logits(rows, ops, logits->data()).ok());
    EXPECT_TRUE(m.hidden_states(rows, false, ops, hidden->data()).ok());
    EXPECT_TRUE(
        m.hidden_states(rows, true, ops, hidden->data() + rows.size() * m.config().hidden_size)
            .ok());
  };
  std::vector<float> want_logits, want_hidden;
  run(*single->model, &want_logits, &want_hidden);
  Ranks r = load_ranks(stories_hf(), 2, 2);
  ASSERT_EQ(r.models.size(), 4u);
  std::vector<std::vector<float>> logits(4), hidden(4);
  run_ranks(4, [&](int i) { run(*r.models[i].model, &logits[i], &hidden[i]); });
  for (int i = 0; i < 4; ++i) {
    expect_identical({want_logits}, {logits[i]}, "prompt logits rank " + std::to_string(i));
    expect_identical({want_hidden}, {hidden[i]}, "hidden states rank " + std::to_string(i));
  }
}

}  // namespace
}  // namespace strata

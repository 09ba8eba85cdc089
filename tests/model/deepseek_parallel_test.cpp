// DeepSeek (MLA + DeepSeekMoE) under tensor and expert parallelism (model/parallel.h): N ranks run
// as threads of this process (core/comm.h's local group), each with its own shard of the model,
// KV cache and thread pool, and every rank's logits must be BIT-identical to one process's, over
// a chunked prefill of two sequences in one batch and several batched decode steps on a paged
// cache. Also: each rank holds only its share of the routed experts, and what cannot be split is
// a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/comm.h"
#include "core/json.h"
#include "model/deepseek.h"
#include "model/deepseek_mla.h"
#include "model/moe.h"
#include "model_test_util.h"
#include "test_util.h"
#include "tiny_models.h"

namespace strata {
namespace {

const testing::TinyArch& arch(const std::string& name) {
  for (const auto& a : testing::tiny_archs())
    if (a.name == name) return a;
  ADD_FAILURE() << "no tiny arch " << name;
  return testing::tiny_archs()[0];
}

std::string patched(const std::string& json, const std::string& patch_json) {
  Json c = Json::parse(json);
  const Json patch = Json::parse(patch_json);
  for (auto& [k, v] : patch.items()) c[k] = v;
  return c.dump();
}

Result<ModelConfig> tiny_config(const std::string& json) {
  LoadOptions o;
  o.model = testing::write_tiny_config(json);
  o.load_format = "dummy";
  return load_model_config(o);
}

// The scaled DeepSeek-V3 of the shared configs (FP8 blocks of 128, MLA of the real dims, 16
// routed experts, noaux_tc routing); 4 heads.
Result<ModelConfig> scaled_v3_config(int heads) {
  LoadOptions o;
  o.model = testing::shared_data_path("configs/deepseek-v3");
  o.load_format = "dummy";
  o.hf_overrides = R"({"num_hidden_layers": 3, "first_k_dense_replace": 1, "hidden_size": 256,
      "intermediate_size": 384, "moe_intermediate_size": 64, "n_routed_experts": 16,
      "num_experts_per_tok": 4, "n_group": 4, "topk_group": 2, "q_lora_rank": 256,
      "kv_lora_rank": 128, "vocab_size": 512, "num_attention_heads": )" +
                   std::to_string(heads) + "}";
  return load_model_config(o);
}

Result<std::unique_ptr<Model>> build(const ModelConfig& c, ThreadPool& pool, ModelParallel par) {
  ModelBuildOptions o;
  o.storage = DType::kBF16;
  o.keep_in_place = false;
  o.limits = {160, 160, 8};
  o.pool = &pool;
  o.parallel = par;
  return create_deepseek_model(c, make_dummy_source(42, DType::kBF16, c.initializer_range), o);
}

// Each step: per sequence its new tokens (empty: the sequence sits the step out).
using Script = std::vector<std::vector<std::vector<int32_t>>>;

// The KV cache: its dtype, and fp8_ds_mla's layout (V3.2).
struct Kv {
  DType dtype = DType::kBF16;
  bool ds_mla = false;
};

std::vector<std::vector<float>> run_script(Model& m, const Script& script, const KernelOps& ops,
                                           Kv kv) {
  testing::ModelHarness h(m, 2, 160, 8, kv.dtype, kv.ds_mla);
  std::vector<std::vector<float>> out;
  for (const auto& step : script) {
    std::vector<int> seqs;
    std::vector<std::vector<int32_t>> tokens;
    for (int s = 0; s < static_cast<int>(step.size()); ++s)
      if (!step[s].empty()) {
        seqs.push_back(s);
        tokens.push_back(step[s]);
      }
    out.push_back(h.step(seqs, tokens, ops));
  }
  return out;
}

std::vector<int32_t> tokens(int64_t vocab, int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 37 + seed * 11 + 5) % vocab));
  return p;
}

// A chunked prefill of sequence 0 (the second chunk batched with sequence 1's whole prompt of
// `long_prompt` tokens, over the MoE's all-gather chunk), then `decode` batched decode steps fed
// with one process's greedy ids.
Script make_script(Model& single, int long_prompt, int decode, const KernelOps& ops, Kv kv) {
  const int64_t V = single.config().vocab_size;
  const auto p0 = tokens(V, 23, 1), p1 = tokens(V, long_prompt, 2);
  Script s = {{std::vector<int32_t>(p0.begin(), p0.begin() + 10), {}},
              {std::vector<int32_t>(p0.begin() + 10, p0.end()), p1}};
  testing::ModelHarness h(single, 2, 160, 8, kv.dtype, kv.ds_mla);
  std::vector<float> logits = h.step({0}, {s[0][0]}, ops);
  logits = h.step({0, 1}, {s[1][0], s[1][1]}, ops);
  for (int i = 0; i < decode; ++i) {
    const int32_t a = testing::argmax(logits.data(), V), b = testing::argmax(logits.data() + V, V);
    s.push_back({{a}, {b}});
    logits = h.step({0, 1}, {{a}, {b}}, ops);
  }
  return s;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct RankResult {
  std::vector<std::vector<float>> logits;
  std::vector<LinearInfo> linears;
  int64_t weight_bytes = 0;
  std::string error;
};

// Loads the model on `tp` ranks (threads of a local group) and runs the script on each.
std::vector<RankResult> run_ranks(const ModelConfig& c, int tp, bool expert_parallel,
                                  const Script& script, const KernelOps& ops, Kv kv = {}) {
  auto group = make_local_group(tp);
  std::vector<RankResult> out(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r)
    threads.emplace_back([&, r] {
      ThreadPool pool(1);
      ModelParallel par;
      par.tp_size = tp;
      par.tp_rank = r;
      par.tp = group[r].get();
      par.expert_parallel = expert_parallel;
      auto m = build(c, pool, par);
      if (!m.ok()) {
        out[r].error = m.status().to_string();
        return;
      }
      out[r].logits = run_script(**m, script, ops, kv);
      out[r].linears = (*m)->linear_layers();
      out[r].weight_bytes = (*m)->weight_bytes_total();
    });
  for (auto& t : threads) t.join();
  return out;
}

void expect_identical(const ModelConfig& c, int tp, int long_prompt, int decode,
                      const KernelOps& ops, Kv kv);

// One process and `tp` ranks, with and without expert parallelism: the same logits, bit for bit,
// with every kernel table (the reference one computes the MLA attention in double precision).
void expect_identical(const ModelConfig& c, int tp, int long_prompt, int decode, Kv kv = {}) {
  for (const KernelVariantInfo* v : supported_kernel_variants(/*with_reference=*/true)) {
    SCOPED_TRACE(v->name);
    expect_identical(c, tp, long_prompt, decode, v->ops(), kv);
  }
}

void expect_identical(const ModelConfig& c, int tp, int long_prompt, int decode,
                      const KernelOps& ops, Kv kv) {
  ThreadPool pool(2);
  auto single = build(c, pool, {});
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  const Script script = make_script(**single, long_prompt, decode, ops, kv);
  const auto want = run_script(**single, script, ops, kv);
  double scale = 0;
  for (float v : want.back()) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  ASSERT_GT(scale, 1e-3) << "degenerate logits";
  for (bool ep : {false, true}) {
    const auto ranks = run_ranks(c, tp, ep, script, ops, kv);
    for (int r = 0; r < tp; ++r) {
      ASSERT_EQ(ranks[r].error, "") << "rank " << r;
      ASSERT_EQ(ranks[r].logits.size(), want.size());
      for (size_t s = 0; s < want.size(); ++s)
        EXPECT_TRUE(bit_equal(ranks[r].logits[s], want[s]))
            << "tp " << tp << " ep " << ep << " rank " << r << " step " << s;
    }
  }
}

TEST(DeepseekParallel, ScaledV3Tp2LogitsAreBitIdentical) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v3/config.json");
  auto c = scaled_v3_config(4);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(c->fp8.has_value());  // the FP8 blocks are split in whole panels
  expect_identical(*c, 2, 9, 4);
}

// 4 ranks of one head each: q_b's rows of a head (24) are not whole panels (16); a 100-token
// prompt batched with another's chunk.
TEST(DeepseekParallel, TinyV3Tp4UnalignedHeadsAndLongPromptAreBitIdentical) {
  auto c = tiny_config(patched(arch("deepseek_v3_fp8").config_json,
                               R"({"num_attention_heads": 4, "num_key_value_heads": 4})"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  expect_identical(*c, 4, 100, 3);
}

// V2-Lite: one q_proj (split by heads apart from kv_a), softmax greedy routing, two shared
// experts; 3 ranks over 8 experts (3, 3, 2), one head of 24 q rows each (not whole panels),
// o_proj's 4 panels of rows split 2, 1, 1 (an uneven all-gather).
TEST(DeepseekParallel, V2LiteTp3UnevenExpertsAreBitIdentical) {
  auto c = tiny_config(patched(arch("deepseek_v2_lite").config_json,
                               R"({"num_attention_heads": 3, "vocab_size": 300})"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  expect_identical(*c, 3, 12, 3);
}

// DeepSeek-V3.2: the indexer replicated, the sparse attention over each rank's heads; contexts
// past index_topk so the selection matters; a bf16 cache and the fp8_ds_mla one.
TEST(DeepseekParallel, V32SparseAttentionTp2IsBitIdentical) {
  auto c = tiny_config(patched(arch("deepseek_v32").config_json,
                               R"({"num_attention_heads": 4, "num_key_value_heads": 4,
                                   "index_topk": 6})"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  expect_identical(*c, 2, 15, 4);
  expect_identical(*c, 2, 15, 4, {DType::kF8E4M3, true});
}

// The same MoE blocks in the Llama family (llama.cpp's attention split by the skeleton): Qwen2-MoE
// (a gated shared expert, a dense layer between) and Qwen3-MoE (top 3 of 8), 2 ranks.
TEST(DeepseekParallel, QwenMoeUnderTp2IsBitIdentical) {
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  for (const char* name : {"qwen2_moe_shared_gate", "qwen3_moe"}) {
    SCOPED_TRACE(name);
    LoadOptions o;
    o.model = testing::write_tiny_config(arch(name).config_json);
    o.load_format = "dummy";
    o.dtype = "bfloat16";
    o.seed = 42;
    o.limits = {160, 160, 8};
    ThreadPool pool(2);
    o.pool = &pool;
    auto single = load_model(o);
    ASSERT_TRUE(single.ok()) << single.status().to_string();
    const Script script = make_script(*single->model, 30, 3, ops, {});
    const auto want = run_script(*single->model, script, ops, {});
    auto group = make_local_group(2);
    std::vector<std::vector<std::vector<float>>> got(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        ThreadPool p(1);
        LoadOptions mine = o;
        mine.pool = &p;
        mine.parallel.tp_size = 2;
        mine.parallel.tp_rank = r;
        mine.parallel.tp = group[r].get();
        auto m = load_model(mine);
        if (!m.ok()) {
          errors[r] = m.status().to_string();
          return;
        }
        got[r] = run_script(*m->model, script, ops, {});
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(errors[r], "") << "rank " << r;
      ASSERT_EQ(got[r].size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(bit_equal(got[r][i], want[i])) << "rank " << r << " step " << i;
    }
  }
}

TEST(DeepseekParallel, EachRankHoldsItsShareOfExpertsAndHeads) {
  auto c = tiny_config(patched(arch("deepseek_v3_fp8").config_json,
                               R"({"num_attention_heads": 4, "num_key_value_heads": 4})"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  ThreadPool pool(1);
  auto single = build(*c, pool, {});
  ASSERT_TRUE(single.ok());
  const auto ranks = run_ranks(*c, 2, true, {}, ops);
  auto expert_bytes = [](const std::vector<LinearInfo>& ls, std::set<std::string>* names) {
    int64_t b = 0;
    for (const auto& l : ls)
      if (l.name.find(".experts.") != std::string::npos) {
        b += l.bytes;
        if (names) {
          EXPECT_TRUE(names->insert(l.name).second) << "two ranks hold " << l.name;
        }
      }
    return b;
  };
  const int64_t all = expert_bytes((*single)->linear_layers(), nullptr);
  std::set<std::string> names;
  int64_t sum = 0;
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ranks[r].error, "");
    const int64_t mine = expert_bytes(ranks[r].linears, &names);
    EXPECT_EQ(mine * 2, all) << "rank " << r << " holds half of the routed experts";
    sum += mine;
    EXPECT_LT(ranks[r].weight_bytes, (*single)->weight_bytes_total());
    // Heads: 2 of 4 per rank, numbered globally; o_proj's rows halved.
    std::map<std::string, LinearInfo> by_name;
    for (const auto& l : ranks[r].linears) by_name[l.name] = l;
    for (int h = 0; h < 4; ++h)
      EXPECT_EQ(by_name.count("layers.0.attn.uk_t." + std::to_string(h)), h / 2 == r ? 1u : 0u)
          << "rank " << r << " head " << h;
    EXPECT_EQ(by_name["layers.0.attn.o"].rows, c->hidden_size / 2);
    EXPECT_EQ(by_name["layers.0.attn.o"].cols, 4 * 16);
    // The shared expert (32 rows of gate and up) split by rows too.
    EXPECT_EQ(by_name["layers.1.moe.shared.gate"].rows, 16);
    EXPECT_EQ(by_name["layers.1.moe.shared.up"].rows, 16);
    EXPECT_EQ(by_name["layers.1.moe.shared.down"].rows, c->hidden_size / 2);
  }
  EXPECT_EQ(sum, all);
  EXPECT_EQ(static_cast<int64_t>(names.size()),
            2 * 16 * 2);  // 2 MoE layers x 16 experts x (gate_up, down), each on one rank
}

// The per-rank plans (memory_estimate.h) hold what each rank loads: the attention's and the MoE
// block's weight bytes, and the model's workspace with the all-gathers' scratch.
// V3 (q_lora, FP8) and V2-Lite (q_proj split apart from kv_a).
class DeepseekParallelPlan : public ::testing::TestWithParam<const char*> {};

TEST_P(DeepseekParallelPlan, PlansMatchEachRanksShard) {
  auto c = tiny_config(
      patched(arch(GetParam()).config_json, R"({"num_attention_heads": 4, "vocab_size": 300})"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto mla = parse_mla_spec(*c);
  auto moe = parse_moe_spec(*c);
  ASSERT_TRUE(mla.ok() && moe.ok() && moe->has_value());
  const int tp = 4;
  auto group = make_local_group(tp);
  std::vector<std::thread> threads;
  std::vector<std::string> failures(tp);
  for (int r = 0; r < tp; ++r)
    threads.emplace_back([&, r] {
      std::ostringstream fail;
      ThreadPool pool(1);
      ModelParallel par;
      par.tp_size = tp;
      par.tp_rank = r;
      par.tp = group[r].get();
      auto src = make_dummy_source(3, DType::kBF16, 0.05);
      auto a = MlaAttention::load(*src, *c, *mla, 0, DType::kBF16, par);
      WeightBytesByClass pa;
      Status st = MlaAttention::plan(*src, *c, *mla, 0, DType::kBF16, &pa, par);
      if (!a.ok() || !st.ok()) {
        failures[r] = "MLA load or plan failed";
        return;
      }
      if (pa.attention != a->bytes() || pa.other != a->vector_bytes())
        fail << "MLA plan " << pa.attention << " + " << pa.other << ", loaded " << a->bytes()
             << " + " << a->vector_bytes() << "; ";
      if (a->local_heads() != 1 || a->head_begin() != r) fail << "heads; ";
      auto b = MoeBlock::load(*src, **moe, *c, 1, DType::kBF16, par);
      WeightBytesByClass pb;
      st = MoeBlock::plan(*src, **moe, *c, 1, DType::kBF16, &pb, par);
      if (!b.ok() || !st.ok()) {
        failures[r] = "MoE load or plan failed";
        return;
      }
      if (pb.total() != b->bytes_total())
        fail << "MoE plan " << pb.total() << ", loaded " << b->bytes_total() << "; ";
      // The whole model's workspace, all-gather scratch included.
      ModelBuildOptions o;
      o.storage = DType::kBF16;
      o.keep_in_place = false;
      o.limits = {160, 160, 8};
      o.pool = &pool;
      o.parallel = par;
      auto m = create_deepseek_model(*c, make_dummy_source(42, DType::kBF16, 0.02), o);
      auto dummy = make_dummy_source(42, DType::kBF16, 0.02);
      auto est = estimate_deepseek_model(*c, *dummy, o, pool.size());
      if (!m.ok() || !est.ok()) {
        failures[r] = "model load or estimate failed";
        return;
      }
      if (est->workspace_bytes != (*m)->workspace_bytes())
        fail << "workspace estimate " << est->workspace_bytes << ", loaded "
             << (*m)->workspace_bytes() << "; ";
      failures[r] = fail.str();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < tp; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Archs, DeepseekParallelPlan,
                         ::testing::Values("deepseek_v3_fp8", "deepseek_v2_lite"));

// Rows read per tensor, by whole-tensor get() and by get_rows().
class RowCountingSource final : public WeightSource {
 public:
  explicit RowCountingSource(std::unique_ptr<WeightSource> in) : in_(std::move(in)) {}
  TensorNaming naming() const override { return in_->naming(); }
  std::string describe() const override { return in_->describe(); }
  bool has(const std::string& n) const override { return in_->has(n); }
  Result<io::TensorRef> get(const std::string& n, const std::vector<int64_t>& shape,
                            DummyInit init) override {
    rows[n] += shape[0];
    return in_->get(n, shape, init);
  }
  Result<io::TensorRef> get_rows(const std::string& n, const std::vector<int64_t>& shape,
                                 int64_t begin, int64_t end, DummyInit init) override {
    rows[n] += end - begin;
    return in_->get_rows(n, shape, begin, end, init);
  }
  std::map<std::string, int64_t> rows;

 private:
  std::unique_ptr<WeightSource> in_;
};

// Float weights: a rank reads only its heads' rows of q_b_proj (q_proj without q_lora) and its
// rows of o_proj, only its experts, and its rows of the shared experts. (FP8 blocks span rows:
// those ranks read the whole tensor and keep the panels covering their rows.)
TEST(DeepseekParallel, RanksReadOnlyTheirRowsOfFloatWeights) {
  for (const char* name : {"deepseek_v32", "deepseek_v2_lite"}) {
    SCOPED_TRACE(name);
    auto c = tiny_config(patched(arch(name).config_json, R"({"num_attention_heads": 4})"));
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    auto mla = parse_mla_spec(*c);
    auto moe = parse_moe_spec(*c);
    ASSERT_TRUE(mla.ok() && moe.ok() && moe->has_value());
    const bool q_lora = mla->q_lora_rank > 0;
    const std::string q_name = q_lora ? "model.layers.0.self_attn.q_b_proj.weight"
                                      : "model.layers.0.self_attn.q_proj.weight";
    auto group = make_local_group(2);
    std::vector<std::map<std::string, int64_t>> rows(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        ModelParallel par;
        par.tp_size = 2;
        par.tp_rank = r;
        par.tp = group[r].get();
        RowCountingSource src(make_dummy_source(5, DType::kBF16, 0.05));
        auto a = MlaAttention::load(src, *c, *mla, 0, DType::kBF16, par);
        auto b = MoeBlock::load(src, **moe, *c, 1, DType::kBF16, par);
        if (!a.ok() || !b.ok()) errors[r] = "load failed";
        rows[r] = src.rows;
      });
    for (auto& t : threads) t.join();
    const int64_t H = c->hidden_size, E = (*moe)->routing.num_experts;
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(errors[r], "");
      EXPECT_EQ(rows[r][q_name], 2 * mla->qk_dim()) << "rank " << r;
      EXPECT_EQ(rows[r]["model.layers.0.self_attn.o_proj.weight"], H / 2) << "rank " << r;
      const int64_t shared = (*moe)->shared_ffn;
      EXPECT_EQ(rows[r]["model.layers.1.mlp.shared_experts.gate_proj.weight"], shared / 2);
      EXPECT_EQ(rows[r]["model.layers.1.mlp.shared_experts.down_proj.weight"], H / 2);
      for (int64_t e = 0; e < E; ++e)
        EXPECT_EQ(
            rows[r].count("model.layers.1.mlp.experts." + std::to_string(e) + ".down_proj.weight"),
            e / (E / 2) == r ? 1u : 0u)
            << "rank " << r << " expert " << e;
    }
  }
}

// A rank's group whose collective number `fail_at` fails (as when a peer dies) and the later ones
// work: every rank's wrapper fails the same call, so the ranks stay in step, and a call site that
// dropped the error would go on to return logits.
class FailingComm final : public Comm {
 public:
  FailingComm(Comm& in, int fail_at) : in_(in), fail_at_(fail_at) {}
  int rank() const override { return in_.rank(); }
  int size() const override { return in_.size(); }
  std::string describe_rank(int r) const override { return in_.describe_rank(r); }
  Status all_gather(const void* send, size_t bytes, void* recv) override {
    if (++calls_ == fail_at_) return unavailable("injected: rank 1 is gone");
    return in_.all_gather(send, bytes, recv);
  }
  Status broadcast(void* data, size_t bytes, int root) override {
    if (++calls_ == fail_at_) return unavailable("injected: rank 1 is gone");
    return in_.broadcast(data, bytes, root);
  }
  Status barrier() override { return in_.barrier(); }
  Status send(int dst, const void* data, size_t bytes) override {
    return in_.send(dst, data, bytes);
  }
  Status recv(int src, void* data, size_t bytes) override { return in_.recv(src, data, bytes); }
  int calls() const { return calls_; }
  void reset(int fail_at) {
    calls_ = 0;
    fail_at_ = fail_at;
  }

 private:
  Comm& in_;
  int fail_at_;
  int calls_ = 0;
};

// A collective that fails anywhere in a forward (the embedding, MLA's gathers, the dense MLP, the
// MoE's experts and shared expert, the head) makes forward() return its error on every rank:
// no crash, no hang, no logits passed off as good.
TEST(DeepseekParallel, AFailedCollectiveAnywhereIsForwardsError) {
  auto c = tiny_config(patched(arch("deepseek_v32").config_json,
                               R"({"num_attention_heads": 4, "num_key_value_heads": 4})"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  auto group = make_local_group(2);
  std::vector<std::unique_ptr<FailingComm>> comms;
  for (int r = 0; r < 2; ++r)
    comms.push_back(std::make_unique<FailingComm>(*group[r], std::numeric_limits<int>::max()));
  std::vector<std::unique_ptr<Model>> models(2);
  std::vector<std::unique_ptr<ThreadPool>> pools;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) pools.push_back(std::make_unique<ThreadPool>(1));
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      ModelParallel par;
      par.tp_size = 2;
      par.tp_rank = r;
      par.tp = comms[r].get();
      auto m = build(*c, *pools[r], par);
      if (m.ok()) models[r] = std::move(m).value();
    });
  for (auto& t : threads) t.join();
  ASSERT_TRUE(models[0] && models[1]);
  // Each rank runs one prefill step with its group failing at collective `fail_at`.
  const std::vector<int32_t> prompt = tokens(c->vocab_size, 11, 4);
  auto step = [&](int fail_at) {
    std::vector<Status> out(2);
    threads.clear();
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        comms[r]->reset(fail_at);
        testing::ModelHarness h(*models[r], 1, 64, 8, DType::kBF16);
        std::vector<float> logits;
        out[r] = h.try_step({0}, {prompt}, ops, &logits);
      });
    for (auto& t : threads) t.join();
    return out;
  };
  const std::vector<Status> good = step(std::numeric_limits<int>::max());
  ASSERT_TRUE(good[0].ok() && good[1].ok()) << good[0].to_string();
  const int collectives = comms[0]->calls();
  ASSERT_GT(collectives, 2 * c->num_hidden_layers) << "a forward's gathers";
  for (int k = 1; k <= collectives; ++k) {
    const std::vector<Status> st = step(k);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(st[r].code(), StatusCode::kUnavailable) << "collective " << k << " rank " << r;
      EXPECT_NE(st[r].message().find("rank 1 is gone"), std::string::npos) << st[r].to_string();
    }
  }
}

TEST(DeepseekParallel, HeadsThatDoNotDivideAreAClearError) {
  auto c = tiny_config(arch("deepseek_v3_fp8").config_json);  // 5 heads
  ASSERT_TRUE(c.ok());
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  const auto ranks = run_ranks(*c, 2, false, {}, ops);
  for (const auto& r : ranks) {
    EXPECT_NE(r.error.find("num_attention_heads (5)"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("tensor parallel size (2)"), std::string::npos) << r.error;
  }
}

// The MoE block alone: 150 tokens on 2 and 3 ranks, in one all-gather and in chunks of at most
// 40 and 5 rows per rank, against one process's forward(), bit for bit.
TEST(DeepseekParallel, MoeBlockMatchesOneProcessBitForBit) {
  auto c = tiny_config(arch("deepseek_v3_fp8").config_json);
  ASSERT_TRUE(c.ok());
  auto spec = parse_moe_spec(*c);
  ASSERT_TRUE(spec.ok() && spec->has_value());
  const int64_t T = 150, H = c->hidden_size, layer = 1;
  std::vector<float> x(T * H);
  for (int64_t i = 0; i < T * H; ++i) x[i] = static_cast<float>(std::sin(0.61 * i + 0.3));
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  ThreadPool pool(2);
  auto src = make_dummy_source(9, DType::kF32, 0.1);
  auto one = MoeBlock::load(*src, **spec, *c, layer, DType::kBF16);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  MoeWorkspace ws;
  ws.allocate(*spec, H, c->intermediate_size, T);
  std::vector<float> want(T * H);
  ASSERT_TRUE(one->forward(x.data(), H, T, want.data(), H, ops, pool, ws).ok());
  for (const auto& tp_rows : {std::pair{2, 0}, {2, 40}, {3, 5}}) {
    const int tp = tp_rows.first, rows = tp_rows.second;  // (clang: no lambda capture of bindings)
    auto group = make_local_group(tp);
    std::vector<std::vector<float>> got(tp, std::vector<float>(T * H));
    std::vector<std::string> errors(tp);
    std::vector<int64_t> experts(tp);
    std::vector<std::thread> threads;
    for (int r = 0; r < tp; ++r)
      threads.emplace_back([&, r] {
        ThreadPool p(1);
        auto s = make_dummy_source(9, DType::kF32, 0.1);
        ModelParallel par;
        par.tp_size = tp;
        par.tp_rank = r;
        par.tp = group[r].get();
        auto b = MoeBlock::load(*s, **spec, *c, layer, DType::kBF16, par);
        if (!b.ok()) {
          errors[r] = b.status().to_string();
          return;
        }
        experts[r] = b->local_experts();
        if (rows > 0) b->set_parallel_rows(rows);
        if (rows > 0) {
          EXPECT_EQ(b->parallel_rows(), rows);
        } else {
          EXPECT_GE(b->parallel_rows(), T * 4);  // tiny hidden size: one gather
        }
        MoeWorkspace w;
        w.allocate(*spec, H, c->intermediate_size, T);
        Status st = b->forward(x.data(), H, T, got[r].data(), H, ops, p, w);
        if (!st.ok()) errors[r] = st.to_string();
      });
    for (auto& t : threads) t.join();
    int64_t total = 0;
    for (int r = 0; r < tp; ++r) {
      ASSERT_EQ(errors[r], "") << "rank " << r;
      EXPECT_TRUE(bit_equal(got[r], want)) << "tp " << tp << " rows " << rows << " rank " << r;
      EXPECT_EQ(experts[r], shard_range(16, tp, r).size());
      total += experts[r];
    }
    EXPECT_EQ(total, 16);
  }
}

}  // namespace
}  // namespace strata

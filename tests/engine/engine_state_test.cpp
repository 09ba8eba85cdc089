// The engine with a model that keeps per-sequence state (KvSpec::has_state(), hybrid paged
// blocks: the DeepSeek-V4 contract), before the real V4 model exists: a small test-only model
// whose next token depends on a state slot (a ring of the last 3 tokens, a pending sum of the
// current block, a token count) and on one "compressed row" per full block that it writes into
// its hybrid paged blocks (PagedKvLayer::raw) when the block completes. So a wrong slot, a missing
// or wrong restore, a snapshot of the wrong boundary, or a block that was not written or was
// shared wrongly all change the tokens, and a slot that does not hold exactly the sequence's
// computed prefix fails the step.
//
// Runs the real Engine and Scheduler, the step input through its binary encoding, the real
// ModelRunner over a hybrid KvStorage, with an executor standing in for the Worker (the test
// model is not in the loader's registry); greedy tokens are compared with a plain reference
// written over the whole token sequence.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "core/check.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/memory_plan.h"
#include "engine/model_runner.h"
#include "kernels/backend.h"
#include "kv/kv_storage.h"

namespace strata {
namespace {

constexpr int64_t kWindow = 3;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The token after `tokens`, written from the description (no slots, no blocks): the compressed
// row of each full block, the pending sum of the partial block, the last kWindow tokens.
int32_t reference_next(std::span<const int32_t> tokens, int64_t block_size, int64_t vocab) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  uint64_t value = 0, pending = 0;
  for (int64_t p = 0; p < n; ++p) {
    pending += static_cast<uint64_t>(tokens[p]) * static_cast<uint64_t>(p % block_size + 1);
    if ((p + 1) % block_size == 0) {
      value += pending * static_cast<uint64_t>((p + 1) / block_size);  // row b times (b + 1)
      pending = 0;
    }
  }
  value = value * 31 + pending * 7;
  for (int64_t k = 0; k < kWindow; ++k) {
    // The ring slot k holds the token at the last position p < n with p % kWindow == k.
    int64_t p = n - 1 - ((n - 1 - k) % kWindow + kWindow) % kWindow;
    const uint64_t t = p >= 0 ? static_cast<uint64_t>(tokens[p]) : 0;
    value = value * 1000003 + t;
  }
  return static_cast<int32_t>(mix(value ^ static_cast<uint64_t>(n)) % static_cast<uint64_t>(vocab));
}

class StatefulTestModel final : public Model {
 public:
  struct State {
    int64_t count = 0;  // tokens seen
    uint64_t pending = 0;
    int32_t window[kWindow] = {0, 0, 0};
    int32_t pad = 0;
  };

  explicit StatefulTestModel(ModelConfig c) : Model(std::move(c)) {}

  KvSpec kv_spec() const override {
    KvSpec s;
    s.num_layers = 2;
    // Layer 0 pages one 8-byte compressed row per block; layer 1 pages nothing (window only).
    s.layer_block_bytes = [](int64_t layer, int64_t, DType) -> int64_t {
      return layer == 0 ? 8 : 0;
    };
    s.block_size_multiple = 4;
    s.state_bytes_per_slot = [](DType) -> int64_t { return sizeof(State); };
    s.describe = [](DType, int64_t block_size, int64_t context_len) {
      return "test: one 8-byte row per " + std::to_string(block_size) + " tokens, " +
             std::to_string(sizeof(State)) + " bytes of state per sequence (" +
             std::to_string(context_len) + " tokens of context)";
    };
    return s;
  }

  Status allocate_state(int64_t num_slots, DType, DeviceAllocator*) override {
    states_.assign(static_cast<size_t>(num_slots), State{});
    return ok_status();
  }

  Status forward(const ForwardBatch& b, std::span<const PagedKvLayer> kv, const KernelOps&,
                 float* logits) override {
    if (kv.size() != 2 || kv[0].raw == nullptr || kv[0].raw_block_bytes != 8 ||
        kv[1].raw != nullptr)
      return internal_error("the hybrid layers were not filled in");
    if (static_cast<int>(b.state_slots.size()) != b.num_seqs())
      return internal_error("no state slot per sequence");
    const int64_t bs = kv[0].block_size;
    for (const auto& c : b.state_restores) state(c.dst_slot) = state(c.src_slot);
    ++restores_seen_;
    restores_ += static_cast<int64_t>(b.state_restores.size());
    snapshots_ += static_cast<int64_t>(b.state_snapshots.size());
    values_.assign(b.token_ids.size(), 0);
    auto row_of = [&](int32_t block) -> uint64_t* {
      return reinterpret_cast<uint64_t*>(kv[0].raw + block * kv[0].raw_block_bytes);
    };
    for (int i = 0; i < b.num_seqs(); ++i) {
      State& st = state(b.state_slots[i]);
      const int32_t q0 = b.query_start[i], q1 = b.query_start[i + 1];
      const int32_t* table = b.block_tables.data() + i * b.max_blocks_per_seq;
      if (b.positions[q0] == 0) {
        st = State{};
      } else if (st.count != b.positions[q0]) {
        return internal_error("sequence " + std::to_string(i) + " at position " +
                              std::to_string(b.positions[q0]) + " finds slot " +
                              std::to_string(b.state_slots[i]) + " holding " +
                              std::to_string(st.count) + " tokens");
      }
      for (int32_t t = q0; t < q1; ++t) {
        const int64_t p = b.positions[t];
        st.pending += static_cast<uint64_t>(b.token_ids[t]) * static_cast<uint64_t>(p % bs + 1);
        st.window[p % kWindow] = b.token_ids[t];
        st.count = p + 1;
        if ((p + 1) % bs == 0) {  // the block is complete: its compressed row goes to the page
          *row_of(table[p / bs]) = st.pending;
          st.pending = 0;
        }
        for (const auto& sn : b.state_snapshots)
          if (sn.seq == i && sn.boundary == p + 1) state(sn.dst_slot) = st;
        // The value the logits encode: every full block's row (read back from the pages).
        uint64_t value = 0;
        for (int64_t blk = 0; blk < (p + 1) / bs; ++blk)
          value += *row_of(table[blk]) * static_cast<uint64_t>(blk + 1);
        value = value * 31 + st.pending * 7;
        for (int64_t k = 0; k < kWindow; ++k)
          value = value * 1000003 + static_cast<uint64_t>(st.window[k]);
        values_[static_cast<size_t>(t)] = mix(value ^ static_cast<uint64_t>(p + 1));
      }
    }
    return compute_logits(b.logits_rows, {}, logits);
  }

  Status compute_logits(std::span<const int32_t> rows, const KernelOps&, float* logits) override {
    const int64_t V = config_.vocab_size;
    for (size_t r = 0; r < rows.size(); ++r) {
      float* row = logits + r * V;
      std::fill(row, row + V, 0.0f);
      row[values_[static_cast<size_t>(rows[r])] % static_cast<uint64_t>(V)] = 1.0f;
    }
    return ok_status();
  }

  int64_t weight_bytes_per_token() const override { return 0; }
  double forward_flops(int64_t, int64_t, int64_t) const override { return 0; }
  int64_t weight_bytes_total() const override { return 0; }
  int64_t parameter_count() const override { return 0; }
  int64_t workspace_bytes() const override { return 0; }
  DType weight_dtype() const override { return DType::kF32; }
  std::vector<LinearInfo> linear_layers() const override { return {}; }

  int64_t restores() const { return restores_; }
  int64_t snapshots() const { return snapshots_; }

 private:
  State& state(int32_t slot) {
    STRATA_CHECK(slot >= 0 && slot < static_cast<int32_t>(states_.size())) << "slot " << slot;
    return states_[static_cast<size_t>(slot)];
  }
  std::vector<State> states_;
  std::vector<uint64_t> values_;
  int64_t restores_ = 0, snapshots_ = 0, restores_seen_ = 0;
};

// The Worker's part for the test model: the memory plan (hybrid block bytes, state slots), a
// hybrid KvStorage, the model runner, greedy sampling; the step input goes through its encoding.
class StatefulExecutor final : public engine::Executor {
 public:
  static Result<std::unique_ptr<engine::Executor>> create(const engine::WorkerConfig& wc,
                                                          int64_t kv_bytes,
                                                          StatefulTestModel** model_out) {
    std::unique_ptr<StatefulExecutor> e(new StatefulExecutor());
    STRATA_ASSIGN_OR_RETURN(ModelConfig mc, load_model_config(wc.engine.model));
    e->model_ = std::make_unique<StatefulTestModel>(mc);
    *model_out = e->model_.get();
    const KvSpec ks = e->model_->kv_spec();
    const auto& c = wc.engine;
    engine::MemoryPlanInputs mi;
    mi.device_memory_bytes = int64_t{1} << 30;
    mi.kv_cache_memory_bytes = kv_bytes;
    STRATA_ASSIGN_OR_RETURN(mi.block_size,
                            engine::resolve_block_size(c.cache.block_size, c.cache.block_size_given,
                                                       ks.block_size_multiple, ks.hybrid(), false));
    mi.kv_block_bytes = engine::hybrid_block_bytes(ks, mi.block_size, DType::kF32);
    mi.state_bytes_per_slot = ks.state_bytes_per_slot(DType::kF32);
    mi.num_running_state_slots = c.scheduler.max_num_seqs;
    mi.num_snapshot_state_slots =
        engine::num_snapshot_state_slots(c.scheduler.max_num_seqs, c.cache.enable_prefix_caching);
    mi.max_model_len = c.scheduler.max_model_len;
    mi.max_num_batched_tokens = c.scheduler.max_num_batched_tokens;
    STRATA_ASSIGN_OR_RETURN(e->info_.memory, engine::plan_memory(mi));
    const engine::MemoryPlan& plan = e->info_.memory;
    KvStorageSpec spec;
    spec.num_layers = ks.num_layers;
    spec.num_blocks = plan.num_blocks + 1;
    spec.block_size = plan.block_size;
    for (int64_t l = 0; l < ks.num_layers; ++l)
      spec.layer_block_bytes.push_back(ks.layer_block_bytes(l, plan.block_size, DType::kF32));
    STRATA_ASSIGN_OR_RETURN(e->storage_, KvStorage::allocate(spec));
    STRATA_RETURN_IF_ERROR(e->model_->allocate_state(plan.num_state_slots, DType::kF32, nullptr));
    STRATA_ASSIGN_OR_RETURN(e->backend_, CpuBackend::create({.threads = 1}));
    e->runner_ = std::make_unique<engine::ModelRunner>(*e->model_, e->storage_, e->backend_->ops());
    e->info_.backend = "test";
    e->info_.threads = 1;
    e->info_.kv_dtype = DType::kF32;
    return std::unique_ptr<engine::Executor>(std::move(e));
  }

  const engine::WorkerInfo& info() const override { return info_; }
  Status execute(const engine::StepInput& input_in, engine::StepOutput* out) override {
    STRATA_ASSIGN_OR_RETURN(const engine::StepInput input,
                            engine::decode_step_input(engine::encode_step_input(input_in)));
    const sched::StepPlan& plan = input.plan;
    const int64_t V = model_->config().vocab_size;
    logits_.resize(static_cast<size_t>(std::max<size_t>(plan.scheduled.size(), 1) * V));
    STRATA_RETURN_IF_ERROR(runner_->execute(plan, logits_.data()));
    out->entries.assign(plan.scheduled.size(), {});
    for (auto& e : out->entries) e.token_id = sched::kNoToken;
    const auto& index = runner_->sample_plan_index();
    for (size_t r = 0; r < index.size(); ++r) {
      const float* row = logits_.data() + r * V;
      out->entries[static_cast<size_t>(index[r])].token_id =
          static_cast<int32_t>(std::max_element(row, row + V) - row);
    }
    return ok_status();
  }

 private:
  StatefulExecutor() = default;
  engine::WorkerInfo info_;
  std::unique_ptr<StatefulTestModel> model_;
  KvStorage storage_;
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<engine::ModelRunner> runner_;
  std::vector<float> logits_;
};

constexpr const char* kConfig =
    R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
        "intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,
        "num_key_value_heads":2,"vocab_size":300,"max_position_embeddings":256})";

struct RunResult {
  std::map<std::string, std::vector<int32_t>> tokens;
  sched::SchedulerStats stats;
  int64_t model_restores = 0, model_snapshots = 0;
  engine::MemoryPlan plan;
};

std::vector<int32_t> reference_generate(std::vector<int32_t> t, int n, int64_t bs) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(reference_next(t, bs, 300));
    t.push_back(out.back());
  }
  return out;
}

// Runs `waves` of requests on one engine (each wave submitted together, run to the end).
RunResult run(const engine::EngineConfig& cfg, int64_t kv_bytes,
              const std::vector<std::vector<std::pair<std::string, std::vector<int32_t>>>>& waves,
              int max_tokens) {
  RunResult out;
  StatefulTestModel* model = nullptr;
  auto engine = engine::Engine::create(
      cfg, [&](const engine::WorkerConfig& wc) -> Result<std::unique_ptr<engine::Executor>> {
        return StatefulExecutor::create(wc, kv_bytes, &model);
      });
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return out;
  engine::Engine& e = **engine;
  out.plan = e.memory_plan();
  for (const auto& wave : waves) {
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    for (const auto& [id, prompt] : wave) {
      auto stream = std::make_shared<engine::RequestStream>(id, 1);
      const Status s = e.add_request(testing::greedy_request(id, prompt, max_tokens), stream);
      EXPECT_TRUE(s.ok()) << s.to_string();
      streams.push_back(stream);
    }
    for (int i = 0; i < 10000 && e.has_unfinished_requests(); ++i) {
      const Status s = e.step();
      EXPECT_TRUE(s.ok()) << s.to_string();
      if (!s.ok()) return out;
    }
    for (auto& s : streams) out.tokens[s->request_id()] = testing::collect(*s)[0].tokens;
  }
  out.stats = e.scheduler().stats();
  out.model_restores = model->restores();
  out.model_snapshots = model->snapshots();
  return out;
}

// A shared 21-token "system prompt" with different tails, and unrelated prompts.
std::vector<std::vector<std::pair<std::string, std::vector<int32_t>>>> workload() {
  std::vector<int32_t> system;
  for (int k = 0; k < 21; ++k) system.push_back(static_cast<int32_t>((k * 37 + 5) % 300));
  std::vector<std::vector<std::pair<std::string, std::vector<int32_t>>>> waves(2);
  for (int w = 0; w < 2; ++w)
    for (int i = 0; i < 5; ++i) {
      std::vector<int32_t> p = system;
      if (i == 4) p.assign(system.begin(), system.begin() + 9);  // a shorter shared prefix
      for (int k = 0; k < 3 + 4 * i + w; ++k)
        p.push_back(static_cast<int32_t>((k * 13 + i * 71 + w * 5 + 1) % 300));
      waves[static_cast<size_t>(w)].push_back(
          {"w" + std::to_string(w) + "r" + std::to_string(i), p});
    }
  waves[1].push_back({"w1same", waves[0][2].second});  // the whole prompt cached
  return waves;
}

engine::EngineConfig config(bool prefix_caching, int64_t budget, int64_t max_model_len = 128) {
  auto c = testing::engine_config(testing::write_config_dir(kConfig), "dummy", 0);
  c.scheduler.max_model_len = max_model_len;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.max_num_seqs = 4;
  c.cache.block_size = 4;
  c.cache.block_size_given = true;
  c.cache.enable_prefix_caching = prefix_caching;
  return c;
}

void expect_reference(const RunResult& r, int max_tokens, int64_t bs) {
  const auto waves = workload();
  for (const auto& wave : waves)
    for (const auto& [id, prompt] : wave) {
      ASSERT_TRUE(r.tokens.count(id)) << id;
      EXPECT_EQ(r.tokens.at(id), reference_generate(prompt, max_tokens, bs)) << id;
    }
}

// Blocks of 8 bytes and 32-byte state slots: the memory plan's figures.
int64_t kv_bytes_for(int64_t blocks, int64_t slots) {
  return blocks * 8 + slots * static_cast<int64_t>(sizeof(StatefulTestModel::State));
}

TEST(EngineStateTest, ReferenceIsSelfConsistent) {
  // The reference's window ring agrees with a direct "last three tokens" reading.
  const std::vector<int32_t> t = {5, 9, 2, 7};
  const std::vector<int32_t> swapped = {5, 9, 7, 2}, first = {6, 9, 2, 7};
  EXPECT_NE(reference_next(t, 4, 300), reference_next(swapped, 4, 300));
  EXPECT_NE(reference_next(t, 4, 300), reference_next(first, 4, 300))
      << "the first block's row must count";
}

TEST(EngineStateTest, AloneWithoutPrefixCachingMatchesTheReference) {
  const RunResult r = run(config(false, 64), kv_bytes_for(200, 4), workload(), 10);
  expect_reference(r, 10, 4);
  EXPECT_EQ(r.stats.state.restores, 0);
  EXPECT_EQ(r.model_snapshots, 0);
  EXPECT_EQ(r.plan.num_state_slots, 4);
  EXPECT_EQ(r.plan.num_snapshot_slots, 0);
}

TEST(EngineStateTest, PrefixHitsResumeFromSnapshotsAndMatchTheReference) {
  // 8-token chunks, a pool of 68 blocks (and room for 4 snapshots: the memory plan gives them at
  // most a quarter of what one max_model_len sequence leaves): the second wave hits the first's
  // cached blocks.
  const RunResult r = run(config(true, 8), kv_bytes_for(68, 8), workload(), 10);
  expect_reference(r, 10, 4);
  EXPECT_GT(r.stats.state.restores, 3);
  EXPECT_EQ(r.model_restores, r.stats.state.restores);
  EXPECT_GT(r.model_snapshots, 10);
  EXPECT_GT(r.stats.prefix_cache.hits, 40);
  EXPECT_EQ(r.plan.num_state_slots, 8);
  EXPECT_EQ(r.plan.num_snapshot_slots, 4);
  EXPECT_EQ(r.plan.num_blocks, 68);
}

TEST(EngineStateTest, TinyPoolPreemptsAndStillMatchesTheReference) {
  // 16 blocks of 4 tokens for 4 running sequences of up to 40 tokens: preemption by recompute,
  // a single snapshot slot per running one, hits cut back to what is kept.
  const RunResult r = run(config(true, 16, 64), kv_bytes_for(16, 8), workload(), 10);
  expect_reference(r, 10, 4);
  EXPECT_GT(r.stats.num_preemptions, 0);
  EXPECT_EQ(r.stats.state.running_in_use, 0);
}

TEST(EngineStateTest, BlockSizeMustBeAMultipleOfTheLayouts) {
  auto c = config(true, 64);
  c.cache.block_size = 2;
  StatefulTestModel* model = nullptr;
  auto e = engine::Engine::create(
      c, [&](const engine::WorkerConfig& wc) -> Result<std::unique_ptr<engine::Executor>> {
        return StatefulExecutor::create(wc, kv_bytes_for(40, 8), &model);
      });
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("multiple of 4"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace strata

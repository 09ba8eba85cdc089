// The executor and backend seams (DESIGN.md section 8): executors other than the in-process one
// are added without touching the scheduler, backends without touching model files, and the step
// input and output cross a process boundary as bytes. Each test runs the same requests through
// the engine with the default executor and with another one, and requires identical results.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/engine.h"
#include "engine/executor.h"
#include "engine/step_io.h"
#include "engine_test_util.h"
#include "kernels/backend.h"
#include "kernels/op_profile.h"

namespace strata {
namespace {

using engine::Executor;
using engine::StepInput;
using engine::StepOutput;
using engine::Worker;
using engine::WorkerConfig;
using engine::WorkerInfo;

// Runs each step on two workers, each given the plan entries of the requests it owns. A request
// sticks to the worker it was first sent to (alternating), with its n > 1 siblings (ids
// "<seq>/<i>"), which share its prompt's KV blocks; finished and preempted ids go to both. Each
// worker has its own KV pool, so a block computed on one is not on the other: the tests run
// it with prefix caching off (a request reusing another's cached blocks would read blocks its
// worker never wrote). Tensor-parallel workers, by contrast, each hold a shard of every block.
class TwoWorkerExecutor final : public Executor {
 public:
  static Result<std::unique_ptr<Executor>> create(const WorkerConfig& config) {
    std::unique_ptr<TwoWorkerExecutor> e(new TwoWorkerExecutor());
    for (auto& w : e->workers_) {
      STRATA_ASSIGN_OR_RETURN(w, Worker::create(config));
    }
    return std::unique_ptr<Executor>(std::move(e));
  }
  const WorkerInfo& info() const override { return workers_[0]->info(); }

  Status execute(const StepInput& input, StepOutput* output) override {
    const sched::StepPlan& plan = input.plan;
    for (const auto& n : input.new_requests) {
      if (owner_.count(n.request_id)) continue;
      const std::string group = n.request_id.substr(0, n.request_id.find('/'));
      auto g = group_owner_.find(group);
      if (g == group_owner_.end()) g = group_owner_.emplace(group, next_++ % 2).first;
      owner_[n.request_id] = g->second;
    }
    StepInput sub[2];
    std::vector<size_t> index[2];  // sub entry -> entry of the whole plan
    for (int w = 0; w < 2; ++w) {
      sub[w].plan.step = plan.step;
      sub[w].plan.finished_ids = plan.finished_ids;
      sub[w].plan.preempted_ids = plan.preempted_ids;
    }
    for (const auto& n : input.new_requests) sub[owner_.at(n.request_id)].new_requests.push_back(n);
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      const sched::ScheduledRequest& s = plan.scheduled[i];
      auto it = owner_.find(s.request_id);
      if (it == owner_.end()) return internal_error("unknown request " + s.request_id);
      sched::StepPlan& p = sub[it->second].plan;
      sched::ScheduledRequest c = s;
      auto tokens = plan.token_ids_of(s);
      auto blocks = plan.block_ids_of(s);
      c.token_ids_offset = static_cast<uint32_t>(p.token_ids.size());
      p.token_ids.insert(p.token_ids.end(), tokens.begin(), tokens.end());
      c.block_ids_offset = static_cast<uint32_t>(p.block_ids.size());
      p.block_ids.insert(p.block_ids.end(), blocks.begin(), blocks.end());
      p.total_num_scheduled_tokens += s.num_scheduled_tokens;
      p.scheduled.push_back(c);
      index[it->second].push_back(i);
    }
    output->entries.assign(plan.scheduled.size(), {});
    for (int w = 0; w < 2; ++w) {
      if (sub[w].plan.scheduled.empty() && sub[w].new_requests.empty() &&
          sub[w].plan.finished_ids.empty() && sub[w].plan.preempted_ids.empty())
        continue;
      StepOutput out;
      STRATA_RETURN_IF_ERROR(workers_[w]->execute(sub[w], &out));
      entries_run_[w] += static_cast<int64_t>(sub[w].plan.scheduled.size());
      for (size_t k = 0; k < index[w].size(); ++k) output->entries[index[w][k]] = out.entries[k];
    }
    for (const auto& id : plan.finished_ids) owner_.erase(id);
    return ok_status();
  }

  static inline int64_t entries_run_[2] = {0, 0};

 private:
  std::unique_ptr<Worker> workers_[2];
  std::map<std::string, int> owner_, group_owner_;
  int next_ = 0;
};

// Sends every step through the byte encoding both ways, as a multi-process executor does.
class SerializingExecutor final : public Executor {
 public:
  static Result<std::unique_ptr<Executor>> create(const WorkerConfig& config) {
    std::unique_ptr<SerializingExecutor> e(new SerializingExecutor());
    STRATA_ASSIGN_OR_RETURN(e->worker_, Worker::create(config));
    return std::unique_ptr<Executor>(std::move(e));
  }
  const WorkerInfo& info() const override { return worker_->info(); }
  Status execute(const StepInput& input, StepOutput* output) override {
    const std::string in_bytes = engine::encode_step_input(input);
    STRATA_ASSIGN_OR_RETURN(StepInput decoded, engine::decode_step_input(in_bytes));
    if (!(decoded == input)) return internal_error("step input changed in the round trip");
    StepOutput out;
    STRATA_RETURN_IF_ERROR(worker_->execute(decoded, &out));
    STRATA_ASSIGN_OR_RETURN(*output, engine::decode_step_output(engine::encode_step_output(out)));
    bytes_ += static_cast<int64_t>(in_bytes.size());
    ++steps_;
    return ok_status();
  }
  static inline int64_t bytes_ = 0, steps_ = 0;

 private:
  std::unique_ptr<Worker> worker_;
};

engine::EngineConfig tiny_config() {
  auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy", 1 << 20);
  c.scheduler.max_model_len = 512;
  // Small steps: long prompts are prefilled in chunks beside other requests' decodes.
  c.scheduler.max_num_batched_tokens = 96;
  c.scheduler.max_num_seqs = 6;
  c.seed = 11;
  return c;
}

std::vector<engine::EngineRequest> workload(bool sampled) {
  std::vector<engine::EngineRequest> out;
  for (int i = 0; i < 7; ++i) {
    std::vector<int32_t> p = {256};
    const int n = 5 + 37 * i;
    for (int k = 1; k < n; ++k) p.push_back(static_cast<int32_t>((k * 13 + i * 29) % 256));
    auto r = testing::greedy_request("r" + std::to_string(i), std::move(p), 12 + 5 * i);
    if (sampled) {
      r.params.temperature = 0.9;
      r.params.top_k = 40;
      r.params.seed = 100 + i;
      r.params.logprobs = 2;
      r.params.frequency_penalty = 0.3;
      r.params.n = i % 3 == 0 ? 2 : 1;
    }
    if (i == 2) r.params.prompt_logprobs = 1;
    out.push_back(std::move(r));
  }
  return out;
}

// All requests submitted at once; every choice's tokens, logprobs and finish reason.
int64_t last_preemptions = 0;

std::vector<testing::Completion> run(const engine::EngineConfig& config, bool sampled,
                                     engine::ExecutorFactory factory) {
  auto engine = engine::Engine::create(config, std::move(factory));
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  auto client = engine::EngineClient::start(std::move(engine).value());
  auto streams = testing::submit_together(*client, workload(sampled));
  std::vector<testing::Completion> out;
  for (auto& s : streams)
    for (auto& c : testing::collect(*s)) {
      EXPECT_TRUE(c.error.ok()) << c.error.to_string();
      out.push_back(std::move(c));
    }
  EXPECT_TRUE(testing::wait_idle(*client));
  last_preemptions = client->stats().num_preemptions;
  return out;
}

void expect_same(const std::vector<testing::Completion>& a,
                 const std::vector<testing::Completion>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_FALSE(a[i].tokens.empty()) << "choice " << i;
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "choice " << i;
    EXPECT_EQ(a[i].finish_reason, b[i].finish_reason) << "choice " << i;
    EXPECT_EQ(a[i].logprobs, b[i].logprobs) << "choice " << i;
    EXPECT_EQ(a[i].prompt_logprobs, b[i].prompt_logprobs) << "choice " << i;
  }
}

engine::EngineConfig two_worker_config() {
  auto c = tiny_config();
  c.cache.enable_prefix_caching = false;
  return c;
}

engine::ExecutorFactory two_workers() {
  return [](const WorkerConfig& c) { return TwoWorkerExecutor::create(c); };
}

TEST(ExecutorSeam, TwoWorkersOnHalvesOfTheBatchMatchOneWorkerGreedy) {
  auto one = run(two_worker_config(), false, engine::default_executor_factory());
  TwoWorkerExecutor::entries_run_[0] = TwoWorkerExecutor::entries_run_[1] = 0;
  auto two = run(two_worker_config(), false, two_workers());
  EXPECT_GT(TwoWorkerExecutor::entries_run_[0], 0);
  EXPECT_GT(TwoWorkerExecutor::entries_run_[1], 0);
  expect_same(one, two);
  // The prompt logprobs were asked for and computed.
  bool any_prompt_logprobs = false;
  for (const auto& c : one) any_prompt_logprobs |= !c.prompt_logprobs.empty();
  EXPECT_TRUE(any_prompt_logprobs);
}

TEST(ExecutorSeam, TwoWorkersMatchOneWorkerWithSeededSamplingPenaltiesAndLogprobs) {
  auto one = run(two_worker_config(), true, engine::default_executor_factory());
  auto two = run(two_worker_config(), true, two_workers());
  expect_same(one, two);
  ASSERT_FALSE(one.empty());
  EXPECT_FALSE(one[0].logprobs.empty());
}

TEST(ExecutorSeam, TwoWorkersMatchOneWorkerThroughPreemption) {
  auto c = two_worker_config();
  // A pool too small for all requests at once: some are preempted and resumed.
  int64_t bytes_per_token = 0;
  {
    auto probe = engine::Engine::create(c);
    ASSERT_TRUE(probe.ok()) << probe.status().to_string();
    bytes_per_token = (*probe)->memory_plan().kv_bytes_per_token;
  }
  c.cache.block_size = 16;
  c.cache.kv_cache_memory_bytes = 40 * 16 * bytes_per_token;
  auto one = run(c, true, engine::default_executor_factory());
  EXPECT_GT(last_preemptions, 0);
  auto two = run(c, true, two_workers());
  EXPECT_GT(last_preemptions, 0);
  expect_same(one, two);
  auto check = engine::Engine::create(c);
  ASSERT_TRUE(check.ok());
  EXPECT_EQ((*check)->memory_plan().num_blocks, 40);
}

TEST(ExecutorSeam, StepsThroughTheByteEncodingGiveIdenticalOutputs) {
  auto direct = run(tiny_config(), true, engine::default_executor_factory());
  SerializingExecutor::bytes_ = SerializingExecutor::steps_ = 0;
  auto serialized = run(tiny_config(), true,
                        [](const WorkerConfig& c) { return SerializingExecutor::create(c); });
  EXPECT_GT(SerializingExecutor::steps_, 10);
  EXPECT_GT(SerializingExecutor::bytes_, 0);
  expect_same(direct, serialized);
}

// A kernel variant registered at run time (here: the portable kernels behind the op profiler,
// which counts every call) is chosen by name and runs the model with no change to model code.
TEST(BackendSeam, ARegisteredKernelVariantRunsTheModelUnchanged) {
  static bool registered = false;
  if (!registered) {
    KernelVariantInfo v;
    v.name = "test-counting";
    v.cpu_features = "nothing";
    v.priority = -100;  // never the default
    v.ops = []() -> const KernelOps& { return profiling_ops(kernel_ops("portable")); };
    ASSERT_TRUE(register_kernel_variant(v).ok());
    registered = true;
    EXPECT_FALSE(register_kernel_variant(v).ok()) << "names are unique";
  }
  EXPECT_NE(default_kernel_variant(), "test-counting");
  auto c = tiny_config();
  c.kernels = "portable";
  auto portable = run(c, false, engine::default_executor_factory());
  reset_op_times();
  c.kernels = "test-counting";
  {
    auto engine = engine::Engine::create(c);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    EXPECT_EQ((*engine)->info().backend, "cpu:test-counting");
  }
  auto counted = run(c, false, engine::default_executor_factory());
  expect_same(portable, counted);
  int64_t matmuls = 0, attention = 0;
  for (const OpTime& t : op_times()) {
    if (std::string(t.name) == "gemm" || std::string(t.name) == "gemv") matmuls += t.calls;
    if (std::string(t.name) == "attention") attention += t.calls;
  }
  EXPECT_GT(matmuls, 0);
  EXPECT_GT(attention, 0);
}

TEST(BackendSeam, UnknownKernelVariantIsAClearError) {
  auto c = tiny_config();
  c.kernels = "avx9000";
  auto engine = engine::Engine::create(c);
  ASSERT_FALSE(engine.ok());
  const std::string msg = engine.status().message();
  EXPECT_NE(msg.find("avx9000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("portable"), std::string::npos) << "names the variants there are: " << msg;
}

TEST(StepIo, EveryTruncationOrCorruptionOfAnEncodedStepIsAnErrorNotACrash) {
  StepInput in;
  in.plan.step = 7;
  sched::ScheduledRequest s;
  s.request_id = "12/1";
  s.num_computed_tokens = 3;
  s.num_scheduled_tokens = 2;
  s.will_sample = true;
  s.block_ids_count = 1;
  in.plan.scheduled.push_back(s);
  in.plan.token_ids = {5, 6};
  in.plan.block_ids = {9};
  in.plan.total_num_scheduled_tokens = 2;
  in.plan.finished_ids = {"3"};
  engine::NewRequestData n;
  n.request_id = "12/1";
  n.prompt_token_ids = {1, 2, 3, 5, 6};
  n.params.temperature = 0.5;
  n.params.seed = 4;
  n.params.stop = {"end"};
  n.wants_prompt_logprobs = true;
  n.speculate = true;
  n.params.prompt_logprobs = 2;
  in.new_requests.push_back(n);
  const std::string bytes = engine::encode_step_input(in);
  auto back = engine::decode_step_input(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, in);
  for (size_t len = 0; len < bytes.size(); ++len)
    EXPECT_FALSE(engine::decode_step_input(bytes.substr(0, len)).ok()) << "truncated to " << len;
  EXPECT_FALSE(engine::decode_step_input(bytes + "x").ok()) << "trailing bytes";

  StepOutput out;
  out.entries.resize(2);
  out.entries[0].token_id = 42;
  out.entries[0].has_logprobs = true;
  out.entries[0].logprobs.chosen.token_id = 42;
  out.entries[0].logprobs.chosen.logprob = -0.25f;
  out.entries[0].logprobs.top.push_back(out.entries[0].logprobs.chosen);
  out.entries[1].prompt_logprobs.resize(2);
  out.entries[0].accepted_token_ids = {7, 8};
  out.entries[1].draft_token_ids = {9, 10, 11};
  out.forward_seconds = 0.125;
  out.sample_seconds = 0.0625;
  out.comm_seconds = 0.03125;
  out.kv_loads_done = {
      {3, true, kv::Tier::kRam}, {70000, true, kv::Tier::kDisk}, {5, false, kv::Tier::kNone}};
  const std::string ob = engine::encode_step_output(out);
  auto oback = engine::decode_step_output(ob);
  ASSERT_TRUE(oback.ok()) << oback.status().to_string();
  ASSERT_EQ(oback->entries.size(), 2u);
  EXPECT_EQ(oback->entries[0].token_id, 42);
  EXPECT_EQ(oback->entries[0].logprobs, out.entries[0].logprobs);
  EXPECT_EQ(oback->entries[1].prompt_logprobs.size(), 2u);
  EXPECT_EQ(oback->entries[0].accepted_token_ids, out.entries[0].accepted_token_ids);
  EXPECT_EQ(oback->entries[1].draft_token_ids, out.entries[1].draft_token_ids);
  EXPECT_EQ(oback->forward_seconds, 0.125);
  EXPECT_EQ(oback->sample_seconds, 0.0625);
  EXPECT_EQ(oback->comm_seconds, 0.03125);
  EXPECT_EQ(oback->kv_loads_done, out.kv_loads_done);
  for (size_t len = 0; len < ob.size(); ++len)
    EXPECT_FALSE(engine::decode_step_output(ob.substr(0, len)).ok()) << "truncated to " << len;
  EXPECT_FALSE(engine::decode_step_output(ob + "x").ok()) << "trailing bytes";

  // The last load's tier is the encoding's last 4 bytes (a little-endian u32): only the tiers
  // there are decode; anything else is an error.
  auto with_last_tier = [&](uint32_t tier) {
    std::string b = ob;
    for (int i = 0; i < 4; ++i) b[b.size() - 4 + i] = static_cast<char>(tier >> (8 * i));
    return engine::decode_step_output(b);
  };
  auto disk = with_last_tier(2);
  ASSERT_TRUE(disk.ok()) << disk.status().to_string();
  EXPECT_EQ(disk->kv_loads_done.back().tier, kv::Tier::kDisk);
  for (uint32_t bad : {3u, 4u, 0x100u, 0xffffffffu}) {
    auto r = with_last_tier(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("KV tier"), std::string::npos) << r.status().message();
  }

  // No loads round-trips to no loads.
  out.kv_loads_done.clear();
  auto none = engine::decode_step_output(engine::encode_step_output(out));
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_TRUE(none->kv_loads_done.empty());
}

}  // namespace
}  // namespace strata

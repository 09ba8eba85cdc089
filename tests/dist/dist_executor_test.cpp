// DistExecutor and run_worker_loop over a group of ranks that are threads of this process
// (core/comm.h's local group): the same code paths as under MPI, without processes. The model is
// replicated (tp_size 1 per rank), so every rank computes the whole step, as it will with exact
// tensor parallelism.
#include "dist/dist_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "../engine/engine_test_util.h"
#include "engine/engine.h"
#include "grammar/grammar.h"
#include "grammar/vocabulary.h"
#include "model/parallel.h"

namespace strata {
namespace {

using dist::DistExecutor;
using dist::RankReport;

engine::EngineConfig tiny_config() {
  auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy", 1 << 20);
  c.scheduler.max_model_len = 512;
  c.scheduler.max_num_batched_tokens = 96;  // long prompts in chunks beside other decodes
  c.scheduler.max_num_seqs = 6;
  c.seed = 11;
  return c;
}

std::vector<engine::EngineRequest> workload(bool sampled) {
  std::vector<engine::EngineRequest> out;
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> p = {256};
    for (int k = 1; k < 5 + 37 * i; ++k) p.push_back(static_cast<int32_t>((k * 13 + i * 29) % 256));
    std::string id = "r";
    id += std::to_string(i);
    auto r = testing::greedy_request(id, std::move(p), 10 + 4 * i);
    if (sampled) {
      r.params.temperature = 0.9;
      r.params.seed = 100 + i;
      r.params.logprobs = 2;
      r.params.n = i % 2 == 0 ? 2 : 1;
    }
    out.push_back(std::move(r));
  }
  return out;
}

// A Comm that counts what passes and can be cut: once cut() is called every call fails the way
// MpiComm's do when a peer is gone.
class WatchedComm final : public Comm {
 public:
  explicit WatchedComm(Comm* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string describe_rank(int r) const override { return inner_->describe_rank(r); }
  Status all_gather(const void* s, size_t b, void* r) override {
    STRATA_RETURN_IF_ERROR(check());
    return inner_->all_gather(s, b, r);
  }
  Status broadcast(void* d, size_t b, int root) override {
    STRATA_RETURN_IF_ERROR(check());
    return inner_->broadcast(d, b, root);
  }
  Status barrier() override {
    STRATA_RETURN_IF_ERROR(check());
    return inner_->barrier();
  }
  Status send(int dst, const void* d, size_t b) override {
    STRATA_RETURN_IF_ERROR(check());
    return inner_->send(dst, d, b);
  }
  Status recv(int src, void* d, size_t b) override {
    STRATA_RETURN_IF_ERROR(check());
    Status s = inner_->recv(src, d, b);
    if (s.ok() && b == sizeof(dist::MessageHeader)) {
      dist::MessageHeader h;
      std::memcpy(&h, d, sizeof(h));
      if (h.kind == dist::MessageKind::kHeartbeat) heartbeats++;
      if (h.kind == dist::MessageKind::kStep) steps++;
    }
    return s;
  }
  void cut() { cut_ = true; }
  std::atomic<int> heartbeats{0}, steps{0};

 private:
  Status check() const {
    if (cut_) return unavailable("rank 1 on host test did not answer within 30 s (test cut)");
    return ok_status();
  }
  Comm* inner_;
  std::atomic<bool> cut_{false};
};

RankReport report_of(engine::Worker& w) {
  RankReport r;
  r.num_blocks = w.info().memory.num_blocks;
  r.weight_bytes = w.model().weight_bytes_total();
  r.threads = w.info().threads;
  return r;
}

// Two ranks: rank 1 on a thread running its worker loop, rank 0 behind an engine.
class TwoRanks {
 public:
  explicit TwoRanks(engine::EngineConfig config, int64_t rank1_kv_bytes = 0,
                    dist::DistExecutorOptions options = {})
      : group_(make_local_group(2)), comm0_(group_[0].get()), comm1_(group_[1].get()) {
    rank1_ = std::thread([this, config, rank1_kv_bytes] {
      // A rank 1 that cannot start still takes part in the start-up exchange (with an empty
      // report), so rank 0 does not wait for it forever.
      auto bail = [&](const Status& s) {
        loop_status_ = s;
        (void)dist::exchange_reports(comm1_, RankReport{});
      };
      auto wc = engine::resolve_worker_config(config);
      if (!wc.ok()) return bail(wc.status());
      if (rank1_kv_bytes > 0) wc->engine.cache.kv_cache_memory_bytes = rank1_kv_bytes;
      auto w = engine::Worker::create(*wc);
      if (!w.ok()) return bail(w.status());
      rank1_blocks_ = (*w)->info().memory.num_blocks;
      auto reports = dist::exchange_reports(comm1_, report_of(**w));
      if (!reports.ok()) {
        loop_status_ = reports.status();
        return;
      }
      loop_status_ = dist::run_worker_loop(comm1_, **w);
      loop_done_ = true;
    });
    auto engine = engine::Engine::create(
        config,
        [this,
         options](const engine::WorkerConfig& wc) -> Result<std::unique_ptr<engine::Executor>> {
          STRATA_ASSIGN_OR_RETURN(auto w, engine::Worker::create(wc));
          STRATA_ASSIGN_OR_RETURN(auto reports, dist::exchange_reports(comm0_, report_of(*w)));
          reports_ = reports;
          STRATA_ASSIGN_OR_RETURN(
              auto e, DistExecutor::create(&comm0_, std::move(w), std::move(reports), options));
          executor_ = e.get();
          return std::unique_ptr<engine::Executor>(std::move(e));
        });
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    if (engine.ok()) client_ = engine::EngineClient::start(std::move(engine).value());
  }
  ~TwoRanks() {
    client_.reset();
    if (rank1_.joinable()) rank1_.join();
  }
  // Ends the rank 1 loop by hand (after a failure the executor no longer talks to it).
  void stop_rank1() {
    dist::MessageHeader h;
    h.kind = dist::MessageKind::kShutdown;
    ASSERT_TRUE(group_[0]->send(1, &h, sizeof(h)).ok());
    rank1_.join();
  }
  Status join_rank1() {
    client_.reset();
    rank1_.join();
    return loop_status_;
  }

  std::vector<std::unique_ptr<Comm>> group_;
  WatchedComm comm0_, comm1_;
  std::thread rank1_;
  std::unique_ptr<engine::EngineClient> client_;
  DistExecutor* executor_ = nullptr;
  std::vector<RankReport> reports_;
  Status loop_status_;
  std::atomic<bool> loop_done_{false};
  int64_t rank1_blocks_ = 0;
};

// Submits `requests` together and collects every completion (each without error).
std::vector<testing::Completion> run_requests(engine::EngineClient& client,
                                              std::vector<engine::EngineRequest> requests) {
  auto streams = testing::submit_together(client, std::move(requests));
  std::vector<testing::Completion> out;
  for (auto& s : streams)
    for (auto& c : testing::collect(*s)) {
      EXPECT_TRUE(c.error.ok()) << c.error.to_string();
      out.push_back(std::move(c));
    }
  EXPECT_TRUE(testing::wait_idle(client));
  return out;
}

std::vector<testing::Completion> run_all(engine::EngineClient& client, bool sampled) {
  return run_requests(client, workload(sampled));
}

std::vector<testing::Completion> run_one_process(bool sampled) {
  auto client = engine::EngineClient::create(tiny_config());
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  if (!client.ok()) return {};
  return run_all(**client, sampled);
}

void expect_same(const std::vector<testing::Completion>& a,
                 const std::vector<testing::Completion>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_FALSE(a[i].tokens.empty()) << "choice " << i;
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "choice " << i;
    EXPECT_EQ(a[i].logprobs, b[i].logprobs) << "choice " << i;
    EXPECT_EQ(a[i].finish_reason, b[i].finish_reason) << "choice " << i;
  }
}

TEST(DistExecutor, TwoRanksGiveTheOutputsOfOneProcessAndRank1RunsEveryStep) {
  for (bool sampled : {false, true}) {
    auto one = run_one_process(sampled);
    TwoRanks two(tiny_config());
    ASSERT_NE(two.client_, nullptr);
    auto out = run_all(*two.client_, sampled);
    expect_same(one, out);
    EXPECT_GT(two.comm1_.steps.load(), 5);
    EXPECT_TRUE(two.executor_->health().ok());
    EXPECT_TRUE(two.client_->health().ok());
    // Destroying the engine tells rank 1 to stop: its loop ends cleanly.
    EXPECT_TRUE(two.join_rank1().ok()) << two.loop_status_.to_string();
    EXPECT_TRUE(two.loop_done_.load());
  }
}

TEST(DistExecutor, TheSchedulerGetsTheSmallestKvPoolOfAllRanks) {
  auto c = tiny_config();
  c.cache.kv_cache_memory_bytes = 2 << 20;
  TwoRanks two(c, /*rank1_kv_bytes=*/1 << 20);
  ASSERT_NE(two.client_, nullptr) << two.loop_status_.to_string();
  ASSERT_EQ(two.reports_.size(), 2u);
  EXPECT_GT(two.rank1_blocks_, 0);
  EXPECT_LT(two.rank1_blocks_, two.reports_[0].num_blocks);
  EXPECT_EQ(two.reports_[1].num_blocks, two.rank1_blocks_);
  EXPECT_EQ(two.executor_->info().memory.num_blocks, two.rank1_blocks_);
  // Every rank reported its weights; the table names each rank.
  EXPECT_GT(two.reports_[1].weight_bytes, 0);
  const std::string table = dist::format_world_table(*two.group_[0], two.reports_);
  EXPECT_NE(table.find("thread 0"), std::string::npos) << table;
  EXPECT_NE(table.find("thread 1"), std::string::npos) << table;
  EXPECT_NE(table.find(std::to_string(two.reports_[1].weight_bytes) + " bytes"), std::string::npos)
      << table;
}

TEST(DistExecutor, AnIdleRank0SendsHeartbeats) {
  dist::DistExecutorOptions o;
  o.heartbeat_seconds = 0.01;
  TwoRanks two(tiny_config(), 0, o);
  ASSERT_NE(two.client_, nullptr);
  // No request at all: only heartbeats reach rank 1, and each is answered.
  EXPECT_TRUE(testing::wait_until([&] { return two.comm1_.heartbeats.load() >= 3; }));
  EXPECT_EQ(two.comm1_.steps.load(), 0);
  EXPECT_TRUE(two.executor_->health().ok());
  EXPECT_TRUE(two.join_rank1().ok());
}

TEST(DistExecutor, ALostRankFailsTheExecutorForGoodAndCallsBackOnce) {
  dist::DistExecutorOptions o;
  o.heartbeat_seconds = 0.01;
  TwoRanks two(tiny_config(), 0, o);
  ASSERT_NE(two.client_, nullptr);
  std::atomic<int> calls{0};
  std::string why;
  std::mutex mu;
  two.executor_->set_failure_callback([&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    why = s.message();
    calls++;
  });
  // A request completes first, then the group is cut while idle: the heartbeat finds out.
  auto before = run_all(*two.client_, false);
  EXPECT_EQ(before.size(), 5u);
  two.comm0_.cut();
  ASSERT_TRUE(testing::wait_until([&] { return calls.load() > 0; }));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_NE(why.find("rank 1 on host test"), std::string::npos) << why;
  }
  Status h = two.client_->health();
  EXPECT_EQ(h.code(), StatusCode::kUnavailable);
  EXPECT_NE(h.message().find("rank 1 on host test"), std::string::npos) << h.message();
  // A request after the failure ends with the error instead of hanging.
  auto s = two.client_->submit(testing::greedy_request("late", {256, 1, 2}, 4));
  ASSERT_TRUE(s.ok());
  auto late = testing::collect(**s);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_FALSE(late[0].error.ok());
  EXPECT_NE(late[0].error.message().find("rank 1 on host test"), std::string::npos)
      << late[0].error.message();
  EXPECT_EQ(calls.load(), 1);
  two.stop_rank1();
}

TEST(DistExecutor, GrammarConstrainedRequestsAreRefusedWithSeveralRanks) {
  TwoRanks two(tiny_config());
  ASSERT_NE(two.client_, nullptr);
  const auto& info = two.client_->info();
  ASSERT_NE(info.tokenizer, nullptr);
  auto vocab = grammar::make_token_vocabulary(*info.tokenizer, info.vocab_size, info.eos_token_ids);
  auto g = grammar::Grammar::parse_ebnf(R"(root ::= "yes" | "no")");
  ASSERT_TRUE(g.ok());
  auto r = testing::greedy_request("g", {256, 1, 2}, 4);
  r.constraint = grammar::CompiledGrammar::compile(*g, vocab);
  std::string field;
  auto s = two.client_->submit(std::move(r), &field);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "response_format");
  EXPECT_NE(s.status().message().find("not supported with tensor or pipeline parallelism"),
            std::string::npos);
  EXPECT_FALSE(two.executor_->supports_constraints());
}

// ---- Pipeline parallelism over thread ranks, with and without overlap ----

// Rank 0's executor behind a wrapper that records what is in flight at every submit: whether a
// second step was submitted before the first completed is observable state, not timing.
class CountingExecutor final : public engine::Executor {
 public:
  explicit CountingExecutor(std::unique_ptr<DistExecutor> inner) : inner_(std::move(inner)) {}
  const engine::WorkerInfo& info() const override { return inner_->info(); }
  Status execute(const engine::StepInput& in, engine::StepOutput* out) override {
    executes++;
    return inner_->execute(in, out);
  }
  int max_concurrent_batches() const override { return inner_->max_concurrent_batches(); }
  Status submit(const engine::StepInput& in) override {
    Status s = inner_->submit(in);
    submits++;
    const int n = inner_->num_in_flight();
    max_in_flight = std::max(max_in_flight.load(), n);
    // The first stage's worker has run this step's forward pass with the earlier ones still
    // waiting for their logits.
    max_worker_in_flight =
        std::max(max_worker_in_flight.load(), static_cast<int>(inner_->worker().num_in_flight()));
    if (n >= 2) submits_behind_another++;
    return s;
  }
  Status complete(engine::StepOutput* out) override {
    completes++;
    return inner_->complete(out);
  }
  int num_in_flight() const override { return inner_->num_in_flight(); }
  Status health() const override { return inner_->health(); }
  bool supports_constraints() const override { return inner_->supports_constraints(); }
  std::atomic<int> executes{0}, submits{0}, completes{0}, max_in_flight{0}, max_worker_in_flight{0},
      submits_behind_another{0};

 private:
  std::unique_ptr<DistExecutor> inner_;
};

// tp x pp ranks as threads: rank 0 behind an engine, the others in their worker loops. Each
// rank loads its stage's layers (and its tensor-parallel slice).
class PipelineRanks {
 public:
  PipelineRanks(engine::EngineConfig config, int tp, int pp, int max_in_flight) {
    const int n = tp * pp;
    world_ = make_local_group(n);
    for (int st = 0; st < pp; ++st) tp_groups_.push_back(make_local_group(tp));
    for (int t = 0; t < tp; ++t) pp_groups_.push_back(make_local_group(pp));
    auto ranges = pipeline_layer_ranges(4, pp, "");  // strata-tiny: 4 layers
    EXPECT_TRUE(ranges.ok());
    auto place = [this, tp, pp, ranges](int w) {
      ModelParallel p;
      p.tp_size = tp;
      p.tp_rank = w % tp;
      p.pp_size = pp;
      p.pp_rank = w / tp;
      p.first_layer = (*ranges)[p.pp_rank].begin;
      p.end_layer = (*ranges)[p.pp_rank].end;
      p.tp = tp > 1 ? tp_groups_[p.pp_rank][p.tp_rank].get() : nullptr;
      p.pp = pp > 1 ? pp_groups_[p.tp_rank][p.pp_rank].get() : nullptr;
      return p;
    };
    for (int w = 1; w < n; ++w) {
      ranks_.emplace_back([this, config, w, place] {
        Comm& world = *world_[w];
        auto wc = engine::resolve_worker_config(config);
        if (!wc.ok()) {
          (void)dist::exchange_reports(world, RankReport{});
          return;
        }
        wc->parallel = place(w);
        auto worker = engine::Worker::create(*wc);
        if (!worker.ok()) {
          ADD_FAILURE() << worker.status().to_string();
          (void)dist::exchange_reports(world, RankReport{});
          return;
        }
        if (!dist::exchange_reports(world, report_of(**worker)).ok()) return;
        Status s = dist::run_worker_loop(world, **worker);
        EXPECT_TRUE(s.ok()) << "rank " << w << ": " << s.to_string();
      });
    }
    dist::DistExecutorOptions options;
    options.max_in_flight = max_in_flight;
    auto engine = engine::Engine::create(
        config,
        [this, options,
         place](const engine::WorkerConfig& wc_in) -> Result<std::unique_ptr<engine::Executor>> {
          engine::WorkerConfig wc = wc_in;
          wc.parallel = place(0);
          STRATA_ASSIGN_OR_RETURN(auto w, engine::Worker::create(wc));
          STRATA_ASSIGN_OR_RETURN(auto reports, dist::exchange_reports(*world_[0], report_of(*w)));
          STRATA_ASSIGN_OR_RETURN(auto e, DistExecutor::create(world_[0].get(), std::move(w),
                                                               std::move(reports), options));
          auto counting = std::make_unique<CountingExecutor>(std::move(e));
          executor_ = counting.get();
          return std::unique_ptr<engine::Executor>(std::move(counting));
        });
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    if (engine.ok()) {
      depth_ = (*engine)->pipeline_depth();
      client_ = engine::EngineClient::start(std::move(engine).value());
    }
  }
  ~PipelineRanks() {
    client_.reset();
    for (auto& t : ranks_) t.join();
  }

  std::vector<std::unique_ptr<Comm>> world_;
  std::vector<std::vector<std::unique_ptr<Comm>>> tp_groups_, pp_groups_;
  std::vector<std::thread> ranks_;
  std::unique_ptr<engine::EngineClient> client_;
  CountingExecutor* executor_ = nullptr;
  int depth_ = 0;
};

// Many concurrent requests: prompts of many lengths (chunked prefills beside decodes), greedy or
// seeded sampling with logprobs, some with n = 2, some with prompt logprobs.
std::vector<engine::EngineRequest> many_requests(bool sampled) {
  std::vector<engine::EngineRequest> out;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> p = {256};
    for (int k = 1; k < 3 + 19 * (i % 5); ++k)
      p.push_back(static_cast<int32_t>((k * 7 + i * 31) % 256));
    auto r = testing::greedy_request("m" + std::to_string(i), std::move(p), 6 + 3 * (i % 4));
    if (sampled) {
      r.params.temperature = 0.8;
      r.params.seed = 7 + i;
      r.params.logprobs = 1;
      r.params.n = i % 3 == 0 ? 2 : 1;
      if (i % 4 == 1) r.params.prompt_logprobs = 1;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<testing::Completion> run_many(engine::EngineClient& client, bool sampled) {
  return run_requests(client, many_requests(sampled));
}

void expect_same_with_prompt_logprobs(const std::vector<testing::Completion>& a,
                                      const std::vector<testing::Completion>& b) {
  expect_same(a, b);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].prompt_logprobs, b[i].prompt_logprobs) << "choice " << i;
}

// The completions of run_many() on one process (no ranks): what every deployment must give.
std::vector<testing::Completion> one_process(bool sampled) {
  auto client = engine::EngineClient::create(tiny_config());
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  return client.ok() ? run_many(**client, sampled) : std::vector<testing::Completion>{};
}

TEST(DistPipeline, TwoStagesKeepTwoBatchesInFlightAndGiveTheOutputsOfOneProcess) {
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "sampled" : "greedy");
    const std::vector<testing::Completion> one = one_process(sampled);
    ASSERT_EQ(one.size(), sampled ? 16u : 12u);
    PipelineRanks pp(tiny_config(), /*tp=*/1, /*pp=*/2, /*max_in_flight=*/0);
    ASSERT_NE(pp.client_, nullptr);
    EXPECT_EQ(pp.depth_, 2);
    auto out = run_many(*pp.client_, sampled);
    expect_same_with_prompt_logprobs(one, out);
    CountingExecutor& e = *pp.executor_;
    EXPECT_EQ(e.executes.load(), 0);
    EXPECT_GT(e.submits.load(), 10);
    EXPECT_EQ(e.submits.load(), e.completes.load());
    // A second micro-batch went in before the first came out, at the executor and in stage 0's
    // worker (its forward pass ran while the first batch's logits were still due).
    EXPECT_EQ(e.max_in_flight.load(), 2);
    EXPECT_EQ(e.max_worker_in_flight.load(), 2);
    EXPECT_GT(e.submits_behind_another.load(), 5);
    EXPECT_TRUE(pp.client_->health().ok());
  }
}

TEST(DistPipeline, OverlapOffRunsEveryStepWhole) {
  PipelineRanks pp(tiny_config(), 1, 2, /*max_in_flight=*/1);
  ASSERT_NE(pp.client_, nullptr);
  EXPECT_EQ(pp.depth_, 1);
  auto out = run_many(*pp.client_, false);
  EXPECT_EQ(out.size(), 12u);
  EXPECT_GT(pp.executor_->executes.load(), 10);
  EXPECT_EQ(pp.executor_->submits.load(), 0);
}

TEST(DistPipeline, TensorTimesPipelineWithOverlapGivesTheOutputsOfOneProcess) {
  const std::vector<testing::Completion> one = one_process(true);
  ASSERT_FALSE(one.empty());
  PipelineRanks pp(tiny_config(), /*tp=*/2, /*pp=*/2, 0);
  ASSERT_NE(pp.client_, nullptr);
  auto out = run_many(*pp.client_, true);
  expect_same_with_prompt_logprobs(one, out);
  EXPECT_EQ(pp.executor_->max_in_flight.load(), 2);
}

TEST(DistPipeline, ThreeStagesWithThreeInFlightGiveTheOutputsOfOneProcess) {
  const std::vector<testing::Completion> one = one_process(false);
  ASSERT_FALSE(one.empty());
  PipelineRanks pp(tiny_config(), 1, 3, 0);
  ASSERT_NE(pp.client_, nullptr);
  EXPECT_EQ(pp.depth_, 3);
  auto out = run_many(*pp.client_, false);
  expect_same(one, out);
  EXPECT_EQ(pp.executor_->max_in_flight.load(), 3);
}

TEST(DistPipeline, AbortsWhileInFlightLeaveTheOthersIntact) {
  const std::vector<testing::Completion> one = one_process(false);
  ASSERT_FALSE(one.empty());
  PipelineRanks pp(tiny_config(), 1, 2, 0);
  ASSERT_NE(pp.client_, nullptr);
  auto streams = testing::submit_together(*pp.client_, many_requests(false));
  // Abort two of them after a token (their batches may be in flight then, or not: either way the
  // other requests' outputs must not change).
  std::vector<std::vector<int32_t>> firsts(streams.size());
  for (int k : {3, 8}) {
    auto first = streams[k]->next();
    ASSERT_TRUE(first.has_value());
    firsts[k] = first->token_ids;
    pp.client_->abort("m" + std::to_string(k));
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    auto got = testing::collect(*streams[i]);
    ASSERT_EQ(got.size(), 1u);
    got[0].tokens.insert(got[0].tokens.begin(), firsts[i].begin(), firsts[i].end());
    if ((i == 3 || i == 8) && got[0].finish_reason == "abort") {
      // Aborted (unless it had finished first): what came out is the start of its tokens.
      ASSERT_LE(got[0].tokens.size(), one[i].tokens.size()) << i;
      EXPECT_TRUE(std::equal(got[0].tokens.begin(), got[0].tokens.end(), one[i].tokens.begin()))
          << i;
      continue;
    }
    EXPECT_EQ(got[0].tokens, one[i].tokens) << i;
    EXPECT_EQ(got[0].finish_reason, one[i].finish_reason) << i;
  }
  EXPECT_TRUE(testing::wait_idle(*pp.client_));
  EXPECT_TRUE(pp.client_->health().ok());
}

TEST(DistExecutor, OneRankIsTheWorkerItself) {
  auto group = make_local_group(1);
  auto wc = engine::resolve_worker_config(tiny_config());
  ASSERT_TRUE(wc.ok()) << wc.status().to_string();
  auto w = engine::Worker::create(*wc);
  ASSERT_TRUE(w.ok());
  auto reports = dist::exchange_reports(*group[0], report_of(**w));
  ASSERT_TRUE(reports.ok());
  auto e = DistExecutor::create(group[0].get(), std::move(w).value(), *reports);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE((*e)->supports_constraints());
}

}  // namespace
}  // namespace strata

// The simulator drives the real scheduler on a virtual clock. With a constant step time the
// outcomes are hand-checkable: which step each token comes out of, hence TTFT, TPOT, throughput;
// concurrency beyond max_num_seqs queues in the server; a small KV pool queues admission.
#include "plan/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/model_config.h"
#include "test_util.h"

namespace strata::plan {
namespace {

StepTimeFn constant(double s) {
  return [s](std::span<const SequenceWork>) { return s; };
}

SimulationConfig config(int64_t num_blocks, int64_t max_num_seqs = 256,
                        int64_t max_batched_tokens = 64) {
  SimulationConfig c;
  c.scheduler = {.max_num_seqs = max_num_seqs,
                 .max_num_batched_tokens = max_batched_tokens,
                 .max_model_len = 256};
  c.cache = {.block_size = 4};
  c.num_kv_blocks = num_blocks;
  return c;
}

std::vector<SimRequest> same(int n, int64_t prompt, int64_t out, double at = 0) {
  return std::vector<SimRequest>(
      n, SimRequest{.arrival_s = at, .prompt_len = prompt, .output_len = out});
}

SimulationResult run(const SimulationConfig& c, const std::vector<SimRequest>& w,
                     const StepTimeFn& f) {
  auto r = simulate(c, w, f);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : SimulationResult{};
}

TEST(SimulatorTest, OneRequestTakesOneStepPerToken) {
  // An 8-token prompt fits one step: the first token comes out of step 1, then one per step.
  const auto r = run(config(64), same(1, 8, 4), constant(0.5));
  ASSERT_EQ(r.outputs.size(), 1u);
  const bench::RequestOutput& o = r.outputs[0];
  EXPECT_TRUE(o.success) << o.error;
  EXPECT_EQ(o.output_tokens, 4);
  EXPECT_DOUBLE_EQ(o.start_time, 0);
  EXPECT_DOUBLE_EQ(o.ttft, 0.5);
  EXPECT_EQ(o.itl, (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_DOUBLE_EQ(o.latency, 2.0);
  EXPECT_EQ(r.num_steps, 4);
  EXPECT_DOUBLE_EQ(r.duration_s, 2.0);
  const auto m = bench::compute_metrics(r.outputs, r.duration_s, {99}, {});
  EXPECT_DOUBLE_EQ(m.ttft.mean_ms, 500);
  EXPECT_DOUBLE_EQ(m.tpot.mean_ms, 500);
  EXPECT_DOUBLE_EQ(m.itl.median_ms, 500);
  EXPECT_DOUBLE_EQ(m.output_throughput, 2);  // 4 tokens in 2 s
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.5);
  EXPECT_EQ(m.total_input, 8);
  // A 100-token prompt with a 64-token budget takes two steps to its first token.
  const auto chunked = run(config(64), same(1, 100, 2), constant(0.5));
  EXPECT_DOUBLE_EQ(chunked.outputs[0].ttft, 1.0);
  EXPECT_DOUBLE_EQ(chunked.outputs[0].latency, 1.5);
}

TEST(SimulatorTest, RequestsArrivingMidStepWaitForTheNextPlan) {
  std::vector<SimRequest> w = {{.arrival_s = 0, .prompt_len = 4, .output_len = 3},
                               {.arrival_s = 0.3, .prompt_len = 4, .output_len = 1},
                               {.arrival_s = 10, .prompt_len = 4, .output_len = 2}};
  const auto r = run(config(64), w, constant(0.5));
  // B is sent at 0.3 while step [0, 0.5] runs, planned at 0.5, its token out at 1.0.
  EXPECT_DOUBLE_EQ(r.outputs[1].start_time, 0.3);
  EXPECT_DOUBLE_EQ(r.outputs[1].ttft, 0.7);
  EXPECT_DOUBLE_EQ(r.outputs[0].latency, 1.5);
  // The engine idles until C arrives at 10: its first token at 10.5, its second at 11.
  EXPECT_DOUBLE_EQ(r.outputs[2].start_time, 10);
  EXPECT_DOUBLE_EQ(r.outputs[2].ttft, 0.5);
  EXPECT_DOUBLE_EQ(r.duration_s, 11);
  EXPECT_EQ(r.num_steps, 3 + 2);
}

TEST(SimulatorTest, ThroughputGrowsWithConcurrencyUntilMaxNumSeqs) {
  // 8 requests at once, 4-token prompts, 10 tokens out, 1 s per step, max_num_seqs 4: a wave of
  // up to 4 requests takes 10 steps (prompt + first token in the first).
  const auto w = same(8, 4, 10);
  SweepOptions o{.concurrencies = {1, 2, 4, 8}, .input_len = 4, .output_len = 10};
  auto points = simulate_sweep(config(100, /*max_num_seqs=*/4), w, constant(1.0), o);
  ASSERT_TRUE(points.ok()) << points.status().to_string();
  ASSERT_EQ(points->size(), 4u);
  const double expected_tok_s[] = {1, 2, 4, 4};
  for (size_t i = 0; i < 4; ++i) {
    const SweepPoint& p = (*points)[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(p.metrics.completed, 8);
    EXPECT_DOUBLE_EQ(p.result.duration_s, 80 / expected_tok_s[i]);
    EXPECT_DOUBLE_EQ(p.metrics.output_throughput, expected_tok_s[i]);
    EXPECT_DOUBLE_EQ(p.row.output_tok_s, expected_tok_s[i]);
    EXPECT_DOUBLE_EQ(p.row.tpot_mean_ms, 1000);
    EXPECT_DOUBLE_EQ(p.row.per_user_tok_s, 1);
    EXPECT_EQ(p.result.max_running, static_cast<int64_t>(expected_tok_s[i]));
  }
  // Up to 4 in flight, every request's first token comes one step after it is sent; the client
  // queue holds the rest (request 1 of concurrency 1 is sent when request 0 finishes, at 10 s).
  EXPECT_DOUBLE_EQ((*points)[0].metrics.ttft.mean_ms, 1000);
  EXPECT_DOUBLE_EQ((*points)[0].result.outputs[1].start_time, 10);
  EXPECT_DOUBLE_EQ((*points)[0].result.outputs[1].queue_time, 10);
  EXPECT_DOUBLE_EQ((*points)[2].metrics.ttft.mean_ms, 1000);
  // At 8 the server holds 4 requests back for a whole wave: TTFT 1 s for 4, 11 s for 4.
  EXPECT_DOUBLE_EQ((*points)[3].metrics.ttft.mean_ms, (4 * 1000 + 4 * 11000) / 8.0);
  EXPECT_DOUBLE_EQ((*points)[3].row.ttft_mean_ms, 6000);
  const std::string table = bench::format_sweep_table({(*points)[0].row, (*points)[3].row});
  EXPECT_NE(table.find("|           8 |         4 |         10 |        6000.00 |"),
            std::string::npos)
      << table;
}

TEST(SimulatorTest, AFullKvPoolQueuesAdmission) {
  // 6 usable blocks of 4 tokens; 8-token prompts need 2 blocks, a third at their first decode.
  // Step 1 admits A (2 blocks, 4 left) and B (2 + a 1-block watermark while A runs); C would
  // need 3 of the 2 left and waits. Step 2: A and B decode into their third blocks and finish.
  // C runs alone in steps 3 and 4.
  const auto w = same(3, 8, 2);
  const auto r = run(config(7), w, constant(1.0));
  EXPECT_DOUBLE_EQ(r.outputs[0].ttft, 1);
  EXPECT_DOUBLE_EQ(r.outputs[1].ttft, 1);
  EXPECT_DOUBLE_EQ(r.outputs[2].ttft, 3);
  EXPECT_DOUBLE_EQ(r.outputs[2].latency, 4);
  EXPECT_DOUBLE_EQ(r.duration_s, 4);
  EXPECT_EQ(r.max_running, 2);
  EXPECT_EQ(r.stats.num_preemptions, 0);
  // With room for all three they finish together in 2 steps.
  const auto roomy = run(config(64), w, constant(1.0));
  EXPECT_DOUBLE_EQ(roomy.outputs[2].ttft, 1);
  EXPECT_DOUBLE_EQ(roomy.duration_s, 2);
  EXPECT_EQ(roomy.max_running, 3);
}

TEST(SimulatorTest, PromptsShareKvOnlyThroughADeclaredPrefix) {
  // Sent one after the other, identical-length prompts hit nothing unless they share a prefix.
  SimulationConfig c = config(64);
  c.max_concurrency = 1;
  const auto plain = run(c, same(3, 16, 1), constant(1.0));
  EXPECT_EQ(plain.stats.prefix_cache.hits, 0);
  std::vector<SimRequest> shared(
      3, SimRequest{.prompt_len = 16, .output_len = 1, .prefix_group = 0, .prefix_len = 8});
  const auto hit = run(c, shared, constant(1.0));
  EXPECT_EQ(hit.stats.prefix_cache.hits, 2 * 8) << "the 2 later prompts find 8 tokens each";
}

TEST(SimulatorTest, RefusedRequestsFailWithTheSchedulersError) {
  // A prompt of max_model_len (256) tokens is refused at submit; the others still run.
  std::vector<SimRequest> w = {{.prompt_len = 256, .output_len = 1},
                               {.prompt_len = 4, .output_len = 1}};
  SimulationConfig c = config(200, 256, 512);
  const auto r = run(c, w, constant(1.0));
  EXPECT_FALSE(r.outputs[0].success);
  EXPECT_NE(r.outputs[0].error.find("maximum model length is 256"), std::string::npos)
      << r.outputs[0].error;
  EXPECT_TRUE(r.outputs[1].success);
  // A step time that is not a positive number is an error, not a hang.
  auto bad = simulate(config(64), same(1, 4, 1), constant(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto zero_conc = config(64);
  zero_conc.max_concurrency = 0;
  EXPECT_FALSE(simulate(zero_conc, same(1, 4, 1), constant(1)).ok());
}

TEST(SimulatorTest, WorkloadSpecs) {
  auto w = parse_workload_spec("random:in=4096,out=4096");
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->input_len, 4096);
  EXPECT_EQ(w->output_len, 4096);
  EXPECT_TRUE(std::isinf(w->request_rate));
  w = parse_workload_spec("random:in=100,out=10,n=10,rate=2,range=0.5,prefix=16,seed=3");
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const auto reqs = make_random_workload(*w);
  ASSERT_EQ(reqs.size(), 10u);
  for (const auto& r : reqs) {
    EXPECT_GE(r.prompt_len, 16 + 50);
    EXPECT_LE(r.prompt_len, 16 + 150);
    EXPECT_GE(r.output_len, 5);
    EXPECT_LE(r.output_len, 15);
    EXPECT_EQ(r.prefix_group, 0);
    EXPECT_EQ(r.prefix_len, 16);
  }
  // bench serve's arrivals: rescaled so the last is sent at n / rate.
  EXPECT_DOUBLE_EQ(reqs.back().arrival_s, 5.0);
  EXPECT_TRUE(std::is_sorted(reqs.begin(), reqs.end(), [](const auto& a, const auto& b) {
    return a.arrival_s < b.arrival_s;
  }));
  const auto all_at_once = make_random_workload(*parse_workload_spec("random:in=8,out=2,n=5"));
  for (const auto& r : all_at_once) {
    EXPECT_EQ(r.arrival_s, 0);
    EXPECT_EQ(r.prompt_len, 8);
    EXPECT_EQ(r.prefix_group, -1);
  }
  for (const char* bad : {"random:in=4096", "sharegpt:path=x", "random:in=-1,out=2",
                          "random:in=4,out=2,colour=red", "random:in=4,out=2,rate=0",
                          "random:in=4,out=2,range=1", "random:in=4.5,out=2", "random:in"}) {
    auto r = parse_workload_spec(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("--workload"), std::string::npos) << bad;
    }
  }
}

TEST(SimulatorTest, CostModelDrivenSweepBatchesDecodesOnAMemoryBoundDevice) {
  // llama-134m on this CPU's placeholder file: decode steps are memory-bound (the weights are
  // read once per step whatever the batch), so 4 concurrent users get far more than 1 does.
  auto model = read_hf_config(testing::repo_path("models/llama-134m"), "");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto shape = model_shape(*model);
  ASSERT_TRUE(shape.ok());
  auto hw = load_hardware("cpu-xeon-avx512-2core");
  ASSERT_TRUE(hw.ok());
  auto cm = CostModel::create(*shape, *hw, {}, {});
  ASSERT_TRUE(cm.ok());
  SimulationConfig c;
  c.scheduler = {.max_num_batched_tokens = 2048, .max_model_len = 2048};
  c.cache = {.block_size = 16};
  c.num_kv_blocks = 1024;
  const auto w = make_random_workload({.num_prompts = 8, .input_len = 64, .output_len = 32});
  const CostModel& model_cost = *cm;
  auto points =
      simulate_sweep(c, w, [&](std::span<const SequenceWork> b) { return model_cost.step_time(b); },
                     {.concurrencies = {1, 4}});
  ASSERT_TRUE(points.ok()) << points.status().to_string();
  const double one = (*points)[0].metrics.output_throughput;
  const double four = (*points)[1].metrics.output_throughput;
  EXPECT_GT(four, 3 * one) << one << " vs " << four;
  // A decode step alone costs the weights' bytes at the device's bandwidth plus overhead.
  const std::vector<SequenceWork> decode = {{.num_new_tokens = 1, .context_len = 64}};
  const double tpot_ms = (*points)[0].metrics.tpot.mean_ms;
  EXPECT_NEAR(tpot_ms, 1000 * model_cost.step_time(decode), 0.05 * tpot_ms);
}

}  // namespace
}  // namespace strata::plan

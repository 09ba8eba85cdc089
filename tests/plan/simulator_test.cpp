// The simulator drives the real scheduler on a virtual clock. With a constant step time the
// outcomes are hand-checkable: which step each token comes out of, hence TTFT, TPOT, throughput;
// concurrency beyond max_num_seqs queues in the server; a small KV pool queues admission.
#include "plan/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "bench/arrivals.h"
#include "bench/dataset.h"
#include "core/file_util.h"
#include "model/model_config.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

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

TEST(SimulatorTest, PipelineStagesOverlapWithMicroBatchesInFlight) {
  // Two stages, each 0.25 s per token of the batch. One batch at a time: the 8 requests decode
  // together, 2 x 0.25 x 8 = 4 s per token. With two micro-batches in flight (the engine under
  // --pipeline-parallel-size 2) the scheduler makes two disjoint batches of 4 (1 s per stage):
  // batch A leaves stage 1 at 2 s, B at 3 s; A's next step enters stage 0 when A completes (2 s)
  // and leaves at 4 s, B's at 5 s: every request gets a token every 2 s, twice the throughput.
  auto per_stage = [](std::span<const SequenceWork> b) {
    double tokens = 0;
    for (const SequenceWork& w : b) tokens += static_cast<double>(w.num_new_tokens);
    StepCost c;
    c.stage_s = {0.25 * tokens, 0.25 * tokens};
    c.step_time_s = 0.5 * tokens;
    return c;
  };
  const auto work = same(8, 1, 6);
  SimulationConfig serial = config(64);
  const auto one =
      run(serial, work, [&](std::span<const SequenceWork> b) { return per_stage(b).step_time_s; });
  EXPECT_DOUBLE_EQ(one.duration_s, 6 * 4.0);
  EXPECT_EQ(one.max_running, 8);
  SimulationConfig piped = config(64);
  piped.pipeline_depth = 2;
  piped.stage_cost = per_stage;
  const auto two = run(piped, work, constant(1e9));  // step_time is not used when pipelined
  ASSERT_EQ(two.outputs.size(), 8u);
  EXPECT_EQ(two.max_running, 4);
  EXPECT_EQ(two.num_steps, 12);
  std::map<double, int> ttfts;
  for (const bench::RequestOutput& o : two.outputs) {
    EXPECT_TRUE(o.success) << o.error;
    ttfts[o.ttft] += 1;
    EXPECT_EQ(o.itl, std::vector<double>(5, 2.0));
  }
  EXPECT_EQ(ttfts, (std::map<double, int>{{2.0, 4}, {3.0, 4}}));
  EXPECT_DOUBLE_EQ(two.duration_s, 3.0 + 5 * 2.0);
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

TEST(SimulatorTest, TheServerAdmitsABurstOneRequestAtATime) {
  // Four 8-token prompts sent at once, steps of 0.5 s. Admitted together (0 s), they share the
  // first step; admitted 1 ms apart, the first wakes the engine and runs alone, the other three
  // join the next step, as in a real server's step trace.
  std::vector<size_t> first_steps;
  auto sizes = [&](std::span<const SequenceWork> b) {
    first_steps.push_back(b.size());
    return 0.5;
  };
  SimulationConfig c = config(64);
  run(c, same(4, 8, 2), sizes);
  ASSERT_FALSE(first_steps.empty());
  EXPECT_EQ(first_steps[0], 4u);
  first_steps.clear();
  c.request_admission_s = 1e-3;
  const auto r = run(c, same(4, 8, 2), sizes);
  ASSERT_GE(first_steps.size(), 2u);
  EXPECT_EQ(first_steps[0], 1u);
  EXPECT_EQ(first_steps[1], 4u);  // three prompts and the first one's decode
  EXPECT_DOUBLE_EQ(r.outputs[0].ttft, 1e-3 + 0.5);
  EXPECT_DOUBLE_EQ(r.outputs[3].ttft, 1e-3 + 1.0);  // sent at 0, out of the step [0.501, 1.001]
  EXPECT_DOUBLE_EQ(r.outputs[3].start_time, 0);
  // The client's clock starts at sending: admission time is part of the TTFT.
  c.request_admission_s = -1;
  EXPECT_EQ(simulate(c, same(1, 8, 2), constant(0.5)).status().code(),
            StatusCode::kInvalidArgument);
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

// A small ShareGPT file: four usable conversations (one without a reply), one prompt too short,
// one reply too short (vLLM's pruning drops both) and one entry that is not a conversation.
std::string write_sharegpt_file() {
  const std::string path = ::testing::TempDir() + "/strata_plan_sharegpt.json";
  const Status s = write_file(path, R"([
    {"id": "a", "conversations": [
      {"from": "human", "value": "What is the capital of France? Please answer in one sentence."},
      {"from": "gpt", "value": "The capital of France is Paris, which lies on the river Seine."}]},
    {"id": "b", "conversations": [
      {"from": "human", "value": "Write a short poem about the sea, the wind and an old lighthouse."}]},
    {"id": "c", "conversations": [
      {"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello! How can I help you today?"}]},
    {"id": "d", "conversations": [
      {"from": "human", "value": "Is seventeen a prime number? Explain your reasoning."},
      {"from": "gpt", "value": "Yes."}]},
    {"id": "e", "conversations": [
      {"from": "human", "value": "Translate 'good morning, how did you sleep?' into German and Italian."},
      {"from": "gpt", "value": "German: Guten Morgen, wie hast du geschlafen? Italian: Buongiorno, come hai dormito?"}]},
    {"id": "f", "conversations": [
      {"from": "human", "value": "List three uses of baking soda around the house, with a short example for each one."},
      {"from": "gpt", "value": "1. Cleaning ovens: a paste with water. 2. Deodorising fridges: an open box. 3. Scrubbing pans."}]},
    {"id": "g"}
  ])");
  EXPECT_TRUE(s.ok()) << s.to_string();
  return path;
}

std::string qwen_tokenizer() {
  return testing::shared_data_path("tokenizers/qwen2.5");
}

TEST(SimulatorTest, ShareGptWorkloadIsWhatBenchServeSends) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  const std::string path = write_sharegpt_file();
  auto spec = parse_workload("sharegpt:path=" + path + ",n=10,rate=4,burstiness=0.5,seed=7," +
                             "tokenizer=" + qwen_tokenizer());
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto wl = make_workload(*spec, "");
  ASSERT_TRUE(wl.ok()) << wl.status().to_string();
  ASSERT_EQ(wl->requests.size(), 10u);  // 4 usable entries, oversampled to n as bench does
  EXPECT_FALSE(wl->input_len.has_value());

  // bench serve's dataset with the same options and tokenizer gives the same lengths in order.
  auto tok = bench::make_local_tokenizer(qwen_tokenizer());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto ds = bench::sample_sharegpt(**tok, {.path = path, .num_prompts = 10, .seed = 7});
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  ASSERT_EQ(ds->requests.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(wl->requests[i].prompt_len, ds->requests[i].prompt_len) << i;
    EXPECT_EQ(wl->requests[i].output_len, ds->requests[i].expected_output_len) << i;
  }
  // bench serve's runner sends them at these times (a fresh Rng(seed)), the last at n / rate.
  const auto sent = bench::run_arrival_offsets(10, 4, 0.5, 7);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(wl->requests[i].arrival_s, sent[i]) << i;
  EXPECT_DOUBLE_EQ(wl->requests.back().arrival_s, 2.5);
  EXPECT_GT(wl->requests.back().arrival_s, wl->requests.front().arrival_s);

  // The lengths are the tokenizer's own counts (with the BOS it adds, none for Qwen): each
  // prompt is one of the usable conversations, each output its reply (128 without a reply).
  auto qwen = Tokenizer::load(qwen_tokenizer());
  ASSERT_TRUE(qwen.ok());
  auto count = [&](const std::string& text, bool special) {
    auto ids = (*qwen)->encode(text, special);
    EXPECT_TRUE(ids.ok());
    return static_cast<int64_t>(ids->size());
  };
  const std::map<int64_t, int64_t> usable = {
      {count("What is the capital of France? Please answer in one sentence.", true),
       count("The capital of France is Paris, which lies on the river Seine.", false)},
      {count("Write a short poem about the sea, the wind and an old lighthouse.", true),
       bench::kShareGptDefaultOutputLen},
      {count("Translate 'good morning, how did you sleep?' into German and Italian.", true),
       count("German: Guten Morgen, wie hast du geschlafen? Italian: Buongiorno, come hai "
             "dormito?",
             false)},
      {count("List three uses of baking soda around the house, with a short example for each "
             "one.",
             true),
       count("1. Cleaning ovens: a paste with water. 2. Deodorising fridges: an open box. 3. "
             "Scrubbing pans.",
             false)}};
  ASSERT_EQ(usable.size(), 4u) << "the test's prompts need distinct token counts";
  std::map<int64_t, int64_t> prompt_len_of_group;
  for (const auto& r : wl->requests) {
    ASSERT_TRUE(usable.count(r.prompt_len)) << r.prompt_len;
    EXPECT_EQ(r.output_len, usable.at(r.prompt_len)) << r.prompt_len;
    // Copies of one prompt share it whole (prefix caching hits them); distinct prompts do not.
    EXPECT_EQ(r.prefix_len, r.prompt_len);
    auto it = prompt_len_of_group.try_emplace(r.prefix_group, r.prompt_len).first;
    EXPECT_EQ(it->second, r.prompt_len) << "group " << r.prefix_group;
  }
  EXPECT_EQ(prompt_len_of_group.size(), 4u);
  // bench's note about the reply-less conversation names the spec's key.
  bool names_key = false;
  for (const auto& n : wl->notes) names_key |= n.find("output-len=") != std::string::npos;
  EXPECT_TRUE(names_key);

  // output-len= fixes every output, as --sharegpt-output-len does; rate inf sends all at once.
  auto fixed = make_workload(
      *parse_workload("sharegpt:path=" + path + ",n=3,output-len=50,tokenizer=" + qwen_tokenizer()),
      "");
  ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
  ASSERT_EQ(fixed->requests.size(), 3u);
  for (const auto& r : fixed->requests) {
    EXPECT_EQ(r.output_len, 50);
    EXPECT_EQ(r.arrival_s, 0);
  }
}

TEST(SimulatorTest, ShareGptWorkloadUsesTheModelsTokenizerOrSaysHowToGiveOne) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  const std::string path = write_sharegpt_file();
  auto spec = parse_workload("sharegpt:path=" + path + ",n=4");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  // The model's folder holding the tokenizer (what the engine would serve with).
  auto from_model = make_workload(*spec, qwen_tokenizer());
  ASSERT_TRUE(from_model.ok()) << from_model.status().to_string();
  auto given = make_workload(
      *parse_workload("sharegpt:path=" + path + ",n=4,tokenizer=" + qwen_tokenizer()), "");
  ASSERT_TRUE(given.ok());
  ASSERT_EQ(from_model->requests.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(from_model->requests[i].prompt_len, given->requests[i].prompt_len);
  // llama-134m ships a config only.
  auto none = make_workload(*spec, testing::repo_path("models/llama-134m"));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("tokenizer="), std::string::npos)
      << none.status().to_string();
  EXPECT_NE(none.status().message().find("llama-134m"), std::string::npos);
  // A bad tokenizer= or path= names the key.
  auto bad_tok =
      make_workload(*parse_workload("sharegpt:path=" + path + ",tokenizer=/nonexistent/tok"), "");
  ASSERT_FALSE(bad_tok.ok());
  EXPECT_NE(bad_tok.status().message().find("tokenizer=/nonexistent/tok"), std::string::npos)
      << bad_tok.status().to_string();
  auto bad_path = make_workload(
      *parse_workload("sharegpt:path=/nonexistent/sg.json,tokenizer=" + qwen_tokenizer()), "");
  ASSERT_FALSE(bad_path.ok());
  EXPECT_NE(bad_path.status().message().find("path=/nonexistent/sg.json"), std::string::npos)
      << bad_path.status().to_string();
}

TEST(SimulatorTest, WorkloadSpecErrorsNameTheKey) {
  // Random specs go through parse_workload too.
  auto random = parse_workload("random:in=64,out=8,n=3,seed=2");
  ASSERT_TRUE(random.ok()) << random.status().to_string();
  ASSERT_TRUE(std::holds_alternative<RandomWorkload>(*random));
  EXPECT_EQ(std::get<RandomWorkload>(*random).num_prompts, 3);
  auto sg = parse_workload("sharegpt:path=a.json,n=5,output-len=64,rate=2,burstiness=3,seed=9");
  ASSERT_TRUE(sg.ok()) << sg.status().to_string();
  const auto& w = std::get<ShareGptWorkload>(*sg);
  EXPECT_EQ(w.path, "a.json");
  EXPECT_EQ(w.num_prompts, 5);
  EXPECT_EQ(w.output_len, 64);
  EXPECT_EQ(w.request_rate, 2);
  EXPECT_EQ(w.burstiness, 3);
  EXPECT_EQ(w.seed, 9u);
  EXPECT_TRUE(w.tokenizer.empty());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"sharegpt:n=5", "path="},
      {"sharegpt:path=", "path="},
      {"sharegpt:path=a.json,n=0", "n=0"},
      {"sharegpt:path=a.json,output-len=abc", "output-len=abc"},
      {"sharegpt:path=a.json,output-len=0", "output-len=0"},
      {"sharegpt:path=a.json,colour=red", "'colour'"},
      {"sharegpt:path=a.json,rate=0", "rate"},
      {"sharegpt:path=a.json,burstiness=-1", "burstiness=-1"},
      {"sharegpt:path=a.json,seed=1.5", "seed=1.5"},
      {"sharegpt:path=a.json,tokenizer=", "tokenizer="},
      {"sharegpt:path=a.json,n=3,n=4", "'n'"},
      {"sharegpt:path=a.json,n", "'n'"},
      {"random:in=4,out=2,output-len=3", "'output-len'"},
      {"poisson:in=4", "random or sharegpt"},
  };
  for (const auto& [spec, key] : bad) {
    auto r = parse_workload(spec);
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find("--workload"), std::string::npos) << spec;
  }
  // The syntax shown is the kind's own.
  EXPECT_NE(parse_workload("sharegpt:n=5").status().message().find("sharegpt:path=FILE"),
            std::string::npos);
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

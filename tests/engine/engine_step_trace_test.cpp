// The engine's step trace (--step-trace, engine/step_trace.h) on the tiny dummy model, and the
// summary script that reads it (scripts/step_trace_summary.py).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "core/json.h"
#include "engine/engine_config.h"
#include "engine_test_util.h"

namespace strata {
namespace {

using testing::collect;
using testing::greedy_request;

std::vector<int32_t> prompt(int n, int seed) {
  std::vector<int32_t> p = {256};
  for (int i = 1; i < n; ++i) p.push_back(static_cast<int32_t>((i * 31 + seed * 7) % 256));
  return p;
}

std::string temp_path(const std::string& name) {
  char tmpl[] = "/tmp/strata_step_trace_XXXXXX";
  return std::string(::mkdtemp(tmpl)) + "/" + name;
}

std::vector<Json> read_lines(const std::string& path) {
  auto text = read_file(path);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  std::vector<Json> out;
  if (!text.ok()) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    auto j = parse_json(line, "step trace line");
    EXPECT_TRUE(j.ok()) << j.status().to_string() << ": " << line;
    if (j.ok()) out.push_back(std::move(j).value());
  }
  return out;
}

// Runs a few requests with the trace on (prompts longer than the step's token budget, so some
// are prefilled in chunks) and returns the trace file's path.
struct TracedRun {
  std::string path;
  std::map<std::string, int64_t> prompt_len, max_tokens;
  void remove() const { std::filesystem::remove_all(std::filesystem::path(path).parent_path()); }
};

TracedRun run_traced_requests() {
  TracedRun run;
  run.path = temp_path("trace.jsonl");
  auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy", 8 << 20);
  c.scheduler.max_model_len = 512;
  c.scheduler.max_num_batched_tokens = 64;
  c.cache.enable_prefix_caching = false;  // every prompt token is computed
  c.seed = 3;
  c.step_trace = run.path;
  auto created = engine::EngineClient::create(c);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  if (!created.ok()) return run;
  std::unique_ptr<engine::EngineClient> client = std::move(created).value();
  std::vector<engine::EngineRequest> reqs;
  const int lens[] = {10, 100, 33, 70};
  for (int i = 0; i < 4; ++i) {
    const std::string id = "req-" + std::to_string(i);
    run.prompt_len[id] = lens[i];
    run.max_tokens[id] = 3 + i;
    reqs.push_back(greedy_request(id, prompt(lens[i], i), 3 + i));
  }
  auto streams = testing::submit_together(*client, std::move(reqs));
  for (auto& s : streams)
    EXPECT_EQ(static_cast<int64_t>(collect(*s)[0].tokens.size()), run.max_tokens[s->request_id()]);
  // One more request after the others finished: the engine waited for it.
  auto late = client->submit(greedy_request("late", prompt(20, 9), 2));
  EXPECT_TRUE(late.ok());
  if (late.ok()) {
    EXPECT_EQ(collect(**late)[0].tokens.size(), 2u);
  }
  run.prompt_len["late"] = 20;
  run.max_tokens["late"] = 2;
  client.reset();  // shuts the engine down: the trace is flushed
  return run;
}

TEST(StepTraceTest, OneValidLinePerStepWithPhasesCountsAndEvents) {
  const TracedRun run = run_traced_requests();
  const std::vector<Json> lines = read_lines(run.path);
  ASSERT_FALSE(lines.empty());
  std::map<std::string, int> first_tokens, first_scheduled;
  std::map<std::string, int64_t> scheduled_tokens, prefill_tokens;
  std::map<std::string, int64_t> prefill_done_step, first_token_step;
  double prev_t = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    const Json& l = lines[i];
    SCOPED_TRACE("step line " + std::to_string(i) + ": " + l.dump());
    ASSERT_TRUE(l.is_object());
    ASSERT_EQ(l.at("step").get<int64_t>(), static_cast<int64_t>(i));  // consecutive from 0
    const double t = l.at("t").get<double>();
    EXPECT_GE(t, prev_t);  // steps start in order on the engine's clock
    prev_t = t;
    EXPECT_GE(l.at("dur").get<double>(), 0.0);
    const Json& ph = l.at("phases");
    for (const char* p :
         {"wait", "between", "schedule", "prepare", "forward", "sample", "output"}) {
      ASSERT_TRUE(ph.contains(p)) << p;
      EXPECT_GE(ph.at(p).get<double>(), 0.0) << p;
    }
    EXPECT_GE(l.at("running").get<int64_t>(), 1);
    EXPECT_GE(l.at("waiting").get<int64_t>(), 0);
    int64_t sum_prefill = 0, sum_tokens = 0, n_prefill = 0;
    for (const Json& e : l.at("events")) {
      const std::string id = e.at("id").get<std::string>();
      ASSERT_TRUE(run.prompt_len.count(id)) << id;
      const int64_t tokens = e.at("tokens").get<int64_t>();
      if (tokens > 0) {
        // Its context is what earlier steps computed; it samples once its prompt is done.
        EXPECT_EQ(e.at("context").get<int64_t>(), scheduled_tokens[id]) << id;
        EXPECT_EQ(e.value("sample", false), scheduled_tokens[id] + tokens >= run.prompt_len.at(id))
            << id;
      }
      sum_tokens += tokens;
      scheduled_tokens[id] += tokens;
      if (e.value("prefill", false)) {
        ++n_prefill;
        prefill_done_step[id] = static_cast<int64_t>(i);
        // Chunks of prompt tokens: all of them prompt tokens here (no output before the last).
        sum_prefill += tokens;
        prefill_tokens[id] += tokens;
      }
      if (e.value("first_scheduled", false)) {
        ++first_scheduled[id];
        EXPECT_LE(e.at("arrival").get<double>(), t) << id;
      }
      if (e.value("first_token", false)) {
        ++first_tokens[id];
        first_token_step[id] = static_cast<int64_t>(i);
      }
    }
    EXPECT_EQ(l.at("prefill_requests").get<int64_t>(), n_prefill);
    EXPECT_EQ(l.at("prefill_tokens").get<int64_t>(), sum_prefill);
    EXPECT_EQ(l.at("prefill_tokens").get<int64_t>() + l.at("decode_tokens").get<int64_t>(),
              sum_tokens);
    EXPECT_LE(sum_tokens, 64);  // the step's token budget
  }
  for (const auto& [id, len] : run.prompt_len) {
    SCOPED_TRACE(id);
    EXPECT_EQ(first_tokens[id], 1);
    EXPECT_EQ(first_scheduled[id], 1);
    EXPECT_EQ(prefill_tokens[id], len);
    // Every prompt token, then every output token but the last, went through a step.
    EXPECT_EQ(scheduled_tokens[id], len + run.max_tokens.at(id) - 1);
    // The first token comes from the step that computed the last prompt token.
    EXPECT_EQ(first_token_step[id], prefill_done_step[id]);
  }
  // The 100-token prompt cannot fit one 64-token step: it was prefilled in chunks.
  int chunks = 0;
  for (const Json& l : lines)
    for (const Json& e : l.at("events"))
      if (e.at("id") == "req-1" && e.value("prefill", false)) ++chunks;
  EXPECT_GE(chunks, 2);
  run.remove();
}

TEST(StepTraceTest, UnwritablePathIsAClearStartupError) {
  auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy", 8 << 20);
  c.scheduler.max_model_len = 512;
  c.step_trace = "/nonexistent-strata-dir/trace.jsonl";
  auto e = engine::Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--step-trace"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("/nonexistent-strata-dir/trace.jsonl"), std::string::npos);
}

TEST(StepTraceTest, OptionAndEnvironmentVariable) {
  OptionSet o;
  engine::add_engine_options(o);
  auto args = o.parse({"models/strata-tiny", "--step-trace", "/tmp/a.jsonl"});
  ASSERT_TRUE(args.ok()) << args.status().to_string();
  auto c = engine::engine_config_from_args(*args);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->step_trace, "/tmp/a.jsonl");
  ::setenv("STRATA_STEP_TRACE", "/tmp/b.jsonl", 1);
  auto env_args = o.parse({"models/strata-tiny"});
  ::unsetenv("STRATA_STEP_TRACE");
  ASSERT_TRUE(env_args.ok());
  auto ce = engine::engine_config_from_args(*env_args);
  ASSERT_TRUE(ce.ok());
  EXPECT_EQ(ce->step_trace, "/tmp/b.jsonl");
  auto none = o.parse({"models/strata-tiny"});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(engine::engine_config_from_args(*none)->step_trace, "");  // off by default
}

std::string python() {
  if (const char* env = std::getenv("STRATA_PYTHON"); env != nullptr && *env) return env;
  return "/usr/bin/python3";
}

// The summary script runs on a real trace and reports the phases and the requests.
TEST(StepTraceTest, SummaryScriptReadsTheTrace) {
  if (::access(python().c_str(), X_OK) != 0)
    GTEST_SKIP() << python() << " is not there (set STRATA_PYTHON): the script is not run";
  const TracedRun run = run_traced_requests();
  const std::string cmd = python() + " " + testing::repo_path("scripts/step_trace_summary.py") +
                          " " + run.path + " --requests -1 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  for (const char* want : {"forward", "output", "with prefill", "decode only", "5 requests",
                           "queueing", "first token", "req-1", "late"})
    EXPECT_NE(out.find(want), std::string::npos) << want << " missing from:\n" << out;
  run.remove();
}

}  // namespace
}  // namespace strata

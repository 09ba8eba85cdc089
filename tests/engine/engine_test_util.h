#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/file_util.h"
#include "core/json.h"
#include "engine/engine.h"
#include "test_util.h"

namespace strata::testing {

struct Completion {
  std::vector<int32_t> tokens;
  std::string text;
  std::string finish_reason;
  std::vector<sampling::TokenLogprobs> logprobs;
  std::vector<std::optional<sampling::TokenLogprobs>> prompt_logprobs;
  Status error;
};

// Reads a stream to the end; one Completion per choice.
inline std::vector<Completion> collect(engine::RequestStream& s) {
  std::vector<Completion> out(s.num_choices());
  while (auto c = s.next()) {
    Completion& o = out[c->index];
    o.tokens.insert(o.tokens.end(), c->token_ids.begin(), c->token_ids.end());
    o.text += c->text;
    o.logprobs.insert(o.logprobs.end(), c->logprobs.begin(), c->logprobs.end());
    if (!c->prompt_logprobs.empty()) o.prompt_logprobs = c->prompt_logprobs;
    if (c->finished) {
      o.finish_reason = c->finish_reason;
      o.error = c->error;
    }
  }
  return out;
}

// Polls `pred` until it holds. The deadline only keeps a broken build from hanging: it is far
// longer than anything needs on a loaded machine, and never what a test measures.
inline bool wait_until(const std::function<bool()>& pred, double timeout_s = 120) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

// Waits until every submitted request has finished and the engine has published the counters
// of its last step (stats() trails the streams' last chunks by a moment).
inline bool wait_idle(engine::EngineClient& client) {
  return wait_until([&] { return client.num_unfinished() == 0; });
}

// Submits `requests` so that all of them are in the scheduler before the engine runs its next
// step, whatever the machine's speed (the engine is held while they are submitted).
inline std::vector<std::shared_ptr<engine::RequestStream>> submit_together(
    engine::EngineClient& client, std::vector<engine::EngineRequest> requests) {
  client.set_step_limit(client.steps_run());
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (auto& r : requests) {
    auto s = client.submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) streams.push_back(*s);
  }
  client.set_step_limit(-1);  // the engine adds every pending request before it steps again
  return streams;
}

// A golden file's cases (prompt, prompt ids and the greedy ids generated after them), from
// ../shared/data.
struct Case {
  std::string prompt;
  bool has_prompt = false;
  std::vector<int32_t> prompt_ids, generated;
};

inline std::vector<Case> cases(const char* file = "golden/stories260K.json") {
  auto j = read_json_file(shared_data_path(file));
  EXPECT_TRUE(j.ok());
  std::vector<Case> out;
  for (const auto& c : (*j)["cases"]) {
    Case k;
    k.has_prompt = c.contains("prompt") && c["prompt"].is_string();
    if (k.has_prompt) k.prompt = c["prompt"].get<std::string>();
    k.prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    k.generated = c["generated_ids"].get<std::vector<int32_t>>();
    out.push_back(k);
  }
  return out;
}

inline engine::EngineConfig engine_config(const std::string& model, const std::string& format,
                                          int64_t kv_bytes) {
  engine::EngineConfig c;
  c.model.model = model;
  c.model.load_format = format;
  c.cache.kv_cache_memory_bytes = kv_bytes;
  c.threads = 2;
  return c;
}

inline engine::EngineRequest greedy_request(const std::string& id, std::vector<int32_t> prompt,
                                            int max_tokens) {
  engine::EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

inline std::string write_config_dir(const std::string& json) {
  char tmpl[] = "/tmp/strata_engine_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  (void)write_file(dir + "/config.json", json);
  return dir;
}

// Greedy completions of `prompts` (max_tokens each) on a fresh engine: one request at a time, or
// all submitted together; *stats are the engine's counters once it is idle.
inline std::vector<std::vector<int32_t>> run_greedy(
    const engine::EngineConfig& cfg, const std::vector<std::vector<int32_t>>& prompts,
    int max_tokens, bool together, engine::EngineStats* stats) {
  auto client = engine::EngineClient::create(cfg);
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  if (!client.ok()) return {};
  std::vector<std::vector<int32_t>> out;
  if (together) {
    std::vector<engine::EngineRequest> batch;
    for (size_t i = 0; i < prompts.size(); ++i)
      batch.push_back(greedy_request(std::to_string(i), prompts[i], max_tokens));
    for (auto& s : submit_together(**client, std::move(batch)))
      out.push_back(collect(*s)[0].tokens);
  } else {
    for (size_t i = 0; i < prompts.size(); ++i)
      out.push_back(
          collect(**(*client)->submit(greedy_request(std::to_string(i), prompts[i], max_tokens)))[0]
              .tokens);
  }
  EXPECT_TRUE(wait_idle(**client));
  *stats = (*client)->stats();
  return out;
}

// Two-sample chi-square homogeneity test of two equal-size samples of tokens (token -> count):
// tokens seen at least 10 times in all get a bin, the rest one pooled bin. Returns the statistic
// and its critical value at p = 0.001 (Wilson-Hilferty), or critical 0 when there is one bin.
struct ChiSquare {
  double statistic = 0, critical = 0;
  int dof = 0;
};
inline ChiSquare two_sample_chi_square(const std::map<int32_t, int64_t>& a,
                                       const std::map<int32_t, int64_t>& b) {
  std::map<int32_t, std::pair<double, double>> bins;
  std::pair<double, double> rest{0, 0};
  std::map<int32_t, int64_t> total;
  for (const auto* m : {&a, &b})
    for (const auto& [t, c] : *m) total[t] += c;
  for (const auto& [t, c] : a) (total[t] >= 10 ? bins[t] : rest).first += static_cast<double>(c);
  for (const auto& [t, c] : b) (total[t] >= 10 ? bins[t] : rest).second += static_cast<double>(c);
  if (rest.first + rest.second > 0) bins[-1] = rest;
  ChiSquare out;
  for (const auto& [t, bin] : bins) {
    const double e = (bin.first + bin.second) / 2;
    out.statistic +=
        (bin.first - e) * (bin.first - e) / e + (bin.second - e) * (bin.second - e) / e;
  }
  out.dof = static_cast<int>(bins.size()) - 1;
  if (out.dof > 0) {
    const double k = 2.0 / (9.0 * out.dof);
    out.critical = out.dof * std::pow(1 - k + 3.090 * std::sqrt(k), 3);
  }
  return out;
}

}  // namespace strata::testing

// Speculative decoding with DeepSeek-V3's multi-token-prediction layer on a scaled model (the tiny
// deepseek_v3_fp8 config with num_nextn_predict_layers 1, dummy weights): greedy output token for
// token that of plain decoding, alone, batched with chunked prefill, preemption and a prefix hit,
// with one and with three drafts per step; and the drafts the engine proposes step by step are
// those of a one-shot reference (the target over the whole final sequence, then the MTP layer over
// every position with the target's hidden states and the next tokens), so the layer's positions,
// tokens, hidden rows and KV are right.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine_test_util.h"
#include "engine/model_runner.h"
#include "tiny_models.h"

namespace strata {
namespace {

using testing::collect;
using testing::greedy_request;

std::string mtp_config_json() {
  for (const auto& a : testing::tiny_archs())
    if (std::string(a.name) == "deepseek_v3_fp8") {
      std::string j = a.config_json;
      j.insert(j.find('{') + 1, R"("num_nextn_predict_layers":1,)");
      return j;
    }
  return "";
}

std::vector<std::vector<int32_t>> make_prompts() {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> p;
    for (int k = 0; k < 20 + 9 * i; ++k)
      p.push_back(static_cast<int32_t>((k * 37 + i * 11 + 5) % 300));
    out.push_back(p);
  }
  out.push_back(out[3]);  // a prefix hit on the fourth's blocks, then its own tokens
  out.back().resize(40);
  for (int k = 0; k < 7; ++k) out.back().push_back(static_cast<int32_t>(250 + k));
  return out;
}

engine::EngineConfig config_for(const std::string& dir, int64_t k, int64_t pool_tokens) {
  auto c = testing::engine_config(dir, "dummy", 0);
  c.scheduler.max_model_len = 96;
  c.scheduler.max_num_batched_tokens = 24;
  c.cache.block_size = 8;
  c.seed = c.model.seed = 11;
  if (k > 0) c.scheduler.speculative = {.method = "deepseek_mtp", .num_speculative_tokens = k};
  // KV bytes per token (bf16 latent rows of kv_lora_rank + rope dims): 3 layers, and the MTP's 1.
  const int64_t row = (32 + 8) * 2;
  c.cache.kv_cache_memory_bytes = row * (3 + (k > 0 ? 1 : 0)) * pool_tokens;
  return c;
}

// Records the drafts the worker proposes, with the position they follow.
struct Proposal {
  int64_t last;  // the last standing position of the step: the drafts are for last + 2, ...
  std::vector<int32_t> drafts;
};
class RecordingExecutor final : public engine::Executor {
 public:
  RecordingExecutor(std::unique_ptr<engine::Executor> inner,
                    std::map<std::string, std::vector<Proposal>>* log,
                    std::map<std::string, std::vector<int32_t>>* prompts)
      : inner_(std::move(inner)), log_(log), prompts_(prompts) {}
  const engine::WorkerInfo& info() const override { return inner_->info(); }
  Status execute(const engine::StepInput& in, engine::StepOutput* out) override {
    STRATA_RETURN_IF_ERROR(inner_->execute(in, out));
    for (const auto& n : in.new_requests) (*prompts_)[n.request_id] = n.prompt_token_ids;
    for (size_t i = 0; i < in.plan.scheduled.size(); ++i) {
      const auto& s = in.plan.scheduled[i];
      const auto& e = out->entries[i];
      if (e.draft_token_ids.empty()) continue;
      const int64_t last = s.num_computed_tokens + s.num_scheduled_tokens - s.spec_token_ids_count +
                           static_cast<int64_t>(e.accepted_token_ids.size()) - 1;
      (*log_)[s.request_id].push_back({last, e.draft_token_ids});
    }
    return ok_status();
  }

 private:
  std::unique_ptr<engine::Executor> inner_;
  std::map<std::string, std::vector<Proposal>>* log_;
  std::map<std::string, std::vector<int32_t>>* prompts_;
};

struct RunResult {
  std::vector<std::vector<int32_t>> tokens;
  engine::EngineStats stats;
};

// 16 tokens of a prompt, greedy or sampled (unseeded: such requests get drafts too).
engine::EngineRequest request(const std::string& id, const std::vector<int32_t>& prompt,
                              float temperature) {
  auto r = greedy_request(id, prompt, 16);
  r.params.temperature = temperature;
  return r;
}

// With `log`: the drafts proposed for each request, and (in `prompts`) each request's prompt.
RunResult run(const engine::EngineConfig& cfg, bool together, float temperature = 0,
              std::map<std::string, std::vector<Proposal>>* log = nullptr,
              std::map<std::string, std::vector<int32_t>>* ids = nullptr) {
  RunResult out;
  auto factory = engine::default_executor_factory();
  auto engine = engine::Engine::create(
      cfg, [&](const engine::WorkerConfig& wc) -> Result<std::unique_ptr<engine::Executor>> {
        STRATA_ASSIGN_OR_RETURN(auto inner, factory(wc));
        if (log == nullptr) return inner;
        return std::unique_ptr<engine::Executor>(new RecordingExecutor(std::move(inner), log, ids));
      });
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return out;
  auto client = engine::EngineClient::start(std::move(engine).value());
  const auto prompts = make_prompts();
  if (together) {
    std::vector<engine::EngineRequest> batch;
    for (size_t i = 0; i + 1 < prompts.size(); ++i)
      batch.push_back(request("b" + std::to_string(i), prompts[i], temperature));
    for (auto& s : testing::submit_together(*client, std::move(batch)))
      out.tokens.push_back(collect(*s)[0].tokens);
    EXPECT_TRUE(testing::wait_idle(*client));
  }
  for (size_t i = together ? prompts.size() - 1 : 0; i < prompts.size(); ++i) {
    out.tokens.push_back(
        collect(**client->submit(request("a" + std::to_string(i), prompts[i], temperature)))[0]
            .tokens);
    EXPECT_TRUE(testing::wait_idle(*client));
  }
  out.stats = client->stats();
  return out;
}

TEST(MtpEngine, GreedyOutputIsPlainDecoding) {
  const std::string dir = testing::write_tiny_config(mtp_config_json());
  for (bool together : {false, true}) {
    SCOPED_TRACE(together ? "batched, chunked, preempted" : "alone");
    const RunResult plain = run(config_for(dir, 0, 1024), together);
    ASSERT_EQ(plain.tokens.size(), make_prompts().size());
    for (int64_t k : {1, 3}) {
      SCOPED_TRACE("num_speculative_tokens " + std::to_string(k));
      const RunResult spec = run(config_for(dir, k, together ? 120 : 1024), together);
      ASSERT_EQ(spec.tokens.size(), plain.tokens.size());
      for (size_t i = 0; i < plain.tokens.size(); ++i)
        EXPECT_EQ(spec.tokens[i], plain.tokens[i]) << "request " << i;
      EXPECT_GT(spec.stats.spec_num_drafts, 10);
      if (together) EXPECT_GT(spec.stats.num_preemptions, 0);
      EXPECT_GT(spec.stats.prefix_cache_hits, 0);
    }
  }
}

// The one-shot reference of the first draft after position p: the MTP layer's argmax at row p of
// a forward over the final sequence.
std::vector<int32_t> reference_first_drafts(const std::string& dir, const engine::EngineConfig& cfg,
                                            const std::vector<int32_t>& seq) {
  auto backend = CpuBackend::create({.kernels = cfg.kernels, .threads = 2});
  EXPECT_TRUE(backend.ok());
  LoadOptions lo;
  lo.model = dir;
  lo.load_format = "dummy";
  lo.seed = cfg.model.seed;
  lo.pool = &(*backend)->pool();
  lo.limits = {256, 256, 16};
  auto target = load_model(lo);
  lo.mtp_module = true;
  auto mtp = load_model(lo);
  EXPECT_TRUE(target.ok() && mtp.ok());
  if (!target.ok() || !mtp.ok()) return {};
  const int64_t n = static_cast<int64_t>(seq.size()), bs = 8, blocks = n / bs + 2;
  auto storage_for = [&](Model& m) {
    const KvSpec ks = m.kv_spec();
    return KvStorage::allocate({ks.num_layers, blocks + 1, bs, ks.num_kv_heads, ks.head_dim,
                                DType::kBF16, ks.has_v, ks.aux_dim});
  };
  auto ts = storage_for(*target->model);
  auto ms = storage_for(*mtp->model);
  EXPECT_TRUE(ts.ok() && ms.ok());
  auto one_entry = [&](std::span<const int32_t> tokens) {
    sched::StepPlan p;
    sched::ScheduledRequest e;
    e.request_id = "ref";
    e.num_scheduled_tokens = static_cast<int64_t>(tokens.size());
    e.new_block_table = true;
    e.will_sample = true;
    e.block_ids_count = static_cast<uint32_t>(blocks);
    p.scheduled.push_back(e);
    p.token_ids.assign(tokens.begin(), tokens.end());
    for (int64_t b = 1; b <= blocks; ++b) p.block_ids.push_back(static_cast<kv::BlockId>(b));
    return p;
  };
  const KernelOps& ops = (*backend)->ops();
  const int64_t V = target->model->config().vocab_size, H = target->model->config().hidden_size;
  std::vector<float> logits(16 * V), hidden(n * H);
  engine::ModelRunner tr(*target->model, *ts, ops);
  EXPECT_TRUE(tr.execute(one_entry(seq), logits.data()).ok());
  std::vector<int32_t> rows(n - 1);
  for (int64_t i = 0; i + 1 < n; ++i) rows[i] = static_cast<int32_t>(i);
  EXPECT_TRUE(target->model->hidden_states(rows, true, ops, hidden.data()).ok());
  engine::ModelRunner mr(*mtp->model, *ms, ops);
  EXPECT_TRUE(mr.execute(one_entry(std::span(seq).subspan(1)), logits.data(),
                         std::span<const float>(hidden).first((n - 1) * H))
                  .ok());
  std::vector<int32_t> out;
  for (int64_t r = 0; r + 1 < n; r += 16) {
    const int64_t cnt = std::min<int64_t>(16, n - 1 - r);
    EXPECT_TRUE(mr.logits_for_rows(std::span(rows).subspan(r, cnt), logits.data()).ok());
    for (int64_t j = 0; j < cnt; ++j)
      out.push_back(static_cast<int32_t>(
          std::max_element(logits.begin() + j * V, logits.begin() + (j + 1) * V) -
          (logits.begin() + j * V)));
  }
  return out;
}

// Greedy, and sampled (the verified token, not the row's own draw, must be what the layer sees
// as the next token).
TEST(MtpEngine, DraftsAreThoseOfAOneShotReference) {
  const std::string dir = testing::write_tiny_config(mtp_config_json());
  const auto cfg = config_for(dir, 2, 120);
  for (float temperature : {0.0f, 1.0f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    std::map<std::string, std::vector<Proposal>> log;
    std::map<std::string, std::vector<int32_t>> ids;
    const RunResult spec = run(cfg, /*together=*/true, temperature, &log, &ids);
    const auto prompts = make_prompts();
    ASSERT_EQ(spec.tokens.size(), prompts.size());
    int64_t checked = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::string id;
      for (const auto& [rid, prompt] : ids)
        if (prompt == prompts[i]) id = rid;
      ASSERT_FALSE(id.empty()) << "prompt " << i << " never reached the workers";
      std::vector<int32_t> seq = prompts[i];
      seq.insert(seq.end(), spec.tokens[i].begin(), spec.tokens[i].end());
      const auto ref = reference_first_drafts(dir, cfg, seq);
      ASSERT_EQ(ref.size(), seq.size() - 1);
      for (const Proposal& p : log[id]) {
        if (p.last + 1 >= static_cast<int64_t>(ref.size())) continue;  // after the request's end
        EXPECT_EQ(p.drafts.front(), ref[p.last]) << id << " after position " << p.last;
        ++checked;
      }
    }
    EXPECT_GT(checked, 40);
    EXPECT_GT(spec.stats.num_preemptions, 0);
  }
}

// Unseeded sampled requests get MTP drafts too, verified by rejection sampling: the tokens keep
// the distribution of plain sampling (a two-sample chi-square test at three output positions over
// 1200 requests each; fixed engine seeds: deterministic).
TEST(MtpEngine, SampledOutputHasThePlainDistribution) {
  const std::string dir = testing::write_tiny_config(mtp_config_json());
  constexpr int kRequests = 1200;
  constexpr int kPositions[] = {2, 5, 9};
  std::vector<std::map<int32_t, int64_t>> counts[2];
  engine::EngineStats stats[2];
  for (int spec = 0; spec < 2; ++spec) {
    auto cfg = config_for(dir, spec == 1 ? 2 : 0, 1024);
    cfg.seed = 21 + spec;
    auto client = engine::EngineClient::create(cfg);
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    counts[spec].resize(std::size(kPositions));
    for (int i = 0; i < kRequests; ++i) {
      auto r = greedy_request("r" + std::to_string(i), make_prompts()[0], 12);
      r.params.temperature = 1.0f;
      const auto out = collect(**(*client)->submit(r))[0].tokens;
      ASSERT_EQ(out.size(), 12u);
      for (size_t k = 0; k < std::size(kPositions); ++k) ++counts[spec][k][out[kPositions[k]]];
    }
    ASSERT_TRUE(testing::wait_idle(**client));
    stats[spec] = (*client)->stats();
  }
  EXPECT_EQ(stats[0].spec_num_drafts, 0);
  EXPECT_GT(stats[1].spec_num_draft_tokens, 500) << "sampled requests should get MTP drafts";
  for (size_t k = 0; k < std::size(kPositions); ++k) {
    const auto chi = testing::two_sample_chi_square(counts[0][k], counts[1][k]);
    ASSERT_GT(chi.dof, 0);
    EXPECT_LT(chi.statistic, chi.critical) << "output position " << kPositions[k] << ": chi-square "
                                           << chi.statistic << " with " << chi.dof << " dof";
  }
}

TEST(MtpEngine, AModelWithoutAnMtpLayerIsAStartUpError) {
  auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy", 8 << 20);
  c.scheduler.max_model_len = 256;
  c.scheduler.speculative = {.method = "deepseek_mtp", .num_speculative_tokens = 1};
  auto e = engine::Engine::create(c);
  ASSERT_FALSE(e.ok());
  const std::string& m = e.status().message();
  EXPECT_NE(m.find("--speculative-config deepseek_mtp"), std::string::npos) << m;
  EXPECT_NE(m.find("no multi-token-prediction layer"), std::string::npos) << m;
}

}  // namespace
}  // namespace strata

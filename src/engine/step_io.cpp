#include "engine/step_io.h"

#include "core/byte_io.h"
#include "core/check.h"

namespace strata::engine {
namespace {

void write_params(ByteWriter& w, const sampling::SamplingParams& p) {
  w.i32(p.n);
  w.f32(p.temperature);
  w.f32(p.top_p);
  w.i32(p.top_k);
  w.f32(p.min_p);
  w.f32(p.presence_penalty);
  w.f32(p.frequency_penalty);
  w.f32(p.repetition_penalty);
  w.boolean(p.seed.has_value());
  w.i64(p.seed.value_or(0));
  w.strings(p.stop);
  w.vec(p.stop_token_ids);
  w.boolean(p.include_stop_str_in_output);
  w.boolean(p.ignore_eos);
  w.boolean(p.max_tokens.has_value());
  w.i32(p.max_tokens.value_or(0));
  w.i32(p.min_tokens);
  w.boolean(p.logprobs.has_value());
  w.i32(p.logprobs.value_or(0));
  w.boolean(p.prompt_logprobs.has_value());
  w.i32(p.prompt_logprobs.value_or(0));
  w.boolean(p.skip_special_tokens);
  w.boolean(p.spaces_between_special_tokens);
  w.u64(p.logit_bias.size());
  for (const auto& [id, bias] : p.logit_bias) {
    w.i32(id);
    w.f32(bias);
  }
}

sampling::SamplingParams read_params(ByteReader& r) {
  sampling::SamplingParams p;
  p.n = r.i32();
  p.temperature = r.f32();
  p.top_p = r.f32();
  p.top_k = r.i32();
  p.min_p = r.f32();
  p.presence_penalty = r.f32();
  p.frequency_penalty = r.f32();
  p.repetition_penalty = r.f32();
  const bool has_seed = r.boolean();
  const int64_t seed = r.i64();
  if (has_seed) p.seed = seed;
  p.stop = r.strings();
  p.stop_token_ids = r.vec<int32_t>();
  p.include_stop_str_in_output = r.boolean();
  p.ignore_eos = r.boolean();
  const bool has_max = r.boolean();
  const int32_t max_tokens = r.i32();
  p.max_tokens = has_max ? std::optional<int>(max_tokens) : std::nullopt;
  p.min_tokens = r.i32();
  const bool has_lp = r.boolean();
  const int32_t lp = r.i32();
  p.logprobs = has_lp ? std::optional<int>(lp) : std::nullopt;
  const bool has_plp = r.boolean();
  const int32_t plp = r.i32();
  p.prompt_logprobs = has_plp ? std::optional<int>(plp) : std::nullopt;
  p.skip_special_tokens = r.boolean();
  p.spaces_between_special_tokens = r.boolean();
  const uint64_t n = r.count(8);
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    const int32_t id = r.i32();
    p.logit_bias[id] = r.f32();
  }
  return p;
}

void write_logprobs(ByteWriter& w, const sampling::TokenLogprobs& t) {
  auto one = [&](const sampling::Logprob& l) {
    w.i32(l.token_id);
    w.f32(l.logprob);
    w.i32(l.rank);
  };
  one(t.chosen);
  w.u64(t.top.size());
  for (const auto& l : t.top) one(l);
}

sampling::TokenLogprobs read_logprobs(ByteReader& r) {
  auto one = [&] {
    sampling::Logprob l;
    l.token_id = r.i32();
    l.logprob = r.f32();
    l.rank = r.i32();
    return l;
  };
  sampling::TokenLogprobs t;
  t.chosen = one();
  const uint64_t n = r.count(12);
  for (uint64_t i = 0; i < n && r.ok(); ++i) t.top.push_back(one());
  return t;
}

}  // namespace

std::string encode_step_input(const StepInput& in) {
  ByteWriter w;
  w.str(sched::encode_step_plan(in.plan));
  w.u64(in.new_requests.size());
  for (const NewRequestData& n : in.new_requests) {
    w.str(n.request_id);
    w.vec(n.prompt_token_ids);
    write_params(w, n.params);
    w.boolean(n.wants_prompt_logprobs);
    w.boolean(n.speculate);
    // Only the in-process executor carries constrained requests so far (see step_io.h).
    STRATA_CHECK(n.constraint == nullptr)
        << "a structured-output request cannot be sent to another process yet";
  }
  return w.take();
}

Result<StepInput> decode_step_input(std::string_view bytes) {
  ByteReader r(bytes, "step input");
  const std::string plan_bytes = r.str();
  StepInput in;
  const uint64_t n = r.count(8 + 8 + 5);
  in.new_requests.resize(n);
  for (NewRequestData& d : in.new_requests) {
    d.request_id = r.str();
    d.prompt_token_ids = r.vec<int32_t>();
    d.params = read_params(r);
    d.wants_prompt_logprobs = r.boolean();
    d.speculate = r.boolean();
  }
  STRATA_RETURN_IF_ERROR(r.finish());
  STRATA_ASSIGN_OR_RETURN(in.plan, sched::decode_step_plan(plan_bytes));
  return in;
}

std::string encode_step_output(const StepOutput& out) {
  ByteWriter w;
  w.u64(out.entries.size());
  for (const SampledEntry& e : out.entries) {
    w.i32(e.token_id);
    w.vec(e.accepted_token_ids);
    w.vec(e.draft_token_ids);
    w.boolean(e.has_logprobs);
    if (e.has_logprobs) write_logprobs(w, e.logprobs);
    w.u64(e.prompt_logprobs.size());
    for (const auto& t : e.prompt_logprobs) write_logprobs(w, t);
  }
  w.pod(out.forward_seconds);
  w.pod(out.sample_seconds);
  w.pod(out.comm_seconds);
  w.u64(out.kv_loads_done.size());
  for (const kv::KvLoadResult& l : out.kv_loads_done) {
    w.i32(l.block);
    w.boolean(l.ok);
    w.u32(static_cast<uint32_t>(l.tier));
  }
  return w.take();
}

Result<StepOutput> decode_step_output(std::string_view bytes) {
  ByteReader r(bytes, "step output");
  StepOutput out;
  const uint64_t n = r.count(4 + 8 + 8 + 1 + 8);
  out.entries.resize(n);
  for (SampledEntry& e : out.entries) {
    e.token_id = r.i32();
    e.accepted_token_ids = r.vec<int32_t>();
    e.draft_token_ids = r.vec<int32_t>();
    e.has_logprobs = r.boolean();
    if (e.has_logprobs) e.logprobs = read_logprobs(r);
    const uint64_t m = r.count(12 + 8);
    for (uint64_t i = 0; i < m && r.ok(); ++i) e.prompt_logprobs.push_back(read_logprobs(r));
  }
  out.forward_seconds = r.pod<double>();
  out.sample_seconds = r.pod<double>();
  out.comm_seconds = r.pod<double>();
  const uint64_t loads = r.count(4 + 1 + 4);
  for (uint64_t i = 0; i < loads && r.ok(); ++i) {
    kv::KvLoadResult l;
    l.block = r.i32();
    l.ok = r.boolean();
    const uint32_t tier = r.u32();
    if (tier > static_cast<uint32_t>(kv::Tier::kDisk)) return data_loss("step output: bad KV tier");
    l.tier = static_cast<kv::Tier>(tier);
    out.kv_loads_done.push_back(l);
  }
  STRATA_RETURN_IF_ERROR(r.finish());
  return out;
}

}  // namespace strata::engine

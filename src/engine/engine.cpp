#include "engine/engine.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "core/clock.h"
#include "core/file_util.h"
#include "core/json.h"
#include "core/logging.h"
#include "core/strings.h"

namespace strata::engine {

// One sequence of a request (n > 1 requests have several).
struct Engine::Choice {
  RequestState* request = nullptr;
  int index = 0;
  std::string seq_id;  // the scheduler's request id
  sampling::SamplingParams params;
  std::unique_ptr<IncrementalDetokenizer> detok;
  std::unique_ptr<sampling::StopStringMatcher> matcher;
  bool wants_prompt_logprobs = false;
  bool finished = false;
  int64_t num_output_tokens = 0;
  bool first_chunk = true;
  std::vector<std::optional<sampling::TokenLogprobs>> prompt_logprobs;
  const SampledEntry* pending_sample = nullptr;  // this step's sample, if any
  bool sent_to_workers = false;                  // its NewRequestData went out
  // Step trace: whether it has been scheduled yet, and its event in the current record.
  bool trace_scheduled = false;
  uint64_t trace_attempt = 0;  // Engine::trace_attempt_ when trace_event was set
  size_t trace_event = 0;
};

struct Engine::RequestState {
  EngineRequest request;
  std::shared_ptr<RequestStream> stream;
  std::vector<std::unique_ptr<Choice>> choices;
  int num_finished = 0;
  double arrival = 0;  // engine clock
};

namespace {

// Sampling defaults from `dir`/generation_config.json (vLLM's --generation-config auto, or a
// folder).
void apply_generation_config(const std::string& dir, sampling::SamplingParams* p,
                             std::vector<int32_t>* eos) {
  std::string path = path_join(dir, "generation_config.json");
  if (!file_exists(path)) return;
  auto j = read_json_file(path);
  if (!j.ok() || !j->is_object()) {
    STRATA_LOG(WARNING) << "ignoring unreadable " << path;
    return;
  }
  const Json& g = *j;
  auto num = [&](const char* k) { return g.contains(k) && g[k].is_number(); };
  if (num("temperature")) p->temperature = g["temperature"].get<float>();
  if (num("top_p")) p->top_p = g["top_p"].get<float>();
  if (num("top_k")) p->top_k = g["top_k"].get<int>();
  if (num("min_p")) p->min_p = g["min_p"].get<float>();
  if (num("repetition_penalty")) p->repetition_penalty = g["repetition_penalty"].get<float>();
  if (g.contains("eos_token_id")) {
    const Json& e = g["eos_token_id"];
    if (e.is_number_integer()) eos->push_back(e.get<int32_t>());
    if (e.is_array())
      for (const auto& x : e)
        if (x.is_number_integer()) eos->push_back(x.get<int32_t>());
  }
}

sched::StopConfig stop_config(const sampling::SamplingParams& p, const std::vector<int32_t>& eos) {
  sched::StopConfig s;
  s.max_tokens = p.max_tokens.value_or(0);
  s.min_tokens = p.min_tokens;
  s.eos_token_ids = eos;
  s.stop_token_ids = p.stop_token_ids;
  s.ignore_eos = p.ignore_eos;
  return s;
}

// The EOS ids of the model (config.json, generation_config.json per --generation-config, the
// tokenizer's), sorted and unique; the generation config's sampling defaults go to *defaults.
Result<std::vector<int32_t>> resolve_eos_ids(const EngineConfig& c, const ModelConfig& mc,
                                             const Tokenizer* tokenizer,
                                             sampling::SamplingParams* defaults) {
  std::vector<int32_t> eos = mc.eos_token_ids;
  if (c.generation_config == "auto") {
    if (is_directory(c.model.model)) apply_generation_config(c.model.model, defaults, &eos);
  } else if (c.generation_config != "vllm" && c.generation_config != "none") {
    if (!file_exists(path_join(c.generation_config, "generation_config.json")))
      return invalid_argument("--generation-config " + c.generation_config +
                              ": no generation_config.json in that folder");
    apply_generation_config(c.generation_config, defaults, &eos);
  }
  if (tokenizer != nullptr && tokenizer->eos_token_id()) eos.push_back(*tokenizer->eos_token_id());
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
  return eos;
}

}  // namespace

Result<WorkerConfig> resolve_worker_config(const EngineConfig& config) {
  WorkerConfig wc;
  wc.engine = config;
  STRATA_ASSIGN_OR_RETURN(ModelConfig mc, load_model_config(wc.engine.model));
  STRATA_RETURN_IF_ERROR(resolve_engine_config(mc, &wc.engine));
  const std::string tok_path = config.tokenizer.empty() ? config.model.model : config.tokenizer;
  auto tok = Tokenizer::load(tok_path);
  if (!tok.ok() && !config.tokenizer.empty()) return tok.status().with_context("--tokenizer");
  sampling::SamplingParams defaults;
  STRATA_ASSIGN_OR_RETURN(
      wc.eos_token_ids, resolve_eos_ids(wc.engine, mc, tok.ok() ? tok->get() : nullptr, &defaults));
  return wc;
}

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config_in,
                                               ExecutorFactory executor_factory) {
  std::unique_ptr<Engine> e(new Engine());
  e->config_ = config_in;
  EngineConfig& c = e->config_;

  // Model config first: max_model_len defaults to the model's, and it sizes the workspaces.
  STRATA_ASSIGN_OR_RETURN(e->model_config_, load_model_config(c.model));
  const ModelConfig& mc = e->model_config_;
  STRATA_RETURN_IF_ERROR(resolve_engine_config(mc, &c));
  const auto& sc = c.scheduler;

  // The step trace's file first: a bad path fails before the model loads.
  if (!c.step_trace.empty()) {
    STRATA_ASSIGN_OR_RETURN(e->trace_, StepTraceWriter::open(c.step_trace));
  }

  // Tokenizer: optional for dummy models run on token ids.
  std::string tok_path = c.tokenizer.empty() ? c.model.model : c.tokenizer;
  auto tok = Tokenizer::load(tok_path);
  if (tok.ok()) {
    e->tokenizer_ = std::move(tok).value();
  } else if (!c.tokenizer.empty()) {
    return tok.status().with_context("--tokenizer");
  } else {
    STRATA_LOG(WARNING) << "no tokenizer for " << tok_path << " (" << tok.status().message()
                        << "): requests must give token ids and outputs have no text";
  }

  // EOS ids: config.json, generation_config.json and the tokenizer.
  STRATA_ASSIGN_OR_RETURN(e->eos_ids_, resolve_eos_ids(c, mc, e->tokenizer_.get(), &e->defaults_));

  // The workers load the model and size the KV pool.
  WorkerConfig wc;
  wc.engine = c;
  wc.eos_token_ids = e->eos_ids_;
  STRATA_ASSIGN_OR_RETURN(e->executor_, executor_factory(wc));
  const WorkerInfo& wi = e->executor_->info();
  const MemoryPlan& plan = wi.memory;
  STRATA_LOG(INFO) << "KV cache: " << plan.num_blocks << " blocks x " << plan.block_size
                   << " tokens = " << plan.num_tokens() << " tokens; max_model_len "
                   << sc.max_model_len << ", max_num_seqs " << sc.max_num_seqs
                   << ", prefix caching " << (c.cache.enable_prefix_caching ? "on" : "off");
  c.cache.block_size = plan.block_size;  // the workers' (resolve_block_size())
  if (plan.max_running_seqs > 0 && plan.max_running_seqs < sc.max_num_seqs) {
    STRATA_LOG(WARNING) << "max_num_seqs lowered from " << sc.max_num_seqs << " to "
                        << plan.max_running_seqs << ": each running sequence keeps "
                        << format_bytes(static_cast<double>(plan.state_bytes_per_slot))
                        << " of state and only that many slots fit in half of the KV memory "
                        << "left after one max_model_len sequence; raise --kv-cache-memory / "
                        << "--gpu-memory-utilization or lower --max-model-len for more";
    c.scheduler.max_num_seqs = plan.max_running_seqs;
  }
  STRATA_ASSIGN_OR_RETURN(e->scheduler_,
                          sched::Scheduler::create(sc, c.cache, plan.num_blocks + 1));
  if (plan.num_state_slots > 0)
    STRATA_RETURN_IF_ERROR(e->scheduler_->enable_state_slots(
        plan.num_state_slots - plan.num_snapshot_slots, plan.num_snapshot_slots));
  e->scheduler_->set_kv_tiers(e->executor_->kv_tiers());
  e->depth_ = std::max(1, e->executor_->max_concurrent_batches());
  e->scheduler_->set_pipeline_depth(e->depth_);
  if (e->depth_ > 1)
    STRATA_LOG(INFO) << "Pipeline overlap: up to " << e->depth_
                     << " micro-batches in flight (STRATA_PP_MAX_INFLIGHT=1 turns it off)";
  if (sc.speculative.enabled())
    STRATA_LOG(INFO) << "Speculative decoding: " << sc.speculative.method << ", "
                     << sc.speculative.num_speculative_tokens << " draft tokens per step, "
                     << (sc.speculative.uses_draft_model()
                             ? "proposed by the draft model " + sc.speculative.draft_model
                             : "prompt lookup of " +
                                   std::to_string(sc.speculative.prompt_lookup_min) + ".." +
                                   std::to_string(sc.speculative.prompt_lookup_max) + " tokens")
                     << (sc.speculative.disable_by_batch_size > 0
                             ? ", none in steps with " +
                                   std::to_string(sc.speculative.disable_by_batch_size) +
                                   " or more requests"
                             : std::string())
                     << " (greedy and unseeded sampled requests)";

  EngineInfo& info = e->info_;
  info.model_path = c.model.model;
  info.tokenizer_path = tok_path;
  info.tokenizer = e->tokenizer_;
  info.max_model_len = sc.max_model_len;
  info.vocab_size = mc.vocab_size;
  info.max_num_seqs = sc.max_num_seqs;
  info.priority_scheduling = sc.policy == sched::SchedulingPolicy::kPriority;
  info.default_sampling_params = e->defaults_;
  info.eos_token_ids = e->eos_ids_;
  info.backend = wi.backend;
  info.threads = wi.threads;
  info.kv_cache_tokens = plan.num_tokens();
  if (e->trace_ != nullptr) {
    e->trace_last_step_end_ = now_seconds();
    STRATA_LOG(INFO) << "Step trace: appending one line per step to " << c.step_trace;
  }
  STRATA_LOG(INFO) << "Engine ready: " << wi.threads << " threads, " << wi.backend << " kernels";
  return e;
}

Status Engine::validate(const EngineRequest& r, std::string* bad_field) const {
  if (bad_field != nullptr) *bad_field = "prompt";  // until the prompt checks pass
  const int64_t V = model_config_.vocab_size;
  if (r.prompt_token_ids.empty()) return invalid_argument("the prompt is empty");
  for (int32_t id : r.prompt_token_ids)
    if (id < 0 || id >= V)
      return invalid_argument("prompt token id " + std::to_string(id) +
                              " is outside the vocabulary (0.." + std::to_string(V - 1) + ")");
  const int64_t n = static_cast<int64_t>(r.prompt_token_ids.size());
  if (n >= max_model_len())
    return out_of_range("This model's maximum context length is " +
                        std::to_string(max_model_len()) + " tokens. However, you requested " +
                        std::to_string(n) + " tokens in the prompt (" + std::to_string(n) +
                        " + at least 1 to generate). Please reduce the length of the prompt.");
  if (r.params.max_tokens && n + *r.params.max_tokens > max_model_len())
    return out_of_range("This model's maximum context length is " +
                        std::to_string(max_model_len()) + " tokens. However, you requested " +
                        std::to_string(n + *r.params.max_tokens) + " tokens (" + std::to_string(n) +
                        " in the messages, " + std::to_string(*r.params.max_tokens) +
                        " in the completion). Please reduce the length of the messages or "
                        "completion.");
  if (n + 1 > info_.kv_cache_tokens)
    return resource_exhausted("the prompt needs " + std::to_string(n + 1) +
                              " KV slots but the whole KV cache holds " +
                              std::to_string(info_.kv_cache_tokens) + " tokens");
  if (bad_field != nullptr) bad_field->clear();
  STRATA_RETURN_IF_ERROR(r.params.validate(V, config_.max_logprobs, bad_field));
  if (r.detokenize && !tokenizer_ && !r.params.stop.empty()) {
    if (bad_field != nullptr) *bad_field = "stop";
    return invalid_argument("stop strings need a tokenizer, and this model has none");
  }
  if (r.constraint != nullptr && !executor_->supports_constraints()) {
    if (bad_field != nullptr) *bad_field = "response_format";
    return invalid_argument(
        "structured outputs (response_format, guided decoding, required or named tool calls) are "
        "not supported with tensor or pipeline parallelism yet: serve the model on one rank for "
        "them");
  }
  return ok_status();
}

Status Engine::add_request(EngineRequest request, std::shared_ptr<RequestStream> stream) {
  STRATA_RETURN_IF_ERROR(validate(request));
  if (requests_.count(request.request_id))
    return invalid_argument("request id '" + request.request_id + "' is already in use");
  auto state = std::make_unique<RequestState>();
  RequestState* r = state.get();
  r->stream = std::move(stream);
  r->request = std::move(request);
  const EngineRequest& req = r->request;
  const double arrival = req.arrival_time >= 0 ? req.arrival_time : now_seconds();
  r->arrival = arrival;
  const uint64_t seq = next_seq_++;
  std::string salt = req.cache_salt;
  // Prompt logprobs need the prompt computed, so such requests never take cached blocks.
  if (req.params.prompt_logprobs) salt = "\x01prompt-logprobs:" + std::to_string(seq);
  for (int i = 0; i < req.params.n; ++i) {
    auto c = std::make_unique<Choice>();
    c->request = r;
    c->index = i;
    c->seq_id = std::to_string(seq) + (req.params.n > 1 ? "/" + std::to_string(i) : "");
    c->params = req.params.n > 1 ? req.params.child(i) : req.params;
    c->wants_prompt_logprobs = i == 0 && c->params.prompt_logprobs.has_value();
    if (req.detokenize && tokenizer_)
      c->detok = std::make_unique<IncrementalDetokenizer>(tokenizer_, req.prompt_token_ids,
                                                          c->params.skip_special_tokens);
    if (!c->params.stop.empty())
      c->matcher = std::make_unique<sampling::StopStringMatcher>(
          c->params.stop, c->params.include_stop_str_in_output);
    sched::RequestSpec spec;
    spec.request_id = c->seq_id;
    spec.prompt_token_ids = req.prompt_token_ids;
    spec.stop = stop_config(c->params, eos_ids_);
    spec.priority = req.priority;
    spec.arrival_time = arrival;
    spec.cache_salt = salt;
    if (i > 0) spec.sibling_of = r->choices[0]->seq_id;
    spec.user_data = reinterpret_cast<uintptr_t>(c.get());
    // Drafts are verified on the logits alone (greedy choice, or rejection sampling for
    // unseeded sampled requests): requests whose next token depends on anything else
    // (penalties over the history, min_tokens, a grammar), seeded ones (a seed must give the
    // same tokens in any batch, and drafts depend on the batch's budget) and those wanting
    // logprobs decode plainly.
    const sampling::SamplingParams& p = c->params;
    spec.speculate = (p.is_greedy() || !p.seed) && p.repetition_penalty == 1.0f &&
                     p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f &&
                     p.min_tokens == 0 && !p.logprobs && !p.prompt_logprobs &&
                     req.constraint == nullptr;
    Status s = scheduler_->add_request(std::move(spec));
    if (!s.ok()) {
      for (auto& prev : r->choices) (void)scheduler_->abort_request(prev->seq_id);
      return s;
    }
    r->choices.push_back(std::move(c));
  }
  requests_[r->request.request_id] = std::move(state);
  return ok_status();
}

void Engine::finish_choice(Choice& c, OutputChunk& chunk, const std::string& reason) {
  c.finished = true;
  chunk.finished = true;
  chunk.finish_reason = reason;
  if (reason == "stop")
    ++finished_stop_;
  else if (reason == "length")
    ++finished_length_;
  else
    ++finished_abort_;
  c.request->num_finished++;
}

void Engine::release_if_done(RequestState* r) {
  if (r->num_finished == static_cast<int>(r->choices.size()))
    requests_.erase(r->request.request_id);
}

void Engine::abort_request(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  RequestState* r = it->second.get();
  for (auto& c : r->choices) {
    if (c->finished) continue;
    (void)scheduler_->abort_request(c->seq_id);
    OutputChunk chunk;
    chunk.index = c->index;
    chunk.num_prompt_tokens = static_cast<int64_t>(r->request.prompt_token_ids.size());
    chunk.num_output_tokens = c->num_output_tokens;
    chunk.time = now_seconds();
    finish_choice(*c, chunk, "abort");
    r->stream->push(std::move(chunk));
  }
  release_if_done(r);
}

void Engine::abort_all(const Status& why) {
  std::vector<std::string> ids;
  for (auto& [id, r] : requests_) ids.push_back(id);
  for (const auto& id : ids) {
    RequestState* r = requests_[id].get();
    for (auto& c : r->choices) {
      if (c->finished) continue;
      (void)scheduler_->abort_request(c->seq_id);
      OutputChunk chunk;
      chunk.index = c->index;
      chunk.num_prompt_tokens = static_cast<int64_t>(r->request.prompt_token_ids.size());
      chunk.num_output_tokens = c->num_output_tokens;
      chunk.time = now_seconds();
      chunk.error = why;
      finish_choice(*c, chunk, "abort");
      r->stream->push(std::move(chunk));
    }
    release_if_done(r);
  }
}

void Engine::pause_request(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  for (auto& c : it->second->choices)
    if (!c->finished) (void)scheduler_->pause_request(c->seq_id);
}

void Engine::resume_request(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  for (auto& c : it->second->choices)
    if (!c->finished) (void)scheduler_->resume_request(c->seq_id);
}

void Engine::emit(Choice& c, const sched::RequestOutput& out, const SampledEntry* sample) {
  RequestState* r = c.request;
  OutputChunk chunk;
  chunk.index = c.index;
  chunk.num_prompt_tokens = static_cast<int64_t>(r->request.prompt_token_ids.size());
  chunk.time = now_seconds();
  const int32_t tok = out.new_token_id;
  chunk.token_ids.push_back(tok);
  c.num_output_tokens = out.num_output_tokens;
  chunk.num_output_tokens = c.num_output_tokens;
  if (sample != nullptr && sample->has_logprobs) chunk.logprobs.push_back(sample->logprobs);
  if (c.first_chunk) {
    c.first_chunk = false;
    if (c.wants_prompt_logprobs) chunk.prompt_logprobs = std::move(c.prompt_logprobs);
  }
  const bool stopped_by_token = out.finish_reason == sched::FinishReason::kStop;
  if (stopped_by_token && out.stop_token_id != sched::kNoToken)
    chunk.stop_reason = out.stop_token_id;
  std::string reason = out.finished() ? sched::finish_reason_name(out.finish_reason) : "";
  if (c.detok) {
    std::string delta;
    // The token that stopped the request adds no text (vLLM), unless asked for.
    if (!(stopped_by_token && !c.params.include_stop_str_in_output)) delta = c.detok->add(tok);
    if (out.finished()) delta += c.detok->flush();
    if (c.matcher) {
      auto upd =
          c.matcher->feed(delta, sampling::stop_strings_active(c.params, c.num_output_tokens));
      chunk.text = std::string(upd.text);
      if (upd.stopped) {
        if (!out.finished()) (void)scheduler_->finish_request(c.seq_id, sched::FinishReason::kStop);
        reason = "stop";
        chunk.stop_reason = c.params.stop[upd.stop_index];
      } else if (out.finished()) {
        chunk.text += std::string(c.matcher->flush());
      }
    } else {
      chunk.text = std::move(delta);
    }
  }
  if (!reason.empty()) {
    chunk.times.arrival = out.times.arrival;
    chunk.times.first_scheduled = out.times.first_scheduled;
    chunk.times.first_token = out.times.first_token;
    chunk.times.last_token = out.times.last_token;
    chunk.times.finished = chunk.time;
    finish_choice(c, chunk, reason);
  }
  r->stream->push(std::move(chunk));
}

void Engine::plan_batch(Batch& b, StepTraceRecord* tr, bool* run) {
  b.t_start = tr != nullptr ? now_seconds() : 0;
  sched::StepPlan& plan = b.input.plan;
  plan = scheduler_->schedule();
  *run = false;
  // Nothing to run: every unfinished request is paused or in flight (or none is left). A plan
  // that only moves KV blocks, or that waits for loads in flight, still goes to the executor.
  if (plan.empty() && plan.kv_stores.empty() && plan.kv_loads.empty() &&
      !scheduler_->has_kv_loads_in_flight()) {
    unsent_finished_.insert(unsent_finished_.end(), plan.finished_ids.begin(),
                            plan.finished_ids.end());
    unsent_preempted_.insert(unsent_preempted_.end(), plan.preempted_ids.begin(),
                             plan.preempted_ids.end());
    return;
  }
  *run = true;
  b.t_scheduled = tr != nullptr ? now_seconds() : 0;
  if (!unsent_finished_.empty() || !unsent_preempted_.empty()) {
    plan.finished_ids.insert(plan.finished_ids.begin(), unsent_finished_.begin(),
                             unsent_finished_.end());
    plan.preempted_ids.insert(plan.preempted_ids.begin(), unsent_preempted_.begin(),
                              unsent_preempted_.end());
    unsent_finished_.clear();
    unsent_preempted_.clear();
  }
  // Requests the workers have not seen yet travel with the plan, once.
  b.input.new_requests.clear();
  std::vector<Choice*>& choices = b.choices;
  choices.assign(plan.scheduled.size(), nullptr);
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const auto& s = plan.scheduled[i];
    const sched::Request* req = scheduler_->get(s.handle);
    STRATA_CHECK(req != nullptr) << "scheduled request " << s.request_id << " is unknown";
    Choice* c = reinterpret_cast<Choice*>(req->user_data());
    choices[i] = c;
    if (c->sent_to_workers) continue;
    c->sent_to_workers = true;
    NewRequestData& n = b.input.new_requests.emplace_back();
    n.request_id = s.request_id;
    n.prompt_token_ids = c->request->request.prompt_token_ids;
    n.params = c->params;
    n.wants_prompt_logprobs = c->wants_prompt_logprobs;
    n.speculate = req->speculate();
    n.constraint = c->request->request.constraint;
  }
  if (tr != nullptr) {
    ++trace_attempt_;  // an attempt that fails is not written; its events must not be reused
    b.trace_attempt = trace_attempt_;
    tr->events.clear();
    tr->running = scheduler_->num_running();
    tr->waiting = scheduler_->num_waiting();
    tr->prefill_requests = tr->prefill_tokens = tr->decode_tokens = 0;
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      const auto& s = plan.scheduled[i];
      Choice* c = choices[i];
      const int64_t prompt_len = static_cast<int64_t>(c->request->request.prompt_token_ids.size());
      const int64_t prefill =
          std::clamp<int64_t>(prompt_len - s.num_computed_tokens, 0, s.num_scheduled_tokens);
      if (prefill > 0) {
        tr->prefill_requests++;
        tr->prefill_tokens += prefill;
      }
      tr->decode_tokens += s.num_scheduled_tokens - prefill;
      StepTraceEvent& ev = tr->events.emplace_back();
      ev.request_id = c->request->request.request_id;
      ev.choice = c->request->request.params.n > 1 ? c->index : -1;
      ev.tokens = s.num_scheduled_tokens;
      ev.context = s.num_computed_tokens;
      ev.sample = s.will_sample;
      ev.prefill = prefill > 0;
      if (!c->trace_scheduled) {
        c->trace_scheduled = true;
        ev.first_scheduled = true;
        ev.arrival = c->request->arrival;
      }
      c->trace_attempt = trace_attempt_;
      c->trace_event = tr->events.size() - 1;
    }
  }
  b.t_execute = tr != nullptr ? now_seconds() : 0;
}

Status Engine::finish_batch(Batch& b, StepTraceRecord* tr, double t_executed) {
  const sched::StepPlan& plan = b.input.plan;
  std::vector<Choice*>& choices = b.choices;
  if (output_.entries.size() != plan.scheduled.size())
    return internal_error("the executor returned " + std::to_string(output_.entries.size()) +
                          " results for a plan of " + std::to_string(plan.scheduled.size()));
  if (depth_ > 1) {
    // Requests finished (aborted, stopped) while their batch was in flight: their choices may be
    // gone; update() skips them.
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      const sched::Request* req = scheduler_->get(plan.scheduled[i].handle);
      if (req == nullptr || sched::is_finished(req->status())) choices[i] = nullptr;
    }
  }
  sampled_.assign(plan.scheduled.size(), sched::kNoToken);
  accepted_.resize(plan.scheduled.size());
  proposals_.resize(plan.scheduled.size());
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    Choice* c = choices[i];
    const SampledEntry& e = output_.entries[i];
    if (plan.scheduled[i].will_sample) sampled_[i] = e.token_id;
    accepted_[i] = e.accepted_token_ids;
    proposals_[i] = e.draft_token_ids;
    if (c == nullptr) continue;
    if (c->wants_prompt_logprobs) {
      if (c->prompt_logprobs.empty()) c->prompt_logprobs.emplace_back();  // first token: none
      for (const auto& lp : e.prompt_logprobs) c->prompt_logprobs.emplace_back(lp);
    }
    c->pending_sample = plan.scheduled[i].will_sample ? &e : nullptr;
  }
  scheduler_->finish_kv_loads(output_.kv_loads_done);
  std::vector<sched::RequestOutput> outputs =
      scheduler_->update(plan, sampled_, accepted_, proposals_);
  for (const auto& out : outputs) {
    Choice* c = reinterpret_cast<Choice*>(out.user_data);
    if (c->finished) continue;
    RequestState* r = c->request;
    if (tr != nullptr && c->first_chunk) {        // this output is the choice's first token
      if (c->trace_attempt != b.trace_attempt) {  // not scheduled itself this step
        StepTraceEvent& ev = tr->events.emplace_back();
        ev.request_id = r->request.request_id;
        ev.choice = r->request.params.n > 1 ? c->index : -1;
        c->trace_attempt = b.trace_attempt;
        c->trace_event = tr->events.size() - 1;
      }
      tr->events[c->trace_event].first_token = true;
    }
    emit(*c, out, c->pending_sample);
    c->pending_sample = nullptr;  // its logprobs went with the step's first token
    release_if_done(r);
  }
  if (tr != nullptr) {
    const double t_end = now_seconds();
    if (tr != &trace_record_) {  // a batch's own record (pipeline overlap): the running fields
      tr->step = trace_record_.step++;
      tr->wait = trace_record_.wait;
      trace_record_.wait = 0;
    }
    tr->start = b.t_start;
    tr->duration = t_end - b.t_start;
    tr->between = std::max(0.0, b.t_start - trace_last_step_end_ - tr->wait);
    tr->schedule = b.t_scheduled - b.t_start;
    tr->forward = output_.forward_seconds;
    tr->sample = output_.sample_seconds;
    tr->comm = output_.comm_seconds;
    tr->prepare = (b.t_execute - b.t_scheduled) +
                  std::max(0.0, (t_executed - b.t_execute) - tr->forward - tr->sample);
    tr->output = t_end - t_executed;
    if (trace_ != nullptr) trace_->write(*tr);
    if (step_observer_) step_observer_(*tr);
    if (tr == &trace_record_) {
      tr->step++;
      tr->wait = 0;
    }
    trace_last_step_end_ = t_end;
  }
  return ok_status();
}

Status Engine::step() {
  if (depth_ > 1) return step_pipelined();
  // The step trace reads the clock between the phases; off, it costs these null checks.
  StepTraceRecord* const tr = trace_ != nullptr || step_observer_ ? &trace_record_ : nullptr;
  bool run = false;
  plan_batch(batch_, tr, &run);
  if (!run) return ok_status();
  STRATA_RETURN_IF_ERROR(executor_->execute(batch_.input, &output_));
  const double t_executed = tr != nullptr ? now_seconds() : 0;
  return finish_batch(batch_, tr, t_executed);
}

// Pipeline overlap: plan and submit micro-batches (their requests disjoint: the scheduler skips
// requests in flight) until depth_ are in flight or nothing more can be planned, then complete
// the oldest. So while later stages run one micro-batch, the first stage runs the next.
Status Engine::step_pipelined() {
  const bool tracing = trace_ != nullptr || static_cast<bool>(step_observer_);
  while (static_cast<int>(in_flight_.size()) < depth_) {
    std::unique_ptr<Batch> b;
    if (!spare_batches_.empty()) {
      b = std::move(spare_batches_.back());
      spare_batches_.pop_back();
    } else {
      b = std::make_unique<Batch>();
    }
    bool run = false;
    plan_batch(*b, tracing ? &b->trace : nullptr, &run);
    if (!run) {
      spare_batches_.push_back(std::move(b));
      break;
    }
    const Status s = executor_->submit(b->input);
    in_flight_.push_back(std::move(b));  // submitted or not, it is completed in turn
    if (!s.ok()) return s;
  }
  if (in_flight_.empty()) return ok_status();
  std::unique_ptr<Batch> b = std::move(in_flight_.front());
  in_flight_.pop_front();
  Status s = executor_->complete(&output_);
  const double t_executed = tracing ? now_seconds() : 0;
  if (s.ok()) s = finish_batch(*b, tracing ? &b->trace : nullptr, t_executed);
  if (!s.ok()) scheduler_->abandon_plan(b->input.plan);
  spare_batches_.push_back(std::move(b));
  return s;
}

EngineStats Engine::stats() const {
  sched::SchedulerStats s = scheduler_->stats();
  EngineStats e;
  e.num_running = s.num_running;
  e.num_waiting = s.num_waiting;
  e.num_paused = s.num_paused;
  e.kv_blocks_total = s.kv.num_blocks;
  e.kv_blocks_referenced = s.kv.referenced;
  e.kv_blocks_cached_free = s.kv.cached_free;
  e.kv_blocks_free = s.kv.free;
  e.kv_cache_usage = s.kv.usage();
  e.state_slots_running = s.state.num_running;
  e.state_slots_in_use = s.state.running_in_use;
  e.state_snapshots = s.state.num_snapshots;
  e.state_snapshots_ready = s.state.snapshots_ready;
  e.state_slot_bytes = executor_->info().memory.state_bytes_per_slot;
  e.state_restores = s.state.restores;
  e.prefix_cache_queries = s.prefix_cache.queries;
  e.prefix_cache_hits = s.prefix_cache.hits;
  if (kv::KvTiers* tiers = executor_->kv_tiers()) {
    e.has_kv_tiers = true;
    e.external_prefix_cache_queries = s.external_prefix_cache.queries;
    e.external_prefix_cache_hits = s.external_prefix_cache.hits;
    const kv::KvTierStats t = tiers->stats();
    auto copy = [](const kv::KvTierUsage& u, bool present, EngineStats::Tier* out) {
      *out = {present, u.blocks, u.capacity_blocks, u.hits, u.stores, u.bytes_in, u.bytes_out};
    };
    copy(t.ram, t.has_ram, &e.cpu_tier);
    copy(t.disk, t.has_disk, &e.disk_tier);
    e.kv_tier_block_bytes = t.block_bytes;
    e.kv_tier_loads = t.loads;
    e.kv_tier_load_missing = t.load_missing;
    e.kv_tier_load_corrupt = t.load_corrupt;
    e.kv_tier_load_io_errors = t.load_io_errors;
    e.kv_tier_stores_dropped = t.stores_dropped;
    e.kv_tier_disk_write_failures = t.disk_write_failures;
  }
  e.speculative = config_.scheduler.speculative.enabled();
  e.spec_num_drafts = s.spec_num_drafts;
  e.spec_num_draft_tokens = s.spec_num_draft_tokens;
  e.spec_num_accepted_tokens = s.spec_num_accepted_tokens;
  e.spec_accepted_per_pos = s.spec_accepted_per_pos;
  if (e.speculative)
    e.spec_accepted_per_pos.resize(
        static_cast<size_t>(config_.scheduler.speculative.num_speculative_tokens), 0);
  e.num_preemptions = s.num_preemptions;
  e.prompt_tokens = s.prompt_tokens;
  e.generation_tokens = s.generation_tokens;
  e.num_steps = s.num_steps;
  e.requests_finished_stop = finished_stop_;
  e.requests_finished_length = finished_length_;
  e.requests_finished_abort = finished_abort_;
  return e;
}

}  // namespace strata::engine

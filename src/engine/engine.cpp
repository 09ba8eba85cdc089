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
  std::optional<Rng> generator;
  std::unique_ptr<IncrementalDetokenizer> detok;
  std::unique_ptr<sampling::StopStringMatcher> matcher;
  bool wants_prompt_logprobs = false;
  bool finished = false;
  int64_t num_output_tokens = 0;
  bool first_chunk = true;
  std::vector<std::optional<sampling::TokenLogprobs>> prompt_logprobs;
  const sampling::SampleOutput* pending_sample = nullptr;  // this step's sample, if any
};

struct Engine::RequestState {
  EngineRequest request;
  std::shared_ptr<RequestStream> stream;
  std::vector<std::unique_ptr<Choice>> choices;
  int num_finished = 0;
};

namespace {

DType default_kv_dtype(DType weights) {
  return (weights == DType::kF32 || weights == DType::kF16 || weights == DType::kBF16)
             ? weights
             : DType::kBF16;
}

// Sampling defaults from generation_config.json (vLLM's --generation-config auto).
void apply_generation_config(const std::string& model_path, sampling::SamplingParams* p,
                             std::vector<int32_t>* eos) {
  std::string path = path_join(model_path, "generation_config.json");
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

}  // namespace

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config_in) {
  std::unique_ptr<Engine> e(new Engine());
  e->config_ = config_in;
  EngineConfig& c = e->config_;
  int threads = c.threads > 0 ? c.threads : ThreadPool::hardware_threads();
  e->pool_ = std::make_unique<ThreadPool>(threads);

  // Model config first: max_model_len defaults to the model's.
  c.model.pool = e->pool_.get();
  STRATA_ASSIGN_OR_RETURN(ModelConfig mc, load_model_config(c.model));
  int64_t model_len = mc.max_position_embeddings;
  if (mc.sliding_window && *mc.sliding_window < model_len) {
    STRATA_LOG(WARNING) << "sliding-window attention is not implemented: limiting the context to "
                        << "the window of " << *mc.sliding_window << " tokens";
    model_len = *mc.sliding_window;
  }
  STRATA_RETURN_IF_ERROR(c.scheduler.resolve_max_model_len(model_len));
  STRATA_RETURN_IF_ERROR(c.scheduler.validate());
  STRATA_RETURN_IF_ERROR(c.cache.validate());
  const auto& sc = c.scheduler;
  c.model.limits.max_num_tokens = sc.max_num_batched_tokens;
  c.model.limits.max_seq_len = sc.max_model_len;
  c.model.limits.max_logit_rows = std::max<int64_t>(sc.max_num_seqs, 64);
  STRATA_ASSIGN_OR_RETURN(LoadedModel loaded, load_model(c.model));
  e->model_ = std::move(loaded.model);
  Model& model = *e->model_;
  STRATA_LOG(INFO) << "Loaded " << model.config().summary() << " from " << c.model.model << " ("
                   << loaded.format << ", " << dtype_name(model.weight_dtype()) << ", "
                   << model.parameter_count() / 1e6 << "M parameters) in " << loaded.load_seconds
                   << " s";

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
  e->eos_ids_ = model.config().eos_token_ids;
  if (c.generation_config == "auto" && is_directory(c.model.model))
    apply_generation_config(c.model.model, &e->defaults_, &e->eos_ids_);
  if (e->tokenizer_ && e->tokenizer_->eos_token_id())
    e->eos_ids_.push_back(*e->tokenizer_->eos_token_id());
  std::sort(e->eos_ids_.begin(), e->eos_ids_.end());
  e->eos_ids_.erase(std::unique(e->eos_ids_.begin(), e->eos_ids_.end()), e->eos_ids_.end());

  // Memory plan.
  MemoryPlan& plan = e->plan_;
  const KvSpec ks = model.kv_spec();
  const DType kv_dtype = c.cache.kv_cache_dtype.value_or(default_kv_dtype(model.weight_dtype()));
  plan.block_size = c.cache.block_size;
  plan.memory_budget =
      static_cast<int64_t>(available_memory_bytes() * c.cache.gpu_memory_utilization);
  plan.weight_bytes = model.weight_bytes_total();
  const int64_t V = model.config().vocab_size;
  plan.workspace_bytes =
      model.workspace_bytes() + (model.config().vocab_size * 4) * 2 * c.model.limits.max_logit_rows;
  plan.kv_bytes_per_token = ks.bytes_per_token(kv_dtype);
  const int64_t block_bytes = plan.kv_bytes_per_token * plan.block_size;
  if (c.cache.kv_cache_memory_bytes > 0) {
    plan.kv_bytes = c.cache.kv_cache_memory_bytes;
  } else {
    plan.kv_bytes = plan.memory_budget - plan.weight_bytes - plan.workspace_bytes;
    if (plan.kv_bytes <= 0)
      return resource_exhausted("the model needs " + format_bytes(plan.weight_bytes) +
                                " of weights and " + format_bytes(plan.workspace_bytes) +
                                " of workspace, more than the budget of " +
                                format_bytes(plan.memory_budget) + " (--gpu-memory-utilization " +
                                std::to_string(c.cache.gpu_memory_utilization) +
                                " of RAM); raise it, or lower --max-num-batched-tokens");
  }
  plan.num_blocks = plan.kv_bytes / block_bytes;
  const int64_t needed = (sc.max_model_len + plan.block_size - 1) / plan.block_size;
  if (plan.num_blocks < needed)
    return resource_exhausted(
        "max_model_len " + std::to_string(sc.max_model_len) + " needs " + std::to_string(needed) +
        " KV blocks (" + format_bytes(static_cast<double>(needed) * block_bytes) + ") but only " +
        std::to_string(plan.num_blocks) + " fit in " + format_bytes(plan.kv_bytes) +
        " of KV memory; lower --max-model-len, or raise --kv-cache-memory / "
        "--gpu-memory-utilization");
  plan.kv_bytes = plan.num_blocks * block_bytes;
  STRATA_LOG(INFO) << "Memory plan: budget " << format_bytes(plan.memory_budget) << ", weights "
                   << format_bytes(plan.weight_bytes) << ", activation workspace "
                   << format_bytes(plan.workspace_bytes) << " (max_num_batched_tokens "
                   << sc.max_num_batched_tokens << "), KV cache " << format_bytes(plan.kv_bytes)
                   << " (" << dtype_name(kv_dtype) << ")";
  STRATA_LOG(INFO) << "KV bytes per token: " << plan.kv_bytes_per_token << " (" << ks.num_layers
                   << " layers x " << (ks.has_v ? "K+V of " : "one entry of ") << ks.num_kv_heads
                   << " x " << ks.head_dim << " values, " << dtype_name(kv_dtype) << ")";
  STRATA_LOG(INFO) << "KV cache: " << plan.num_blocks << " blocks x " << plan.block_size
                   << " tokens = " << plan.num_tokens() << " tokens; max_model_len "
                   << sc.max_model_len << ", max_num_seqs " << sc.max_num_seqs
                   << ", prefix caching " << (c.cache.enable_prefix_caching ? "on" : "off");

  STRATA_ASSIGN_OR_RETURN(e->storage_,
                          KvStorage::allocate({ks.num_layers, plan.num_blocks + 1, plan.block_size,
                                               ks.num_kv_heads, ks.head_dim, kv_dtype, ks.has_v}));
  STRATA_ASSIGN_OR_RETURN(e->scheduler_,
                          sched::Scheduler::create(sc, c.cache, plan.num_blocks + 1));
  sampling::SamplerConfig samp;
  samp.vocab_size = V;
  samp.eos_token_ids = e->eos_ids_;
  samp.seed = c.seed;
  samp.pool = e->pool_.get();
  e->sampler_ = std::make_unique<sampling::Sampler>(samp);
  const KernelOps& ops = kernel_ops(best_kernel_variant());
  e->runner_ = std::make_unique<ModelRunner>(model, e->storage_, ops);
  e->logits_.resize(static_cast<size_t>(c.model.limits.max_logit_rows * V));
  e->prompt_logits_.resize(static_cast<size_t>(c.model.limits.max_logit_rows * V));
  STRATA_LOG(INFO) << "Engine ready: " << e->pool_->size() << " threads, " << ops.name
                   << " kernels";
  return e;
}

Status Engine::validate(const EngineRequest& r) const {
  const int64_t V = model_->config().vocab_size;
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
  if (n + 1 > plan_.num_tokens())
    return resource_exhausted("the prompt needs " + std::to_string(n + 1) +
                              " KV slots but the whole KV cache holds " +
                              std::to_string(plan_.num_tokens()) + " tokens");
  STRATA_RETURN_IF_ERROR(r.params.validate(V, config_.max_logprobs));
  if (r.detokenize && !tokenizer_ && !r.params.stop.empty())
    return invalid_argument("stop strings need a tokenizer, and this model has none");
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
    c->generator = sampling::make_generator(c->params);
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

Status Engine::compute_prompt_logprobs(const sched::SchedulerOutput& plan) {
  const int64_t V = model_->config().vocab_size;
  const int64_t max_rows = config_.model.limits.max_logit_rows;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const auto& s = plan.scheduled[i];
    Choice* c = reinterpret_cast<Choice*>(s.user_data);
    if (!c->wants_prompt_logprobs) continue;
    const auto& prompt = c->request->request.prompt_token_ids;
    const int64_t n_prompt = static_cast<int64_t>(prompt.size());
    if (c->prompt_logprobs.empty()) c->prompt_logprobs.emplace_back();  // first token: none
    // Positions p of this step that predict a prompt token (p + 1 < n_prompt).
    const int64_t p0 = s.num_computed_tokens;
    const int64_t p1 =
        std::min<int64_t>(s.num_computed_tokens + s.num_scheduled_tokens, n_prompt - 1);
    for (int64_t p = p0; p < p1; p += max_rows) {
      const int64_t cnt = std::min(max_rows, p1 - p);
      std::vector<int32_t> rows(cnt), targets(cnt);
      for (int64_t k = 0; k < cnt; ++k) {
        rows[k] = runner_->row_start(static_cast<int>(i)) + static_cast<int32_t>(p - p0 + k);
        targets[k] = prompt[p + k + 1];
      }
      STRATA_RETURN_IF_ERROR(runner_->logits_for_rows(rows, prompt_logits_.data()));
      std::vector<sampling::TokenLogprobs> out(cnt);
      sampler_->prompt_logprobs(prompt_logits_.data(), targets, *c->params.prompt_logprobs, out);
      for (auto& lp : out) c->prompt_logprobs.emplace_back(std::move(lp));
    }
    (void)V;
  }
  return ok_status();
}

void Engine::emit(Choice& c, const sched::RequestOutput& out,
                  const sampling::SampleOutput* sample) {
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
      auto upd = c.matcher->feed(delta, sampling::stop_strings_active(c.params, c.num_output_tokens));
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

Status Engine::step() {
  sched::SchedulerOutput plan = scheduler_->schedule();
  if (plan.empty()) return ok_status();
  STRATA_RETURN_IF_ERROR(runner_->execute(plan, *scheduler_, logits_.data()));
  const auto& index = runner_->sample_plan_index();
  const size_t R = index.size();
  rows_.resize(R);
  samples_.resize(R);
  plan_to_row_.assign(plan.scheduled.size(), -1);
  for (size_t r = 0; r < R; ++r) {
    const auto& s = plan.scheduled[index[r]];
    Choice* c = reinterpret_cast<Choice*>(s.user_data);
    const sched::Request* req = scheduler_->get(s.handle);
    STRATA_CHECK(req != nullptr) << "scheduled request " << s.request_id << " is unknown";
    rows_[r] = {&c->params, req->prompt_token_ids(), req->output_token_ids(),
                c->generator ? &*c->generator : nullptr};
    plan_to_row_[index[r]] = static_cast<int>(r);
  }
  sampler_->sample(logits_.data(), rows_, samples_);
  STRATA_RETURN_IF_ERROR(compute_prompt_logprobs(plan));
  sampled_.assign(plan.scheduled.size(), sched::kNoToken);
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    Choice* c = reinterpret_cast<Choice*>(plan.scheduled[i].user_data);
    c->pending_sample = plan_to_row_[i] >= 0 ? &samples_[plan_to_row_[i]] : nullptr;
    if (plan_to_row_[i] >= 0) sampled_[i] = samples_[plan_to_row_[i]].token_id;
  }
  std::vector<sched::RequestOutput> outputs = scheduler_->update(plan, sampled_);
  for (const auto& out : outputs) {
    Choice* c = reinterpret_cast<Choice*>(out.user_data);
    if (c->finished) continue;
    RequestState* r = c->request;
    emit(*c, out, c->pending_sample);
    release_if_done(r);
  }
  return ok_status();
}

EngineStats Engine::stats() const {
  sched::SchedulerStats s = scheduler_->stats();
  EngineStats e;
  e.num_running = s.num_running;
  e.num_waiting = s.num_waiting;
  e.kv_blocks_total = s.kv.num_blocks;
  e.kv_blocks_referenced = s.kv.referenced;
  e.kv_blocks_cached_free = s.kv.cached_free;
  e.kv_blocks_free = s.kv.free;
  e.kv_cache_usage = s.kv.usage();
  e.prefix_cache_queries = s.prefix_cache.queries;
  e.prefix_cache_hits = s.prefix_cache.hits;
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

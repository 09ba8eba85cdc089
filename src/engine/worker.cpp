#include "engine/worker.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

#include "core/check.h"
#include "core/clock.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "core/strings.h"
#include "kv/fingerprint.h"
#include "sampling/vector_math.h"

namespace strata::engine {
namespace {

// The digest naming this configuration's disk-tier blocks (kv/fingerprint.h): the weights (their
// files, or the dummy seed), the model config, dtypes, the KV layout and block size, and the
// kernels (different kernel variants may round differently, and a loaded block must equal the
// one this server would compute).
std::string kv_fingerprint(const EngineConfig& c, const std::string& format, const Model& model,
                           const KvStorageSpec& spec, const std::string& backend) {
  kv::Fingerprint f;
  f.add("format", format);
  if (format == "dummy") {
    f.add("seed", static_cast<int64_t>(c.model.seed));
  } else if (is_directory(c.model.model)) {
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(c.model.model, ec))
      if (const std::string name = e.path().filename().string();
          ends_with(name, ".safetensors") || ends_with(name, ".gguf") || ends_with(name, ".bin") ||
          name == "config.json")
        files.push_back(name);
    std::sort(files.begin(), files.end());
    for (const std::string& name : files) f.add_file("file", path_join(c.model.model, name));
  } else {
    f.add_file("file", c.model.model);
  }
  f.add("config", model.config().summary());
  f.add("hf_overrides", c.model.hf_overrides);
  f.add("quantization", c.model.quantization);
  f.add("weight_dtype", dtype_name(model.weight_dtype()));
  f.add("kv_dtype", dtype_name(spec.dtype));
  if (spec.ds_mla_latent > 0) f.add("fp8_ds_mla", spec.ds_mla_latent);
  f.add("layers", spec.num_layers);
  f.add("kv_heads", spec.num_kv_heads);
  f.add("head_dim", spec.head_dim);
  f.add("has_v", spec.has_v ? 1 : 0);
  if (spec.aux_dim > 0) f.add("aux_dim", spec.aux_dim);
  for (size_t l = 0; l < spec.layer_block_bytes.size(); ++l)
    f.add("layer_block_bytes_" + std::to_string(l), spec.layer_block_bytes[l]);
  f.add("block_size", spec.block_size);
  f.add("kernels", backend);
  f.add("tokenizer", c.tokenizer.empty() ? c.model.model : c.tokenizer);
  return f.hex();
}

// The draft model's load options: the target's (threads, memory, limits, dummy weights from the
// same seed), with the draft's checkpoint, quantization and overrides; its format and dtype are
// its own (a target given as --load-format gguf or --dtype float32 says nothing of the draft).
LoadOptions draft_load_options(const LoadOptions& target, const sched::SpeculativeConfig& sc) {
  LoadOptions o = target;
  o.model = sc.draft_model;
  o.quantization = sc.draft_quantization;
  o.hf_overrides = sc.draft_hf_overrides;
  if (o.load_format != "dummy") o.load_format = "auto";
  o.dtype = "auto";
  return o;
}

// The KV figures of the memory plan's inputs, from the target's KV spec and the draft's bytes per
// token (0: none): the block size in effect (resolve_block_size()), the bytes per token or, for
// hybrid layouts, per block, the state slots, and the limits. The estimate and the loaded model
// both come through here, so they agree by construction where their specs agree.
Status set_kv_inputs(const EngineConfig& c, const KvSpec& ks, DType kv_dtype, bool ds_mla,
                     int64_t draft_kv_bytes_per_token, MemoryPlanInputs* mi) {
  const auto& sc = c.scheduler;
  STRATA_ASSIGN_OR_RETURN(
      mi->block_size,
      resolve_block_size(c.cache.block_size, c.cache.block_size_given, ks.block_size_multiple,
                         ks.hybrid(), ds_mla && ks.aux_dim > 0));
  mi->draft_kv_bytes_per_token = draft_kv_bytes_per_token;
  if (ks.hybrid()) {
    mi->kv_bytes_per_token = draft_kv_bytes_per_token;
    mi->kv_block_bytes = hybrid_block_bytes(ks, mi->block_size, kv_dtype) +
                         draft_kv_bytes_per_token * mi->block_size;
  } else {
    mi->kv_bytes_per_token = ks.bytes_per_token(kv_dtype, ds_mla) + draft_kv_bytes_per_token;
    mi->kv_block_bytes = 0;
  }
  if (ks.has_state()) {
    mi->state_bytes_per_slot = ks.state_bytes_per_slot(kv_dtype);
    mi->num_running_state_slots = sc.max_num_seqs;
    mi->num_snapshot_state_slots =
        num_snapshot_state_slots(sc.max_num_seqs, c.cache.enable_prefix_caching);
  }
  mi->kv_cache_memory_bytes = c.cache.kv_cache_memory_bytes;
  mi->max_model_len = sc.max_model_len;
  mi->max_num_batched_tokens = sc.max_num_batched_tokens;
  return ok_status();
}

}  // namespace

int64_t hybrid_block_bytes(const KvSpec& ks, int64_t block_size, DType kv_dtype) {
  int64_t n = 0;
  for (int64_t l = 0; l < ks.num_layers; ++l) n += ks.layer_block_bytes(l, block_size, kv_dtype);
  return n;
}

Result<EngineMemoryEstimate> estimate_engine_memory(const EngineConfig& c, int threads) {
  EngineMemoryEstimate e;
  const auto& sc = c.scheduler;
  // The speculative models' options, and their estimates for a token budget.
  std::optional<LoadOptions> draft;
  if (sc.speculative.uses_draft_model()) {
    draft = DraftProposer::model_options(draft_load_options(c.model, sc.speculative));
  } else if (sc.speculative.uses_mtp()) {
    draft = MtpProposer::model_options(c.model, sc.speculative.num_speculative_tokens);
  }
  // Errors name the flag as loading the draft would.
  const std::string what = sc.speculative.uses_mtp()
                               ? std::string("--speculative-config deepseek_mtp")
                               : "--speculative-config draft model " + sc.speculative.draft_model;
  std::optional<ModelConfig> draft_config;
  if (draft) {
    auto dc = load_model_config(*draft);
    if (!dc.ok()) return dc.status().with_context(what);
    draft_config = *dc;
  }
  // Workspace of everything for a token budget of `tokens`.
  auto workspace = [&c, draft, draft_config, threads, what](
                       int64_t tokens, ModelMemoryEstimate* target,
                       ModelMemoryEstimate* drafter) -> Result<int64_t> {
    LoadOptions lo = c.model;
    lo.limits.max_num_tokens = tokens;
    STRATA_ASSIGN_OR_RETURN(ModelMemoryEstimate t, estimate_model_memory(lo, threads));
    int64_t bytes = t.workspace_bytes;
    if (target != nullptr) *target = t;
    if (draft) {
      LoadOptions d = *draft;
      d.limits.max_num_tokens += tokens - c.model.limits.max_num_tokens;
      auto de = estimate_model_memory(d, threads);
      if (!de.ok()) return de.status().with_context(what);
      const int64_t buffers = c.scheduler.speculative.uses_mtp()
                                  ? MtpProposer::buffer_bytes(d.limits, *draft_config)
                                  : DraftProposer::buffer_bytes(d.limits, *draft_config);
      bytes += de->workspace_bytes + buffers;
      if (drafter != nullptr) *drafter = *de;
    }
    return bytes;
  };
  ModelMemoryEstimate drafter;
  STRATA_ASSIGN_OR_RETURN(int64_t ws, workspace(sc.max_num_batched_tokens, &e.target, &drafter));
  STRATA_ASSIGN_OR_RETURN(ModelConfig mc, load_model_config(c.model));
  const int64_t logits = logits_workspace_bytes(mc.vocab_size, c.model.limits.max_logit_rows);
  e.kv_dtype = c.cache.kv_cache_dtype.value_or(default_kv_dtype(e.target.weights.weight_dtype));
  MemoryPlanInputs& mi = e.inputs;
  mi.device_memory_bytes = available_memory_bytes();
  mi.gpu_memory_utilization = c.cache.gpu_memory_utilization;
  mi.weight_bytes = e.target.weights.total();
  mi.workspace_bytes = ws + logits;
  const KvSpec& tks = e.target.kv_spec;
  STRATA_ASSIGN_OR_RETURN(
      e.kv_fp8_ds_mla, kv::use_fp8_ds_mla(c.cache, e.kv_dtype, tks.latent_dim > 0, tks.aux_dim > 0,
                                          mc.architecture));
  int64_t draft_per_token = 0;
  if (draft) {
    e.draft_weight_bytes = drafter.weights.total();
    e.draft_workspace_bytes = ws - e.target.workspace_bytes;
    mi.weight_bytes += e.draft_weight_bytes;
    draft_per_token = drafter.kv_spec.bytes_per_token(
        e.kv_dtype, e.kv_fp8_ds_mla && drafter.kv_spec.latent_dim > 0);
  }
  STRATA_RETURN_IF_ERROR(set_kv_inputs(c, tks, e.kv_dtype, e.kv_fp8_ds_mla, draft_per_token, &mi));
  mi.workspace_for_tokens = [workspace, logits](int64_t tokens) -> int64_t {
    auto w = workspace(tokens, nullptr, nullptr);
    return w.ok() ? *w + logits : std::numeric_limits<int64_t>::max();
  };
  return e;
}

Worker::~Worker() = default;

Result<std::unique_ptr<Worker>> Worker::create(const WorkerConfig& config) {
  std::unique_ptr<Worker> w(new Worker());
  w->config_ = config;
  // The rank's place goes with the model options: the memory estimate and the load see it.
  w->config_.engine.model.parallel = config.parallel;
  const EngineConfig& c = w->config_.engine;
  const auto& sc = c.scheduler;
  STRATA_ASSIGN_OR_RETURN(w->backend_, CpuBackend::create({.kernels = c.kernels,
                                                           .threads = c.threads,
                                                           .commit_kv_cache = c.commit_kv_cache}));
  Backend& backend = *w->backend_;
  // The sampler's row-wide loops follow the kernel choice (`--kernels avx2` keeps them on AVX2);
  // every build gives the same tokens, so this changes the speed only.
  sampling::vector_math_limit(sampling::vector_math_variant_for_kernels(backend.variant().name));
  // The memory plan first, from estimates of what the models will hold (model/memory_estimate.h):
  // a configuration that does not fit is refused before anything is loaded or allocated.
  STRATA_ASSIGN_OR_RETURN(const EngineMemoryEstimate est,
                          estimate_engine_memory(c, static_cast<int>(backend.pool().size())));
  STRATA_ASSIGN_OR_RETURN(w->info_.memory, plan_memory(est.inputs));
  LoadOptions lo = c.model;
  lo.pool = &backend.pool();
  lo.allocator = &backend.allocator();
  STRATA_ASSIGN_OR_RETURN(LoadedModel loaded, load_model(lo));
  w->model_ = std::move(loaded.model);
  Model& model = *w->model_;
  STRATA_LOG(INFO) << "Loaded " << model.config().summary() << " from " << c.model.model << " ("
                   << loaded.format << ", " << dtype_name(model.weight_dtype()) << ", "
                   << model.parameter_count() / 1e6 << "M parameters) in " << loaded.load_seconds
                   << " s";

  if (sc.speculative.uses_draft_model()) {
    const LoadOptions dlo = draft_load_options(lo, sc.speculative);
    auto draft = DraftProposer::load(dlo, model.config().vocab_size);
    if (!draft.ok())
      return draft.status().with_context("--speculative-config draft model " + dlo.model);
    w->draft_ = std::move(draft).value();
  }
  if (sc.speculative.uses_mtp()) {
    auto mtp = MtpProposer::load(lo, sc.speculative.num_speculative_tokens);
    if (!mtp.ok()) return mtp.status().with_context("--speculative-config deepseek_mtp");
    w->mtp_ = std::move(mtp).value();
  }

  {
    // Matmul weight bytes by storage type (a GGUF file mixes several).
    std::map<std::string, std::pair<int64_t, int>> by_type;
    int64_t matmul_bytes = 0;
    for (const LinearInfo& l : model.linear_layers()) {
      auto& e = by_type[dtype_name(l.dtype)];
      e.first += l.bytes;
      e.second += 1;
      matmul_bytes += l.bytes;
    }
    std::string types;
    for (const auto& [name, e] : by_type)
      types += (types.empty() ? "" : ", ") + name + " " +
               format_bytes(static_cast<double>(e.first)) + " (" + std::to_string(e.second) + ")";
    STRATA_LOG(INFO) << "Weights by type: " << types << "; embedding, norms and the rest "
                     << format_bytes(
                            static_cast<double>(model.weight_bytes_total() - matmul_bytes));
  }

  // The loaded models against the estimates the plan was made with (model/memory_estimate.h
  // promises equality; a difference is a bug, and the plan is remade from what was loaded).
  const KvSpec ks = model.kv_spec();
  const DType kv_dtype = c.cache.kv_cache_dtype.value_or(default_kv_dtype(model.weight_dtype()));
  w->info_.kv_dtype = kv_dtype;
  STRATA_ASSIGN_OR_RETURN(const bool ds_mla,
                          kv::use_fp8_ds_mla(c.cache, kv_dtype, ks.latent_dim > 0, ks.aux_dim > 0,
                                             model.config().architecture));
  w->info_.kv_fp8_ds_mla = ds_mla;
  const int64_t V = model.config().vocab_size;
  const int64_t max_logit_rows = c.model.limits.max_logit_rows;
  MemoryPlanInputs mi;
  mi.device_memory_bytes = available_memory_bytes();
  mi.gpu_memory_utilization = c.cache.gpu_memory_utilization;
  mi.weight_bytes = model.weight_bytes_total();
  mi.workspace_bytes = model.workspace_bytes() + logits_workspace_bytes(V, max_logit_rows);
  int64_t draft_per_token = 0;
  if (w->draft_ != nullptr) {  // its weights, activations and KV (the same blocks as the target)
    mi.weight_bytes += w->draft_->model().weight_bytes_total();
    mi.workspace_bytes += w->draft_->workspace_bytes();
    draft_per_token = w->draft_->kv_bytes_per_token(kv_dtype, ds_mla);
  }
  if (w->mtp_ != nullptr) {  // the MTP layer's weights, activations and KV
    mi.weight_bytes += w->mtp_->model().weight_bytes_total();
    mi.workspace_bytes += w->mtp_->workspace_bytes();
    draft_per_token = w->mtp_->kv_bytes_per_token(kv_dtype, ds_mla);
  }
  STRATA_RETURN_IF_ERROR(set_kv_inputs(c, ks, kv_dtype, ds_mla, draft_per_token, &mi));
  if (ks.has_state() && (w->draft_ != nullptr || w->mtp_ != nullptr))
    return unimplemented("speculative decoding with a model that keeps per-sequence state (" +
                         model.config().architecture +
                         ") is not supported yet: drop --speculative-config");
  if (mi.weight_bytes != est.inputs.weight_bytes ||
      mi.workspace_bytes != est.inputs.workspace_bytes ||
      mi.kv_bytes_per_token != est.inputs.kv_bytes_per_token ||
      mi.kv_block_bytes != est.inputs.kv_block_bytes || mi.block_size != est.inputs.block_size ||
      mi.state_bytes_per_slot != est.inputs.state_bytes_per_slot) {
    STRATA_LOG(ERROR) << "the memory estimate differs from the loaded model (weights "
                      << est.inputs.weight_bytes << " vs " << mi.weight_bytes << ", workspace "
                      << est.inputs.workspace_bytes << " vs " << mi.workspace_bytes
                      << ", KV per token " << est.inputs.kv_bytes_per_token << " vs "
                      << mi.kv_bytes_per_token << ", KV per block " << est.inputs.kv_block_bytes
                      << " vs " << mi.kv_block_bytes << ", block size " << est.inputs.block_size
                      << " vs " << mi.block_size << ", state per slot "
                      << est.inputs.state_bytes_per_slot << " vs " << mi.state_bytes_per_slot
                      << "): please report it; planning with the loaded figures";
    STRATA_ASSIGN_OR_RETURN(w->info_.memory, plan_memory(mi));
  }
  MemoryPlan& plan = w->info_.memory;
  const int64_t block_bytes = plan.block_bytes;
  STRATA_LOG(INFO) << "Memory plan: budget " << format_bytes(plan.memory_budget) << ", weights "
                   << format_bytes(plan.weight_bytes) << ", activation workspace "
                   << format_bytes(plan.workspace_bytes) << " (max_num_batched_tokens "
                   << sc.max_num_batched_tokens << "), KV cache " << format_bytes(plan.kv_bytes)
                   << " (" << (ds_mla ? "fp8_ds_mla" : dtype_name(kv_dtype)) << ")"
                   << (plan.num_state_slots > 0
                           ? ", per-sequence state " + format_bytes(plan.state_bytes()) + " (" +
                                 std::to_string(plan.num_state_slots) + " slots of " +
                                 format_bytes(plan.state_bytes_per_slot) + ": " +
                                 std::to_string(plan.num_state_slots - plan.num_snapshot_slots) +
                                 " running, " + std::to_string(plan.num_snapshot_slots) +
                                 " prefix-cache snapshots)"
                           : std::string());
  if (ks.hybrid()) {
    STRATA_LOG(INFO) << "KV bytes per block of " << plan.block_size
                     << " tokens: " << plan.block_bytes << " over " << ks.num_layers
                     << " layers (hybrid layout)"
                     << (ks.describe
                             ? "; " + ks.describe(kv_dtype, plan.block_size, sc.max_model_len)
                             : std::string());
  } else if (ks.describe) {
    STRATA_LOG(INFO) << "KV layout: " << ks.describe(kv_dtype, plan.block_size, sc.max_model_len);
  }
  if (!ks.hybrid())
    STRATA_LOG(INFO) << "KV bytes per token: " << plan.kv_bytes_per_token << " (" << ks.num_layers
                     << " layers x " << (ks.has_v ? "K+V of " : "one entry of ") << ks.num_kv_heads
                     << " x " << ks.head_dim << " values"
                     << (ks.aux_dim > 0
                             ? " + an indexer key of " + std::to_string(ks.aux_dim) + " values"
                             : std::string())
                     << ", " << dtype_name(kv_dtype)
                     << (ds_mla ? "; fp8_ds_mla: " +
                                      std::to_string(ds_mla_row_bytes(ks.head_dim, ks.latent_dim)) +
                                      " bytes latent" +
                                      (ks.aux_dim > 0 ? " + " + std::to_string(ks.aux_dim + 4) +
                                                            " bytes indexer key"
                                                      : std::string()) +
                                      " per layer"
                                : std::string())
                     << (w->draft_ != nullptr || w->mtp_ != nullptr
                             ? "; the draft's " + std::to_string(plan.draft_kv_bytes_per_token)
                             : std::string())
                     << ")";

  if (c.commit_kv_cache) {
    // The weights are loaded: what is free now is what the KV cache and the workspace can have.
    // (Committing more than that would push other memory out, or get the process killed.)
    const int64_t free = free_memory_bytes();
    const int64_t need = plan.kv_bytes + block_bytes + plan.state_bytes() + plan.workspace_bytes;
    if (free >= 0 && need > free)
      return resource_exhausted(
          "the KV cache needs " + format_bytes(static_cast<double>(plan.kv_bytes)) +
          " (and the activation workspace " + format_bytes(plan.workspace_bytes) + ") but only " +
          format_bytes(static_cast<double>(free)) +
          " of memory is free now; lower --kv-cache-memory or --gpu-memory-utilization (" +
          std::to_string(c.cache.gpu_memory_utilization) + "), or free memory");
  }
  const double t0 = now_seconds();
  KvStorageSpec storage_spec{ks.num_layers,   plan.num_blocks + 1, plan.block_size,
                             ks.num_kv_heads, ks.head_dim,         kv_dtype,
                             ks.has_v,        ks.aux_dim,          ks.ds_mla_latent(ds_mla)};
  if (ks.hybrid())
    for (int64_t l = 0; l < ks.num_layers; ++l)
      storage_spec.layer_block_bytes.push_back(ks.layer_block_bytes(l, plan.block_size, kv_dtype));
  STRATA_ASSIGN_OR_RETURN(w->storage_, KvStorage::allocate(storage_spec, backend.allocator()));
  if (plan.num_state_slots > 0)
    STRATA_RETURN_IF_ERROR(
        model.allocate_state(plan.num_state_slots, kv_dtype, &backend.allocator()));
  if (w->draft_ != nullptr)
    STRATA_RETURN_IF_ERROR(
        w->draft_->allocate_kv(plan.num_blocks + 1, plan.block_size, kv_dtype, backend, ds_mla));
  if (w->mtp_ != nullptr)
    STRATA_RETURN_IF_ERROR(
        w->mtp_->allocate_kv(plan.num_blocks + 1, plan.block_size, kv_dtype, backend, ds_mla));
  if (c.commit_kv_cache)
    STRATA_LOG(INFO) << "KV cache committed: "
                     << format_bytes(static_cast<double>(w->storage_.bytes())) << " of RAM in "
                     << now_seconds() - t0 << " s";
  if (c.cache.has_kv_tiers()) {
    // The RAM tier is filled as blocks come down: refuse one that cannot fit rather than be
    // killed for memory hours later.
    const int64_t free = free_memory_bytes();
    if (free >= 0 && c.cache.kv_offloading_bytes > free)
      return resource_exhausted(
          "--kv-offloading-size " + format_bytes(static_cast<double>(c.cache.kv_offloading_bytes)) +
          " is more than the " + format_bytes(static_cast<double>(free)) +
          " of memory free after loading the model and the KV pool; lower it");
    kv::KvTierConfig tc;
    tc.ram_bytes = c.cache.kv_offloading_bytes;
    tc.disk_path = c.cache.kv_disk_path;
    tc.disk_bytes = c.cache.kv_disk_bytes;
    tc.fingerprint = kv_fingerprint(c, loaded.format, model, w->storage_.spec(), backend.name());
    STRATA_ASSIGN_OR_RETURN(w->tiers_, kv::KvTiers::create(tc, &w->storage_));
    const kv::KvTierStats ts = w->tiers_->stats();
    STRATA_LOG(INFO) << "KV tiers: block " << format_bytes(static_cast<double>(ts.block_bytes))
                     << "; CPU " << ts.ram.capacity_blocks << " blocks ("
                     << format_bytes(static_cast<double>(ts.ram.capacity_blocks * ts.block_bytes))
                     << ")"
                     << (ts.has_disk
                             ? "; disk " + std::to_string(ts.disk.capacity_blocks) + " blocks in " +
                                   tc.disk_path + " (" + std::to_string(ts.disk.blocks) +
                                   " found, " + "configuration " + tc.fingerprint + ")"
                             : std::string());
  }
  sampling::SamplerConfig samp;
  samp.vocab_size = V;
  samp.eos_token_ids = w->config_.eos_token_ids;
  samp.seed = c.seed;
  samp.pool = &backend.pool();
  w->sampler_ = std::make_unique<sampling::Sampler>(samp);
  w->runner_ = std::make_unique<ModelRunner>(model, w->storage_, backend.ops());
  w->logits_.resize(static_cast<size_t>(max_logit_rows * V));
  w->prompt_logits_.resize(static_cast<size_t>(max_logit_rows * V));
  w->info_.backend = backend.name();
  w->info_.threads = backend.pool().size();
  return w;
}

double Worker::comm_busy_seconds() const {
  const ModelParallel& p = config_.parallel;
  return (p.tp != nullptr ? p.tp->busy_seconds() : 0.0) +
         (p.pp != nullptr ? p.pp->busy_seconds() : 0.0);
}

Status Worker::execute(const StepInput& input, StepOutput* output) {
  const double comm0 = comm_busy_seconds();
  const Status s = execute_step(input, output);
  output->comm_seconds = comm_busy_seconds() - comm0;
  return s;
}

Status Worker::execute_step(const StepInput& input, StepOutput* output) {
  for (const auto& id : input.plan.finished_ids) requests_.erase(id);
  add_new_requests(input);
  return run_step(input, output);
}

void Worker::add_new_requests(const StepInput& input) {
  for (const NewRequestData& n : input.new_requests) {
    RequestState& r = requests_[n.request_id];
    r.token_ids = n.prompt_token_ids;
    r.num_prompt_tokens = static_cast<int64_t>(n.prompt_token_ids.size());
    r.params = n.params;
    r.generator = sampling::make_generator(n.params);
    r.wants_prompt_logprobs = n.wants_prompt_logprobs;
    r.speculate = n.speculate;
    if (n.constraint) {
      r.matcher.emplace(n.constraint);
      r.mask.resize(grammar::GrammarMatcher::mask_words(sampler_->vocab_size()));
    }
  }
}

Status Worker::run_step(const StepInput& input, StepOutput* output) {
  // KV tiers: copy the plan's stores out of the pool before the forward pass may reuse their
  // blocks, then queue the loads (they run on the tiers' thread, into blocks no entry computes).
  if (tiers_ != nullptr) {
    const sched::StepPlan& plan = input.plan;
    for (const sched::KvTransfer& t : plan.kv_stores) tiers_->store(t.block, {t.key_lo, t.key_hi});
    for (const sched::KvTransfer& t : plan.kv_loads) tiers_->load(t.block, {t.key_lo, t.key_hi});
  } else if (!input.plan.kv_stores.empty() || !input.plan.kv_loads.empty()) {
    return internal_error("plan moves KV blocks but this worker has no KV tiers");
  }
  output->kv_loads_done.clear();
  if (input.plan.scheduled.empty()) {  // only loads to wait for: nothing else can progress
    const sched::StepPlan& plan = input.plan;
    STRATA_RETURN_IF_ERROR(runner_->execute(plan, logits_.data()));  // drops finished tables
    if (draft_ != nullptr) STRATA_RETURN_IF_ERROR(draft_->propose(plan, {}, &filled_));
    if (mtp_ != nullptr)
      STRATA_RETURN_IF_ERROR(mtp_->propose(plan, *model_, *runner_, {}, {}, &mtp_drafts_));
    output->entries.clear();
    output->forward_seconds = output->sample_seconds = 0;
    if (tiers_ != nullptr) {
      tiers_->wait_for_loads();
      output->kv_loads_done = tiers_->take_finished_loads();
    }
    return ok_status();
  }
  entry_states_.assign(input.plan.scheduled.size(), nullptr);
  for (size_t i = 0; i < input.plan.scheduled.size(); ++i) {
    auto it = requests_.find(input.plan.scheduled[i].request_id);
    if (it == requests_.end())
      return internal_error("plan schedules request '" + input.plan.scheduled[i].request_id +
                            "', which this worker was never given");
    entry_states_[i] = &it->second;
  }
  const sched::StepPlan* planp = &input.plan;
  if (draft_ != nullptr) {  // the draft model fills the plan's draft places
    histories_.clear();
    for (RequestState* st : entry_states_) histories_.emplace_back(st->token_ids);
    STRATA_RETURN_IF_ERROR(draft_->propose(input.plan, histories_, &filled_));
    planp = &filled_;
  }
  const sched::StepPlan& plan = *planp;
  STRATA_RETURN_IF_ERROR(runner_->execute(plan, logits_.data()));
  const double sample_start = now_seconds();
  STRATA_RETURN_IF_ERROR(
      sample_step(plan, runner_->sample_plan_index(), runner_->query_starts(), output));
  // The draft model's passes are forward time too.
  output->forward_seconds =
      runner_->forward_seconds() + (draft_ != nullptr ? draft_->forward_seconds() : 0.0);
  output->sample_seconds = now_seconds() - sample_start;
  if (mtp_ != nullptr) {  // drafts for the next step, from this step's standing positions
    mtp_entries_.assign(plan.scheduled.size(), {});
    histories_.clear();
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      const sched::ScheduledRequest& s = plan.scheduled[i];
      RequestState& st = *entry_states_[i];
      histories_.emplace_back(st.token_ids);
      if (!st.speculate) continue;
      mtp_entries_[i].positions =
          s.num_scheduled_tokens - s.spec_token_ids_count +
          static_cast<int64_t>(output->entries[i].accepted_token_ids.size());
      mtp_entries_[i].propose = s.will_sample;
    }
    STRATA_RETURN_IF_ERROR(
        mtp_->propose(plan, *model_, *runner_, mtp_entries_, histories_, &mtp_drafts_));
    for (size_t i = 0; i < plan.scheduled.size(); ++i)
      output->entries[i].draft_token_ids = std::move(mtp_drafts_[i]);
    output->forward_seconds += mtp_->forward_seconds();
  }
  if (tiers_ != nullptr) output->kv_loads_done = tiers_->take_finished_loads();
  return ok_status();
}

bool Worker::can_overlap() const {
  const ModelParallel& p = config_.parallel;
  return p.pp_size > 1 && !p.is_last_stage() && draft_ == nullptr && mtp_ == nullptr &&
         tiers_ == nullptr;
}

Status Worker::submit(const StepInput& input) {
  if (!can_overlap())
    return internal_error(
        "Worker::submit: this worker runs steps whole (not a stage before the "
        "last of a pipeline, or speculative decoding or KV tiers are on)");
  const double comm0 = comm_busy_seconds();
  // Requests the plan finished: a batch still in flight may sample one of them (aborted while in
  // flight), so their states live on, out of the map, until the latest such batch completes.
  for (const auto& id : input.plan.finished_ids) {
    auto node = requests_.extract(id);
    if (node && !inflight_.empty()) inflight_.back().finished.push_back(std::move(node));
  }
  add_new_requests(input);
  InFlight& f = inflight_.emplace_back();
  f.input = input;
  f.status = submit_forward(f);
  f.comm_seconds = comm_busy_seconds() - comm0;
  return f.status;
}

// The stage's part of a submitted step: the block tables and the forward pass through this
// stage's layers (activations go on to the next stage without waiting). The logits come in
// complete().
Status Worker::submit_forward(InFlight& f) {
  const sched::StepPlan& plan = f.input.plan;
  if (!plan.kv_stores.empty() || !plan.kv_loads.empty())
    return internal_error("plan moves KV blocks but this worker has no KV tiers");
  if (plan.scheduled.empty()) return runner_->execute(plan, logits_.data());  // drops tables
  f.states.assign(plan.scheduled.size(), nullptr);
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    auto it = requests_.find(plan.scheduled[i].request_id);
    if (it == requests_.end())
      return internal_error("plan schedules request '" + plan.scheduled[i].request_id +
                            "', which this worker was never given");
    f.states[i] = &it->second;
  }
  runner_->set_defer_logits(true);
  const Status s = runner_->execute(plan, logits_.data());
  runner_->set_defer_logits(false);
  STRATA_RETURN_IF_ERROR(s);
  f.index = runner_->sample_plan_index();
  f.rows = runner_->logits_rows();
  f.row_starts = runner_->query_starts();
  f.forward_seconds = runner_->forward_seconds();
  return ok_status();
}

Status Worker::complete(StepOutput* output) {
  if (inflight_.empty()) return internal_error("Worker::complete: no step in flight");
  InFlight f = std::move(inflight_.front());
  inflight_.pop_front();
  STRATA_RETURN_IF_ERROR(f.status);
  const double comm0 = comm_busy_seconds();
  output->kv_loads_done.clear();
  output->entries.clear();
  output->forward_seconds = f.forward_seconds;
  output->sample_seconds = 0;
  const sched::StepPlan& plan = f.input.plan;
  if (!plan.scheduled.empty()) {
    // The logits of the sampled rows, from the last stage (it ran the step meanwhile).
    STRATA_RETURN_IF_ERROR(runner_->logits_for_rows(f.rows, logits_.data()));
    const double sample_start = now_seconds();
    entry_states_ = f.states;
    STRATA_RETURN_IF_ERROR(sample_step(plan, f.index, f.row_starts, output));
    output->sample_seconds = now_seconds() - sample_start;
  }
  output->comm_seconds = f.comm_seconds + comm_busy_seconds() - comm0;
  return ok_status();
}

// Samples every entry of `plan` that samples from logits_ (row r for plan entry index[r], the
// entries' states in entry_states_), computes the logprobs asked for and appends the step's
// tokens to each request's history.
Status Worker::sample_step(const sched::StepPlan& plan, std::span<const int> index,
                           std::span<const int32_t> row_starts, StepOutput* output) {
  const size_t R = index.size();
  rows_.resize(R);
  samples_.resize(R);
  for (size_t r = 0; r < R; ++r) {
    RequestState& st = *entry_states_[index[r]];
    const std::span<const int32_t> tokens(st.token_ids);
    rows_[r] = {&st.params, tokens.first(static_cast<size_t>(st.num_prompt_tokens)),
                tokens.subspan(static_cast<size_t>(st.num_prompt_tokens)),
                st.generator ? &*st.generator : nullptr};
    if (st.matcher) {
      // The sequence's token budget: max_tokens, and the model's length.
      const int64_t num_out = static_cast<int64_t>(st.token_ids.size()) - st.num_prompt_tokens;
      int64_t remaining =
          config_.engine.scheduler.max_model_len - static_cast<int64_t>(st.token_ids.size());
      if (st.params.max_tokens)
        remaining = std::min<int64_t>(remaining, *st.params.max_tokens - num_out);
      st.matcher->fill_next_token_mask(st.mask, remaining);
      rows_[r].allowed_tokens = st.mask.data();
    }
  }
  sampler_->sample(logits_.data(), rows_, samples_);
  output->entries.resize(plan.scheduled.size());
  for (auto& e : output->entries) {
    e.token_id = sched::kNoToken;
    e.has_logprobs = false;
    e.prompt_logprobs.clear();
    e.accepted_token_ids.clear();
    e.draft_token_ids.clear();
  }
  for (size_t r = 0; r < R;) {
    SampledEntry& e = output->entries[index[r]];
    e.token_id = samples_[r].token_id;
    e.has_logprobs = samples_[r].has_logprobs;
    if (e.has_logprobs) e.logprobs = samples_[r].logprobs;
    e.accepted_token_ids.clear();
    // Verification: draft j stands if the model's token at the row before it is that draft;
    // each standing draft adds the model's token at its own row.
    const auto drafts = plan.spec_token_ids_of(plan.scheduled[index[r]]);
    if (!drafts.empty() && !rows_[r].params->is_greedy()) {
      // A sampled request: rejection sampling keeps its distribution (sampling/sampler.h).
      sampler_->verify_drafts(logits_.data() + r * sampler_->vocab_size(), rows_[r], drafts,
                              &verified_);
      e.token_id = verified_[0];
      e.accepted_token_ids.assign(verified_.begin() + 1, verified_.end());
      r += drafts.size() + 1;
      continue;
    }
    size_t m = 0;
    while (m < drafts.size() && samples_[r + m].token_id == drafts[m]) {
      ++m;
      e.accepted_token_ids.push_back(samples_[r + m].token_id);
    }
    r += drafts.size() + 1;
  }
  STRATA_RETURN_IF_ERROR(compute_prompt_logprobs(plan, row_starts, output));
  // The step's tokens join each request's history (penalties, min_tokens and the draft models see
  // them next step): the entry's token (for a sampled request with drafts, the one rejection
  // sampling kept, not the row's own draw), then the accepted drafts' successors.
  for (size_t r = 0; r < R; r += plan.scheduled[index[r]].spec_token_ids_count + 1) {
    RequestState& st = *entry_states_[index[r]];
    const int32_t token = output->entries[index[r]].token_id;
    st.token_ids.push_back(token);
    const auto& accepted = output->entries[index[r]].accepted_token_ids;
    st.token_ids.insert(st.token_ids.end(), accepted.begin(), accepted.end());
    // The mask allowed only what the grammar accepts (all -inf rows aside, which argmax turns
    // into token 0): a refusal ends the constraint rather than the engine.
    if (st.matcher && !st.matcher->accept_token(token)) {
      STRATA_LOG(WARNING) << "request " << plan.scheduled[index[r]].request_id << ": sampled token "
                          << token << " is outside its grammar; the constraint is dropped";
      st.matcher.reset();
    }
  }
  return ok_status();
}

Status Worker::compute_prompt_logprobs(const sched::StepPlan& plan,
                                       std::span<const int32_t> row_starts, StepOutput* output) {
  const int64_t max_rows = config_.engine.model.limits.max_logit_rows;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const auto& s = plan.scheduled[i];
    const RequestState& st = *entry_states_[i];
    if (!st.wants_prompt_logprobs) continue;
    const int64_t n_prompt = st.num_prompt_tokens;
    // Positions p of this step that predict a prompt token (p + 1 < n_prompt).
    const int64_t p0 = s.num_computed_tokens;
    const int64_t p1 =
        std::min<int64_t>(s.num_computed_tokens + s.num_scheduled_tokens, n_prompt - 1);
    for (int64_t p = p0; p < p1; p += max_rows) {
      const int64_t cnt = std::min(max_rows, p1 - p);
      std::vector<int32_t> rows(cnt), targets(cnt);
      for (int64_t k = 0; k < cnt; ++k) {
        rows[k] = row_starts[i] + static_cast<int32_t>(p - p0 + k);
        targets[k] = st.token_ids[p + k + 1];
      }
      STRATA_RETURN_IF_ERROR(runner_->logits_for_rows(rows, prompt_logits_.data()));
      std::vector<sampling::TokenLogprobs> out(cnt);
      sampler_->prompt_logprobs(prompt_logits_.data(), targets, *st.params.prompt_logprobs, out);
      auto& dst = output->entries[i].prompt_logprobs;
      for (auto& lp : out) dst.push_back(std::move(lp));
    }
  }
  return ok_status();
}

}  // namespace strata::engine

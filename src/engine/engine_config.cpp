#include "engine/engine_config.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "core/file_util.h"
#include "core/logging.h"
#include "core/thread_pool.h"

namespace strata::engine {

void add_engine_options(OptionSet& o) {
  const std::string g = "Model";
  o.add_string("load-format", "auto",
               "weights: auto, safetensors, gguf, or dummy (random weights "
               "from config.json)",
               g);
  o.add_string("dtype", "auto",
               "weight dtype: auto (the checkpoint's), float32, bfloat16, "
               "float16",
               g);
  o.add_string("quantization", "",
               "weight quantization: empty infers the checkpoint's (gguf, fp8); on an "
               "unquantized checkpoint fp8 (128x128 blocks) or q8_0 (int8 kernels) quantize the "
               "decoder layers at load",
               g);
  o.add_string("hf-overrides", "",
               "JSON object merged into config.json, e.g. "
               "'{\"num_hidden_layers\": 2}'",
               g);
  o.add_string("tokenizer", "", "tokenizer directory or file (default: the model's)", g);
  o.add_int("seed", 0, "seed of the engine's random generator and of dummy weights", g);
  o.add_int("max-logprobs", 20, "largest logprobs / prompt_logprobs a request may ask for", g);
  o.add_string("generation-config", "auto",
               "auto: sampling defaults from the model's generation_config.json; a folder: "
               "from the generation_config.json in it; vllm (or none): vLLM's defaults",
               g);
  o.add_int("threads", 0, "compute threads (0: every available core)", "Engine");
  o.add_string("kernels", "auto",
               "kernel variant: auto (the fastest this CPU runs) or a name (reference, "
               "portable, avx2, ...); for tests and comparisons",
               "Engine");
  o.add_bool("kv-cache-commit", true,
             "back the whole KV cache with RAM at start, after checking that much is free, so a "
             "cache too big for the machine fails at start; --no-kv-cache-commit backs pages on "
             "first use (quicker to start)",
             "Engine");
  o.add({.name = "step-trace",
         .kind = OptionKind::kString,
         .default_value = "",
         .help = "append one JSON line per engine step to PATH: phase times (schedule, prepare, "
                 "forward, sample, output, waiting for requests), batch counts and each "
                 "request's events; scripts/step_trace_summary.py summarises it",
         .group = "Engine",
         .metavar = "PATH"});
  kv::add_cache_options(o);
  sched::add_scheduler_options(o);
}

Result<EngineConfig> engine_config_from_args(const Args& args) {
  EngineConfig c;
  if (args.positional().empty())
    return invalid_argument("missing MODEL (a Hugging Face model directory or a .gguf file)");
  if (args.positional().size() > 1)
    return invalid_argument("unexpected extra argument '" + args.positional()[1] + "'");
  c.model.model = args.positional()[0];
  c.model.load_format = args.get("load-format");
  c.model.dtype = args.get("dtype");
  c.model.quantization = args.get("quantization");
  c.model.hf_overrides = args.get("hf-overrides");
  c.tokenizer = args.get("tokenizer");
  c.seed = static_cast<uint64_t>(args.get_int("seed"));
  c.model.seed = c.seed;
  c.max_logprobs = static_cast<int>(args.get_int("max-logprobs"));
  if (c.max_logprobs < 0) return invalid_argument("--max-logprobs must be >= 0");
  c.generation_config = args.get("generation-config");
  if (c.generation_config != "auto" && c.generation_config != "none" &&
      c.generation_config != "vllm" &&
      !file_exists(path_join(c.generation_config, "generation_config.json")))
    return invalid_argument(
        "--generation-config must be auto, vllm (or none), or a folder "
        "holding generation_config.json; '" +
        c.generation_config + "' is none of these");
  c.threads = static_cast<int>(args.get_int("threads"));
  if (c.threads < 0) return invalid_argument("--threads must be >= 0");
  c.kernels = args.get("kernels");
  c.commit_kv_cache = args.get_bool("kv-cache-commit");
  c.step_trace = args.get("step-trace");
  STRATA_ASSIGN_OR_RETURN(c.cache, kv::cache_config_from_args(args));
  STRATA_ASSIGN_OR_RETURN(c.scheduler, sched::scheduler_config_from_args(args));
  return c;
}

namespace {

// One integer file (cgroup v2 memory.max / memory.current); -1 when absent or "max".
int64_t read_cgroup_value(const char* path) {
  std::ifstream f(path);
  std::string v;
  if (!(f >> v) || v == "max") return -1;
  try {
    return std::stoll(v);
  } catch (...) {
    return -1;
  }
}

}  // namespace

int64_t free_memory_bytes() {
  int64_t free = -1;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemAvailable:") {
      free = kb * 1024;
      break;
    }
  }
  const int64_t limit = read_cgroup_value("/sys/fs/cgroup/memory.max");
  const int64_t used = read_cgroup_value("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used >= 0) {
    const int64_t left = std::max<int64_t>(0, limit - used);
    free = free < 0 ? left : std::min(free, left);
  }
  return free;
}

int64_t available_memory_bytes() {
  int64_t ram = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  // cgroup v2 limit, when one is set.
  std::ifstream f("/sys/fs/cgroup/memory.max");
  std::string v;
  if (f >> v && v != "max") {
    try {
      int64_t limit = std::stoll(v);
      if (limit > 0) ram = std::min(ram, limit);
    } catch (...) {
    }
  }
  return ram;
}

Status resolve_engine_config(const ModelConfig& mc, EngineConfig* config) {
  EngineConfig& c = *config;
  int64_t model_len = mc.max_position_embeddings;
  // DeepSeek-V4's window is part of its attention (the model keeps it per sequence); other
  // sliding-window models run full attention, so their context stops at the window.
  if (mc.sliding_window && *mc.sliding_window < model_len &&
      mc.architecture != "DeepseekV4ForCausalLM") {
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
  if (sc.speculative.enabled()) {  // verification rows: one per draft token
    c.scheduler.max_draft_tokens_per_step =
        std::min<int64_t>(sc.max_num_seqs, 64) * sc.speculative.num_speculative_tokens;
    c.model.limits.max_logit_rows += c.scheduler.max_draft_tokens_per_step;
  }
  return ok_status();
}

}  // namespace strata::engine

// strata generate MODEL --prompt TEXT [--prompt TEXT ...] | --prompt-ids 1,2,3 | --prompts-file F
// Runs the prompts through the engine concurrently. One prompt: the text streams to stdout as it
// is generated; several: each completion is printed when done, in order. Speeds go to stderr.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "apps/command.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/logging.h"
#include "core/strings.h"
#include "dist/deployment.h"
#include "engine/engine.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& o) {
  const std::string g = "Generation";
  o.add({.name = "prompt",
         .help = "prompt text (repeat for several prompts)",
         .group = g,
         .repeated = true,
         .metavar = "TEXT"});
  o.add({.name = "prompt-ids",
         .help = "prompt as token ids, e.g. 1,403,407 (repeatable)",
         .group = g,
         .repeated = true,
         .metavar = "IDS"});
  o.add_string("prompts-file", "", "file with one prompt per line", g);
  o.add_int("max-tokens", 64, "tokens to generate per prompt", g);
  o.add_int("min-tokens", 0, "tokens to generate before EOS may stop", g);
  o.add_float("temperature", 1.0, "sampling temperature (0 = greedy)", g);
  o.add_float("top-p", 1.0, "nucleus sampling mass", g);
  o.add_int("top-k", 0, "keep the k most likely tokens (0 or -1: off)", g);
  o.add_float("min-p", 0.0, "drop tokens below min_p x the top probability", g);
  o.add_float("repetition-penalty", 1.0, "penalty on repeated tokens (1: off)", g);
  o.add({.name = "request-seed",
         .help = "per-request seed for reproducible sampling (default: "
                 "none, the engine's generator)",
         .group = g,
         .metavar = "N"});
  o.add_bool("ignore-eos", false, "keep generating after EOS", g);
  o.add_bool("json", false,
             "print one JSON object (an array for several prompts) instead of "
             "streamed text",
             g);
  engine::add_engine_options(o);
  dist::add_parallel_options(o);
}

struct Result1 {
  std::vector<int32_t> prompt_ids, generated_ids;
  std::string text;
  engine::RequestTimes times;
  std::string finish_reason;
  std::string error;
};

int run(const Args& args) {
  auto cfg = engine::engine_config_from_args(args);
  if (!cfg.ok()) {
    std::cerr << "strata generate: " << cfg.status().message() << "\n";
    return 2;
  }
  // Prompts.
  std::vector<std::string> texts = args.get_all("prompt");
  if (!args.get("prompts-file").empty()) {
    std::ifstream f(args.get("prompts-file"));
    if (!f) {
      std::cerr << "strata generate: cannot read --prompts-file " << args.get("prompts-file")
                << "\n";
      return 2;
    }
    for (std::string line; std::getline(f, line);)
      if (!trim(line).empty()) texts.push_back(line);
  }
  std::vector<std::vector<int32_t>> id_prompts;
  for (const auto& s : args.get_all("prompt-ids")) {
    auto ids = parse_int_list(s);
    if (!ids.ok() || ids->empty()) {
      std::cerr << "strata generate: --prompt-ids expects comma-separated token ids, got '" << s
                << "'\n";
      return 2;
    }
    id_prompts.emplace_back(ids->begin(), ids->end());
  }
  if (texts.empty() && id_prompts.empty()) {
    std::cerr << "strata generate: give --prompt, --prompt-ids or --prompts-file\n";
    return 2;
  }
  sampling::SamplingParams params;
  // Several ranks: this process may be the launcher or a rank > 0, done when this returns.
  dist::DistStart dist = dist::start_distributed(args, &*cfg, "strata generate");
  if (dist.exit_code) return *dist.exit_code;
  Result<std::unique_ptr<engine::EngineClient>> client_or = internal_error("no engine");
  if (dist.deployment) {
    auto engine = engine::Engine::create(*cfg, dist.deployment->executor_factory(nullptr));
    if (engine.ok())
      client_or = engine::EngineClient::start(std::move(engine).value());
    else
      client_or = engine.status();
  } else {
    client_or = engine::EngineClient::create(*cfg);
  }
  if (!client_or.ok()) {
    std::cerr << "strata generate: " << client_or.status().message() << "\n";
    return 1;
  }
  auto& client = *client_or;
  const engine::EngineInfo& eng = client->info();
  params = eng.default_sampling_params;
  params.max_tokens = static_cast<int>(args.get_int("max-tokens"));
  params.min_tokens = static_cast<int>(args.get_int("min-tokens"));
  if (args.is_set("temperature"))
    params.temperature = static_cast<float>(args.get_float("temperature"));
  if (args.is_set("top-p")) params.top_p = static_cast<float>(args.get_float("top-p"));
  if (args.is_set("top-k")) params.top_k = static_cast<int>(args.get_int("top-k"));
  if (args.is_set("min-p")) params.min_p = static_cast<float>(args.get_float("min-p"));
  if (args.is_set("repetition-penalty"))
    params.repetition_penalty = static_cast<float>(args.get_float("repetition-penalty"));
  if (args.is_set("request-seed")) {
    auto seed = parse_int(args.get("request-seed"), "--request-seed");
    if (!seed.ok()) {
      std::cerr << "strata generate: " << seed.status().message() << "\n";
      return 2;
    }
    params.seed = *seed;
  }
  params.ignore_eos = args.get_bool("ignore-eos");

  std::vector<Result1> results;
  for (const auto& t : texts) {
    if (!eng.tokenizer) {
      std::cerr << "strata generate: this model has no tokenizer; use --prompt-ids\n";
      return 2;
    }
    auto ids = eng.tokenizer->encode(t);
    if (!ids.ok()) {
      std::cerr << "strata generate: " << ids.status().message() << "\n";
      return 2;
    }
    results.push_back({*ids, {}, "", {}, "", ""});
  }
  for (auto& ids : id_prompts) results.push_back({ids, {}, "", {}, "", ""});

  const bool json = args.get_bool("json");
  const bool stream_text = !json && results.size() == 1;
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (size_t i = 0; i < results.size(); ++i) {
    engine::EngineRequest req;
    req.request_id = "generate-" + std::to_string(i);
    req.prompt_token_ids = results[i].prompt_ids;
    req.params = params;
    auto s = client->submit(std::move(req));
    if (!s.ok()) {
      std::cerr << "strata generate: prompt " << i << ": " << s.status().message() << "\n";
      return 1;
    }
    streams.push_back(*s);
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    while (auto chunk = streams[i]->next()) {
      Result1& r = results[i];
      r.generated_ids.insert(r.generated_ids.end(), chunk->token_ids.begin(),
                             chunk->token_ids.end());
      r.text += chunk->text;
      if (stream_text) {
        std::fwrite(chunk->text.data(), 1, chunk->text.size(), stdout);
        std::fflush(stdout);
      }
      if (chunk->finished) {
        r.times = chunk->times;
        r.finish_reason = chunk->finish_reason;
        if (!chunk->error.ok()) r.error = chunk->error.message();
      }
    }
  }
  if (stream_text) {
    std::printf("\n");
    std::fflush(stdout);
  }
  // Speeds: prompt tokens over the prefill time, generated tokens after the first over the
  // decode time (summed over prompts, which ran concurrently).
  int64_t prompt_tokens = 0, decode_tokens = 0;
  double first_sched = 1e300, first_tok = 0, last_tok = 0, first_tok_min = 1e300;
  for (const auto& r : results) {
    prompt_tokens += static_cast<int64_t>(r.prompt_ids.size());
    decode_tokens += std::max<int64_t>(0, static_cast<int64_t>(r.generated_ids.size()) - 1);
    if (r.times.first_scheduled >= 0) first_sched = std::min(first_sched, r.times.first_scheduled);
    if (r.times.first_token >= 0) {
      first_tok = std::max(first_tok, r.times.first_token);
      first_tok_min = std::min(first_tok_min, r.times.first_token);
    }
    last_tok = std::max(last_tok, r.times.last_token);
  }
  const double prefill_s = first_tok - first_sched;
  const double decode_s = last_tok - first_tok_min;
  const double prompt_tps = prefill_s > 0 ? prompt_tokens / prefill_s : 0;
  const double decode_tps = decode_s > 0 ? decode_tokens / decode_s : 0;
  int rc = 0;
  for (size_t i = 0; i < results.size(); ++i)
    if (!results[i].error.empty()) {
      std::cerr << "strata generate: prompt " << i << " failed: " << results[i].error << "\n";
      rc = 1;
    }
  if (json) {
    OrderedJson all = OrderedJson::array();
    for (const auto& r : results) {
      OrderedJson o;
      o["prompt_ids"] = r.prompt_ids;
      o["generated_ids"] = r.generated_ids;
      o["text"] = r.text;
      o["finish_reason"] = r.finish_reason;
      o["prompt_tokens_per_s"] = prompt_tps;
      o["decode_tokens_per_s"] = decode_tps;
      all.push_back(o);
    }
    const OrderedJson& out = results.size() == 1 ? all[0] : all;
    std::cout << out.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) << "\n";
  } else if (!stream_text) {
    for (size_t i = 0; i < results.size(); ++i)
      std::printf("=== prompt %zu ===\n%s\n", i, results[i].text.c_str());
  }
  std::fprintf(stderr, "prompt: %lld tokens, %.1f tokens/s; decode: %lld tokens, %.1f tokens/s\n",
               static_cast<long long>(prompt_tokens), prompt_tps,
               static_cast<long long>(decode_tokens), decode_tps);
  client_or->reset();  // stops the other ranks (several ranks)
  if (dist.deployment) {
    if (dist.deployment->failed()) rc = 1;
    return dist.deployment->finish(rc);
  }
  return rc;
}

STRATA_REGISTER_COMMAND(kGenerate, "generate", "MODEL [options]",
                        "Generate text for one or more prompts (runs them concurrently)",
                        add_options, run);

}  // namespace
}  // namespace strata::apps

// `strata bench tokenizer`: single-threaded encode/decode throughput of a model's tokenizer on
// English prose and on mixed-script text (or on a file you give).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include "apps/command.h"
#include "core/file_util.h"
#include "core/json.h"
#include "tokenizer/tokenizer.h"

namespace strata::apps {

namespace {

// Fallback texts written for this benchmark, used when ../shared/data is not there.
constexpr const char* kEnglish =
    "The harbour town woke slowly that morning. Fishing boats knocked against the pier while "
    "gulls argued over the remains of last night's catch, and the baker on the corner pulled "
    "the first trays of bread from an oven that had been burning since four o'clock. Nobody "
    "hurried; the tide would not turn for another two hours, and the ferry to the mainland was "
    "late again, as it had been every day since the engine was repaired in March.\n"
    "Maria had lived there for thirty-one years. She knew which doors stuck in wet weather, "
    "which dogs would follow a stranger to the edge of town, and why the clock above the post "
    "office always showed ten past three. When the engineers arrived with their instruments and "
    "their questions about the seawall, she answered politely, offered them coffee, and said "
    "nothing about the storm of 1987 until they asked her directly. Then she talked for an hour.\n"
    "\"The water came over here,\" she said, pointing at a line of darker stone about a metre "
    "above the pavement. \"We moved the chairs upstairs, then the books, then ourselves. In the "
    "morning the street was full of sand and somebody's rowing boat was sitting outside the "
    "pharmacy.\" The younger engineer wrote quickly; the older one just listened, and nodded.\n";
constexpr const char* kMixed =
    "Bonjour à tous, le café est prêt. Straße, Größe und Übung sind schwierige Wörter. "
    "Привет, как дела? Сегодня хорошая погода. Γειά σου κόσμε. 今天天气很好，我们去公园散步吧。"
    "東京の駅はとても大きいです。오늘은 날씨가 좋네요. مرحبا بكم في المدينة. नमस्ते, आप कैसे "
    "हैं? สวัสดีครับ ยินดีต้อนรับ. שלום לכולם. Emoji: 🚀🌙🐱🎉 👨‍👩‍👧 ✓ — “quotes” … ½ "
    "∑ "
    "∞.\n";

std::string shared_dir() {
  if (const char* env = std::getenv("STRATA_SHARED_DATA"); env != nullptr && *env) return env;
  return "../shared/data";
}

// ShareGPT prompts (English prose and questions) when available.
std::vector<std::string> english_texts() {
  std::vector<std::string> texts;
  auto j = read_json_file(shared_dir() + "/datasets/ShareGPT_V3_filtered_500.json");
  if (j.ok() && j->is_array()) {
    for (const auto& conv : *j) {
      for (const auto& turn : conv.value("conversations", Json::array())) {
        if (turn.contains("value") && turn["value"].is_string()) texts.push_back(turn["value"]);
      }
    }
  }
  if (texts.empty()) texts.assign(40, kEnglish);
  return texts;
}

// The multilingual tokenizer conformance inputs (many scripts, emoji) when available.
std::vector<std::string> mixed_texts() {
  std::vector<std::string> texts;
  auto j =
      read_json_file(shared_dir() + "/tokenizer-tests/swift-transformers-multilingual/inputs.json");
  if (j.ok() && j->contains("inputs")) {
    for (const auto& in : (*j)["inputs"]) texts.push_back(in.value("text", ""));
  }
  texts.push_back(kMixed);
  return texts;
}

// CPU time of this thread: other processes on a busy machine do not distort it.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Figures {
  size_t bytes = 0, tokens = 0;
  double first_pass_s = 0, best_pass_s = 0, decode_s = 0;
};

Result<Figures> measure(const Tokenizer& tok, const std::vector<std::string>& texts,
                        double min_seconds) {
  Figures f;
  for (const auto& t : texts) f.bytes += t.size();
  std::vector<std::vector<int32_t>> encoded(texts.size());
  f.best_pass_s = 1e30;
  double start = thread_cpu_seconds();
  for (int pass = 0; pass < 1000; ++pass) {
    double t0 = thread_cpu_seconds();
    for (size_t i = 0; i < texts.size(); ++i) {
      auto ids = tok.encode(texts[i], false);
      if (!ids.ok()) return ids.status();
      encoded[i] = std::move(ids).value();
    }
    double s = thread_cpu_seconds() - t0;
    if (pass == 0) f.first_pass_s = s;
    f.best_pass_s = std::min(f.best_pass_s, s);
    if (thread_cpu_seconds() - start >= min_seconds && pass >= 2) break;
  }
  for (const auto& e : encoded) f.tokens += e.size();
  double best_decode = 1e30;
  for (int pass = 0; pass < 3; ++pass) {
    double t0 = thread_cpu_seconds();
    size_t out = 0;
    for (const auto& e : encoded) out += tok.decode(e, false).size();
    best_decode = std::min(best_decode, thread_cpu_seconds() - t0);
    if (out == 0 && f.bytes != 0) return internal_error("decode produced no text");
  }
  f.decode_s = best_decode;
  return f;
}

void print(const std::string& name, size_t num_texts, const Figures& f) {
  double mb = static_cast<double>(f.bytes) / 1e6;
  std::printf("%s: %.1f KB in %zu texts, %zu tokens (%.2f bytes/token)\n", name.c_str(),
              static_cast<double>(f.bytes) / 1e3, num_texts, f.tokens,
              f.tokens ? static_cast<double>(f.bytes) / static_cast<double>(f.tokens) : 0.0);
  std::printf("  encode: %7.2f MB/s  (first pass, cold cache: %.2f MB/s)  %.2f M tokens/s\n",
              mb / f.best_pass_s, mb / f.first_pass_s,
              static_cast<double>(f.tokens) / f.best_pass_s / 1e6);
  std::printf("  decode: %7.2f MB/s\n", mb / f.decode_s);
}

void add_options(OptionSet& o) {
  o.add_string("file", "",
               "benchmark this text file instead of the built-in English and "
               "mixed-script sets");
  o.add_float("seconds", 2.0, "minimum time to spend encoding each text set");
}

int run(const Args& args) {
  if (args.positional().size() != 1) {
    std::cerr << "strata bench tokenizer: expected one MODEL_OR_TOKENIZER_DIR\n";
    return 2;
  }
  auto tok = Tokenizer::load(args.positional()[0]);
  if (!tok.ok()) {
    std::cerr << "strata bench tokenizer: " << tok.status().message() << "\n";
    return 1;
  }
  const TokenizerInfo& info = (*tok)->info();
  std::printf("tokenizer: %s (%s, %s), vocab %d; one thread, MB/s of thread CPU time\n",
              info.source.c_str(), info.format.c_str(), info.model.c_str(), (*tok)->vocab_size());
  std::vector<std::pair<std::string, std::vector<std::string>>> sets;
  if (args.is_set("file")) {
    auto data = read_file(args.get("file"));
    if (!data.ok()) {
      std::cerr << "strata bench tokenizer: " << data.status().message() << "\n";
      return 1;
    }
    sets.push_back({"file", {std::move(data).value()}});
  } else {
    sets.push_back({"english", english_texts()});
    sets.push_back({"mixed-script", mixed_texts()});
  }
  for (const auto& [name, texts] : sets) {
    auto f = measure(**tok, texts, args.get_float("seconds"));
    if (!f.ok()) {
      std::cerr << "strata bench tokenizer: " << name << ": " << f.status().message() << "\n";
      return 1;
    }
    print(name, texts.size(), *f);
  }
  return 0;
}

}  // namespace

STRATA_REGISTER_COMMAND(kBenchTokenizer, "bench tokenizer", "MODEL_OR_TOKENIZER_DIR [--file F]",
                        "measure single-threaded tokenizer encode/decode throughput (MB/s)",
                        add_options, run);

}  // namespace strata::apps

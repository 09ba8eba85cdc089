// `strata generate`, `strata bench latency` and `strata bench throughput` driven through the
// built binary: greedy text and ids on real weights (HF and GGUF) equal the golden file, the JSON
// output's fields, several prompts at once, speed lines, help, and clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>

#include "cli_util.h"
#include "core/json.h"
#include "test_util.h"

namespace strata {
namespace {

// `generate` and `bench throughput` size their KV cache from the machine's RAM by default and
// commit it at start; these runs need little of it, and other tests run beside them.
const bool kSmallKvCache = [] { return ::setenv("STRATA_KV_CACHE_MEMORY", "256MiB", 0) == 0; }();

using testing::CliRun;
using testing::run_strata;

struct GoldenCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids, generated_ids;
};

std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> out;
  auto doc = read_json_file(testing::shared_data_path("golden/stories260K.json"));
  if (!doc.ok()) return out;
  for (const Json& c : (*doc)["cases"]) {
    out.push_back({c["prompt"].get<std::string>(), c["prompt_ids"].get<std::vector<int32_t>>(),
                   c["generated_ids"].get<std::vector<int32_t>>()});
  }
  return out;
}

std::vector<int32_t> ints(const Json& a) {
  return a.get<std::vector<int32_t>>();
}

Result<Json> parse(const std::string& text) {
  return parse_json(text, "strata's output");
}

// A positive number after `label` in text (e.g. "decode: 12.5 tokens/s").
double figure_after(const std::string& text, const std::string& label) {
  size_t at = text.find(label);
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + label.size(), nullptr);
}

// A printed figure and half a unit of its last printed digit (its rounding error).
struct Printed {
  double value = -1;
  double half_ulp = 0;
};

// The number after `label` in text, with its rounding error; value -1 when absent.
Printed printed_after(const std::string& text, const std::string& label) {
  Printed p;
  size_t at = text.find(label);
  if (at == std::string::npos) return p;
  const char* begin = text.c_str() + at + label.size();
  while (*begin == ' ') ++begin;
  char* end = nullptr;
  p.value = std::strtod(begin, &end);
  const char* dot = std::find(begin, static_cast<const char*>(end), '.');
  const long decimals = dot == end ? 0 : static_cast<long>(end - dot - 1);
  p.half_ulp = 0.5 * std::pow(10.0, -decimals);
  return p;
}

// `actual` (printed) equals `expected` computed from printed inputs whose relative rounding
// errors add up to `rel_err`. Through products and quotients of such inputs the exact value is
// within a factor 1 +- rel_err / (1 - rel_err) of `expected` (dividing by an input printed
// rounded up by r is off by r / (1 - r), more than r).
void expect_consistent(const Printed& actual, double expected, double rel_err,
                       const std::string& what) {
  ASSERT_GE(actual.value, 0) << what << " missing";
  ASSERT_LT(rel_err, 1) << what << ": inputs printed too coarsely to compare";
  EXPECT_NEAR(actual.value, expected, expected * rel_err / (1 - rel_err) + actual.half_ulp + 1e-12)
      << what << ": printed " << actual.value << ", the other figures give " << expected;
}

double rel(const Printed& p) {
  return p.value > 0 ? p.half_ulp / p.value : 0;
}

TEST(GenerateCli, GreedyJsonMatchesGoldenOnHfAndGguf) {
  STRATA_REQUIRE_SHARED("golden/stories260K.json");
  auto cases = golden_cases();
  ASSERT_FALSE(cases.empty());
  for (const char* model : {"models/stories260K-hf", "models/stories260K.gguf"}) {
    for (const GoldenCase& g : cases) {
      const int n = std::min<int>(32, static_cast<int>(g.generated_ids.size()));
      std::string ids;
      for (int32_t id : g.prompt_ids) {
        if (!ids.empty()) ids += ',';
        ids += std::to_string(id);
      }
      CliRun r = run_strata("generate " + testing::shared_data_path(model) + " --prompt-ids " +
                                ids + " --max-tokens " + std::to_string(n) +
                                " --temperature 0 --ignore-eos --json",
                            /*split_stderr=*/true);
      ASSERT_EQ(r.code, 0) << r.out << r.err;
      auto j = parse(r.out);
      ASSERT_TRUE(j.ok()) << r.out;
      EXPECT_EQ(ints((*j)["prompt_ids"]), g.prompt_ids) << model;
      std::vector<int32_t> want(g.generated_ids.begin(), g.generated_ids.begin() + n);
      EXPECT_EQ(ints((*j)["generated_ids"]), want) << model << " prompt '" << g.prompt << "'";
      EXPECT_FALSE((*j)["text"].get<std::string>().empty());
      // The speeds in the JSON are those of the stderr line, over the right token counts.
      const double prompt_tps = (*j)["prompt_tokens_per_s"],
                   decode_tps = (*j)["decode_tokens_per_s"];
      EXPECT_GT(prompt_tps, 0);
      EXPECT_GT(decode_tps, 0);
      EXPECT_NE(r.err.find("prompt: " + std::to_string(g.prompt_ids.size()) + " tokens, "),
                std::string::npos)
          << r.err;
      EXPECT_NE(r.err.find("decode: " + std::to_string(n - 1) + " tokens, "), std::string::npos)
          << r.err;
      expect_consistent(printed_after(r.err, " tokens, "), prompt_tps, 0, "prompt tokens/s");
      const size_t decode_at = r.err.find("decode: ");
      ASSERT_NE(decode_at, std::string::npos) << r.err;
      expect_consistent(printed_after(r.err.substr(decode_at), " tokens, "), decode_tps, 0,
                        "decode tokens/s");
    }
  }
}

TEST(GenerateCli, StreamsTextToStdoutAndSpeedToStderr) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf/config.json");
  const std::string model = testing::shared_data_path("models/stories260K-hf");
  CliRun r = run_strata("generate " + model + " --prompt 'Once upon a time' --max-tokens 32 " +
                            "--temperature 0 --threads 1",
                        true);
  ASSERT_EQ(r.code, 0) << r.err;
  // The text prompt tokenizes to the golden ids, so the continuation is the golden one.
  CliRun j = run_strata("generate " + model + " --prompt 'Once upon a time' --max-tokens 32 " +
                            "--temperature 0 --json",
                        true);
  ASSERT_EQ(j.code, 0) << j.err;
  auto doc = parse(j.out);
  ASSERT_TRUE(doc.ok()) << j.out;
  EXPECT_EQ(ints((*doc)["prompt_ids"]), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  const std::string text = (*doc)["text"].get<std::string>();
  EXPECT_EQ(text.rfind(", there was a little girl named Lily.", 0), 0u) << text;
  // Streamed stdout is exactly the text (and a final newline), speed lines only on stderr.
  EXPECT_EQ(r.out, text + "\n");
  EXPECT_GT(figure_after(r.err, "prompt: 5 tokens, "), 0) << r.err;
  EXPECT_NE(r.err.find("tokens/s; decode: 31 tokens, "), std::string::npos) << r.err;
}

TEST(GenerateCli, SeveralPromptsRunTogetherAndMatchAlone) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf/config.json");
  const std::string model = testing::shared_data_path("models/stories260K-hf");
  const std::string common = " --max-tokens 12 --temperature 0 --ignore-eos --json";
  CliRun both =
      run_strata("generate " + model + " --prompt 'Once upon a time' --prompt Zoo" + common, true);
  ASSERT_EQ(both.code, 0) << both.err;
  auto arr = parse(both.out);
  ASSERT_TRUE(arr.ok()) << both.out;
  ASSERT_EQ((*arr).size(), 2u);
  for (int i = 0; i < 2; ++i) {
    CliRun alone = run_strata(
        "generate " + model + (i == 0 ? " --prompt 'Once upon a time'" : " --prompt Zoo") + common,
        true);
    auto one = parse(alone.out);
    ASSERT_TRUE(one.ok()) << alone.out;
    EXPECT_EQ(ints((*arr)[i]["generated_ids"]), ints((*one)["generated_ids"]));
  }
}

TEST(GenerateCli, SeededSamplingIsReproducible) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf/config.json");
  auto sample = [](int seed) {
    CliRun r = run_strata("generate " + testing::shared_data_path("models/stories260K-hf") +
                              " --prompt 'Once upon a time' --max-tokens 24 --temperature 1.2 "
                              "--top-p 0.95 --top-k 40 --ignore-eos --json --seed " +
                              std::to_string(seed),
                          true);
    EXPECT_EQ(r.code, 0) << r.err;
    auto j = parse(r.out);
    return j.ok() ? ints((*j)["generated_ids"]) : std::vector<int32_t>{};
  };
  const auto a = sample(7);
  ASSERT_EQ(a.size(), 24u);
  EXPECT_EQ(a, sample(7));
  // The seed matters: another seed draws another sequence.
  EXPECT_NE(a, sample(8));
}

TEST(GenerateCli, DummyWeightsFromTheRepoConfig) {
  CliRun r = run_strata("generate " + testing::repo_path("models/strata-tiny") +
                            " --load-format dummy --prompt hello --max-tokens 8 --temperature 0 "
                            "--ignore-eos --dtype bfloat16 --json",
                        true);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = parse(r.out);
  ASSERT_TRUE(j.ok()) << r.out;
  EXPECT_EQ((*j)["generated_ids"].size(), 8u);
}

TEST(GenerateCli, ClearErrors) {
  CliRun r = run_strata("generate /nonexistent/model --prompt hi");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("'/nonexistent/model' does not exist"), std::string::npos) << r.out;
  r = run_strata("generate " + testing::repo_path("models/strata-tiny") + " --no-such-flag 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--no-such-flag"), std::string::npos) << r.out;
  r = run_strata("generate " + testing::repo_path("models/strata-tiny") +
                 " --load-format dummy --prompt-ids 1,99999 --max-tokens 2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("99999 is outside the vocabulary"), std::string::npos) << r.out;
  r = run_strata("generate " + testing::repo_path("models/strata-tiny") +
                 " --load-format safetensors --prompt hi");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("strata-tiny"), std::string::npos) << r.out;
  // Nothing crashed: every failure is an exit code, never a signal.
  EXPECT_GE(r.code, 0);
}

TEST(GenerateCli, HelpListsEveryOptionWithItsDefault) {
  CliRun top = run_strata("--help");
  EXPECT_EQ(top.code, 0);
  for (const char* cmd : {"generate", "serve", "bench latency", "bench throughput", "tokenize"})
    EXPECT_NE(top.out.find(cmd), std::string::npos) << cmd;
  CliRun r = run_strata("generate --help");
  EXPECT_EQ(r.code, 0);
  for (const char* opt : {"--prompt ", "--prompt-ids", "--max-tokens", "--temperature", "--top-p",
                          "--top-k", "--seed", "--threads", "--load-format", "--dtype", "--json"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
  EXPECT_NE(r.out.find("(default: 64"), std::string::npos);
}

// --context-len: decode at a context without a prefill, with the KV held and read there.
TEST(BenchCli, LatencyAtAContextSkipsThePrefill) {
  CliRun r = run_strata("bench latency " + testing::repo_path("models/strata-tiny") +
                            " --load-format dummy --context-len 100 --output-len 3 --num-iters 1 "
                            "--bandwidth-mib 16 --threads 2",
                        true);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string& o = r.out;
  EXPECT_NE(o.find("batch size: 1, context len: 100, output len: 3"), std::string::npos) << o;
  EXPECT_NE(o.find("context: 100 tokens (no prefill"), std::string::npos) << o;
  EXPECT_EQ(o.find("\nprefill: "), std::string::npos) << o;
  const Printed per_token = printed_after(o, "KV bytes per token: ");
  ASSERT_GT(per_token.value, 0) << o;
  // 100 tokens x the bytes per token, held and read (dense attention reads every row).
  char kib[32];
  std::snprintf(kib, sizeof kib, "%.2f KiB", per_token.value * 100 / 1024);
  EXPECT_NE(o.find(std::string("KV bytes at 100 tokens of context: ") + kib +
                   " held per sequence, " + kib + " read per decode token"),
            std::string::npos)
      << o;
  EXPECT_EQ(run_strata("bench latency " + testing::repo_path("models/strata-tiny") +
                           " --load-format dummy --context-len -1",
                       true)
                .code,
            2);
}

TEST(BenchCli, LatencyPrintsSpeedsAndUtilisation) {
  CliRun r = run_strata("bench latency " + testing::repo_path("models/strata-tiny") +
                            " --load-format dummy --input-len 16 --output-len 4 --num-iters 1 "
                            "--bandwidth-mib 16 --threads 2",
                        true);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string& o = r.out;
  EXPECT_NE(o.find("threads: 2, batch size: 1, input len: 16, output len: 4"), std::string::npos)
      << o;
  // Every figure is measured, so none can be predicted; each must agree with the others.
  const Printed prefill_tps = printed_after(o, "prefill: ");
  const Printed prefill_ms = printed_after(o, "tokens/s (");
  ASSERT_NE(o.find(" ms for 16 tokens)"), std::string::npos) << o;
  ASSERT_GE(prefill_ms.value, 0) << o;
  if (prefill_ms.value > 0)  // else printed as 0.0 ms: too fast for its one decimal
    expect_consistent(prefill_tps, 16 / (prefill_ms.value / 1e3), rel(prefill_ms),
                      "prefill tokens/s against its time");
  const Printed decode_tps = printed_after(o, "decode: ");
  const size_t step_at = o.find("decode: ");
  ASSERT_NE(step_at, std::string::npos) << o;
  const Printed step_ms = printed_after(o.substr(step_at), "tokens/s (");
  ASSERT_GE(step_ms.value, 0) << o;
  if (step_ms.value > 0)
    expect_consistent(decode_tps, 1e3 / step_ms.value, rel(step_ms),
                      "decode tokens/s against ms per step");
  // Bandwidth utilisation: weight bytes per step x steps per second / measured bandwidth.
  const Printed weights_mib = printed_after(o, "weight bytes per decode step: ");
  ASSERT_TRUE(std::regex_search(o, std::regex(R"(weight bytes per decode step: [0-9.]+ MiB\n)")))
      << "the tiny model's weights are a few MiB: " << o;
  const Printed bandwidth = printed_after(o, "measured read bandwidth: ");
  ASSERT_GT(bandwidth.value, 0) << o;
  expect_consistent(printed_after(o, "decode bandwidth utilisation = "),
                    weights_mib.value * (1 << 20) * decode_tps.value / (bandwidth.value * 1e9),
                    rel(weights_mib) + rel(decode_tps) + rel(bandwidth),
                    "decode bandwidth utilisation");
  // Compute utilisation: achieved GFLOP/s over the measured peak; prefill GFLOP/s is its work
  // over its time.
  const Printed peak = printed_after(o, "measured f32 FMA peak: ");
  ASSERT_GT(peak.value, 0) << o;
  const size_t dcu = o.find("decode compute utilisation = ");
  ASSERT_NE(dcu, std::string::npos) << o;
  const Printed decode_gflops = printed_after(o.substr(dcu), "(");
  expect_consistent(printed_after(o, "decode compute utilisation = "),
                    decode_gflops.value / peak.value, rel(decode_gflops) + rel(peak),
                    "decode compute utilisation");
  const size_t pcu = o.find("prefill compute utilisation = ");
  ASSERT_NE(pcu, std::string::npos) << o;
  const Printed prefill_gflops = printed_after(o.substr(pcu), "(");
  expect_consistent(printed_after(o, "prefill compute utilisation = "),
                    prefill_gflops.value / peak.value, rel(prefill_gflops) + rel(peak),
                    "prefill compute utilisation");
  const Printed prefill_work = printed_after(o.substr(pcu), "GFLOP/s of ");
  if (prefill_ms.value > 0)
    expect_consistent(prefill_gflops, prefill_work.value / (prefill_ms.value / 1e3),
                      rel(prefill_work) + rel(prefill_ms), "prefill GFLOP/s against its time");
}

TEST(BenchCli, LatencyProfileSaysWhereADecodeStepGoes) {
  CliRun r = run_strata("bench latency " + testing::repo_path("models/strata-tiny") +
                            " --load-format dummy --input-len 16 --output-len 5 --num-iters 1 "
                            "--bandwidth-mib 16 --threads 2 --block-size 4 --profile",
                        true);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_NE(r.out.find("decode step profile"), std::string::npos) << r.out;
  // Per decode step every layer runs its attention once, and the matmuls (batch 1) are gemvs
  // with a bandwidth figure.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m, std::regex(R"(gemv +[0-9.]+ ms per step .*calls per step, ([0-9.]+) GB/s)")))
      << r.out;
  EXPECT_GT(std::stod(m[1]), 0);
  ASSERT_TRUE(std::regex_search(
      r.out, m, std::regex(R"(attention +[0-9.]+ ms per step \( *[0-9.]+%\), +([0-9.]+) calls)")))
      << r.out;
  EXPECT_EQ(std::stod(m[1]), 4.0) << "strata-tiny has 4 layers";
  EXPECT_NE(r.out.find("rest "), std::string::npos) << r.out;
  // The prefill of 16 tokens is one forward: 4 attention calls in all, its matmuls are gemms.
  ASSERT_NE(r.out.find("prefill profile"), std::string::npos) << r.out;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(R"(attention +[0-9.]+ ms in all \( *[0-9.]+%\), +([0-9.]+) calls in all)")))
      << r.out;
  EXPECT_EQ(std::stod(m[1]), 4.0);
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(gemm +[0-9.]+ ms in all)"))) << r.out;
  // Each profile accounts for its whole run: the ops and "rest" add up to the total time and to
  // 100%.
  for (const char* section :
       {"prefill profile (one more run, ", "decode step profile (the same run, "}) {
    const size_t at = r.out.find(section);
    ASSERT_NE(at, std::string::npos) << r.out;
    const Printed total = printed_after(r.out.substr(at), section);
    ASSERT_GT(total.value, 0) << r.out;
    std::istringstream lines(r.out.substr(r.out.find('\n', at) + 1));
    std::string line;
    double ms = 0, ms_err = 0, percent = 0, percent_err = 0;
    int ops = 0;
    const std::regex op_line(R"(^  ([a-z_]+) +([0-9.]+) ms (in all|per step) \( *([0-9.]+)%\))");
    while (std::getline(lines, line)) {
      std::smatch op;
      if (!std::regex_search(line, op, op_line)) break;
      const Printed t = printed_after(op[2].str(), "");
      const Printed p = printed_after(op[4].str(), "");
      ms += t.value;
      ms_err += t.half_ulp;
      percent += p.value;
      percent_err += p.half_ulp;
      ++ops;
      if (op[1] == "rest") break;
    }
    EXPECT_GE(ops, 5) << section << "\n" << r.out;
    EXPECT_NEAR(ms, total.value, ms_err + total.half_ulp + 1e-9) << section << "\n" << r.out;
    EXPECT_NEAR(percent, 100.0, percent_err + 1e-9) << section << "\n" << r.out;
  }
}

TEST(BenchCli, ThroughputPrintsRequestAndTokenRates) {
  CliRun r = run_strata("bench throughput " + testing::repo_path("models/strata-tiny") +
                            " --load-format dummy --num-prompts 6 --input-len 24 --output-len 8",
                        true);
  ASSERT_EQ(r.code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m,
                                std::regex(R"(Throughput: ([0-9.]+) requests/s, ([0-9.]+) total )"
                                           R"(tokens/s, ([0-9.]+) output tokens/s)")))
      << r.out;
  const Printed requests = printed_after(m[1].str(), ""), total = printed_after(m[2].str(), ""),
                output = printed_after(m[3].str(), "");
  ASSERT_GT(output.value, 0);
  // 24 prompt + 8 output tokens per request: total is 4x output, output 8x requests.
  expect_consistent(total, 4 * output.value, rel(output), "total tokens/s");
  expect_consistent(output, 8 * requests.value, rel(requests), "output tokens/s");
  EXPECT_NE(r.out.find("requests: 6 ok, 0 failed; prompt tokens 144, output tokens 48"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace strata

// serve's options: vLLM flags accepted with one warning each, unknown flags named, values read.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/engine_config.h"
#include "server/server_config.h"

namespace strata::server {
namespace {

OptionSet serve_options() {
  OptionSet o;
  add_server_options(o);
  engine::add_engine_options(o);
  return o;
}

TEST(ServerConfig, VllmCommandLineIsAcceptedWithWarnings) {
  OptionSet o = serve_options();
  auto args = o.parse({"models/x",
                       "--host",
                       "127.0.0.1",
                       "--port",
                       "9000",
                       "--served-model-name",
                       "a",
                       "--served-model-name",
                       "b",
                       "--trust-remote-code",
                       "--enforce-eager",
                       "--compilation-config",
                       "{\"level\": 3}",
                       "--no-enable-flashinfer-autotune",
                       "--device",
                       "cpu",
                       "--distributed-executor-backend",
                       "mp",
                       "--data-parallel-size",
                       "2",
                       "--tool-call-parser",
                       "hermes",
                       "--enable-auto-tool-choice",
                       "--reasoning-parser",
                       "deepseek_r1",
                       "--cpu-offload-gb",
                       "4",
                       "--max-model-len",
                       "256",
                       "--api-key",
                       "k",
                       "--max-log-len",
                       "20",
                       "--log-stats-interval",
                       "5",
                       "--max-queued-requests",
                       "3",
                       "--request-timeout",
                       "30",
                       "--generation-config",
                       "none",
                       "--disable-log-requests"});
  ASSERT_TRUE(args.ok()) << args.status().message();
  std::vector<std::string> warnings = args->warnings();
  auto c = server_config_from_args(*args, &warnings);
  ASSERT_TRUE(c.ok()) << c.status().message();
  // One line per ignored flag, each naming it.
  for (const char* flag :
       {"--trust-remote-code", "--enforce-eager", "--compilation-config",
        "--enable-flashinfer-autotune", "--device", "--distributed-executor-backend",
        "--data-parallel-size 2", "--cpu-offload-gb"}) {
    int n = 0;
    for (const auto& w : warnings) n += w.rfind(flag, 0) == 0;
    EXPECT_EQ(n, 1) << flag;
  }
  EXPECT_EQ(warnings.size(), 8u);
  for (const auto& w : warnings) EXPECT_NE(w.find("no effect"), std::string::npos) << w;
  EXPECT_EQ(c->host, "127.0.0.1");
  EXPECT_EQ(c->port, 9000);
  EXPECT_EQ(c->served_model_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c->model_name(), "a");
  EXPECT_TRUE(c->serves("b"));
  EXPECT_FALSE(c->serves("models/x"));
  EXPECT_EQ(c->model_path, "models/x");
  EXPECT_EQ(c->api_key, "k");
  EXPECT_EQ(c->max_log_len, 20);
  EXPECT_DOUBLE_EQ(c->log_stats_interval, 5);
  EXPECT_EQ(c->max_queued_requests, 3);
  EXPECT_DOUBLE_EQ(c->request_timeout, 30);
  EXPECT_FALSE(c->log_requests);
  // The tool-call and reasoning flags are real (no warning).
  EXPECT_TRUE(c->enable_auto_tool_choice);
  EXPECT_EQ(c->tool_call_parser, "hermes");
  EXPECT_EQ(c->reasoning_parser, "deepseek_r1");
  auto e = engine::engine_config_from_args(*args);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->scheduler.max_model_len, 256);
  EXPECT_EQ(e->generation_config, "none");
}

TEST(ServerConfig, TokenizerMode) {
  OptionSet o = serve_options();
  std::vector<std::string> w;
  auto args = o.parse({"m"});
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(server_config_from_args(*args, &w)->tokenizer_mode, "auto");
  args = o.parse({"m", "--tokenizer-mode", "deepseek_v4"});
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(server_config_from_args(*args, &w)->tokenizer_mode, "deepseek_v4");
  args = o.parse({"m", "--tokenizer-mode", "slow"});
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(server_config_from_args(*args, &w)->tokenizer_mode, "slow");
  EXPECT_TRUE(w.empty());
  // A mode Strata does not have is accepted with one warning (vLLM command lines keep working).
  args = o.parse({"m", "--tokenizer-mode", "mistral"});
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(server_config_from_args(*args, &w)->tokenizer_mode, "auto");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("--tokenizer-mode mistral", 0), 0u) << w[0];
}

TEST(ServerConfig, UnknownFlagIsNamed) {
  OptionSet o = serve_options();
  auto args = o.parse({"m", "--max-num-seqz", "4"});
  ASSERT_FALSE(args.ok());
  EXPECT_NE(args.status().message().find("--max-num-seqz"), std::string::npos);
}

TEST(ServerConfig, DefaultsAndErrors) {
  OptionSet o = serve_options();
  auto args = o.parse({"m"});
  ASSERT_TRUE(args.ok());
  std::vector<std::string> w;
  ::unsetenv("STRATA_API_KEY");
  auto c = server_config_from_args(*args, &w);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->port, 8000);
  EXPECT_EQ(c->model_name(), "m");
  EXPECT_TRUE(c->serves("m"));
  EXPECT_DOUBLE_EQ(c->log_stats_interval, 10);
  EXPECT_TRUE(c->log_requests);
  EXPECT_EQ(c->max_request_body_bytes, 32 << 20);
  EXPECT_EQ(c->stream_buffer_bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(c->stream_stall_timeout, 60);
  EXPECT_EQ(c->max_connections, 4096);
  EXPECT_TRUE(w.empty());
  for (std::vector<std::string> bad : {std::vector<std::string>{"m", "--port", "70000"},
                                       {"m", "--max-queued-requests", "-1"},
                                       {"m", "--ssl-keyfile", "k.pem"},
                                       {"m", "--data-parallel-size", "0"},
                                       {"m", "--max-request-body-size", "12"},
                                       {"m", "--stream-buffer-size", "100"},
                                       {"m", "--stream-stall-timeout", "-1"},
                                       {"m", "--max-connections", "-1"}}) {
    auto a = o.parse(bad);
    ASSERT_TRUE(a.ok());
    auto r = server_config_from_args(*a, &w);
    EXPECT_FALSE(r.ok()) << bad[1];
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(bad[1]), std::string::npos);
    }
  }
}

TEST(ServerConfig, ApiKeyFromTheEnvironment) {
  ::setenv("STRATA_API_KEY", "secret", 1);
  OptionSet o = serve_options();
  auto args = o.parse({"m"});
  ::unsetenv("STRATA_API_KEY");
  ASSERT_TRUE(args.ok());
  std::vector<std::string> w;
  auto c = server_config_from_args(*args, &w);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->api_key, "secret");
}

}  // namespace
}  // namespace strata::server

namespace strata::server {
namespace {

TEST(ServerConfig, ToolAndReasoningParserNamesAreChecked) {
  struct Case {
    std::vector<std::string> argv;
    const char* error;  // "" when accepted
  };
  const Case cases[] = {
      {{"m", "--tool-call-parser", "deepseek_v4", "--enable-auto-tool-choice", "--reasoning-parser",
        "deepseek_v4"},
       ""},
      {{"m", "--tool-call-parser", "qwen3_coder"}, ""},
      {{"m", "--tool-call-parser", "hermes2"}, "known parsers: deepseek_v3, deepseek_v31"},
      {{"m", "--reasoning-parser", "r1"}, "known parsers: deepseek_r1, deepseek_v3"},
      {{"m", "--enable-auto-tool-choice"}, "needs --tool-call-parser"},
  };
  for (const auto& c : cases) {
    OptionSet o = serve_options();
    auto args = o.parse(c.argv);
    ASSERT_TRUE(args.ok()) << args.status().message();
    std::vector<std::string> warnings;
    auto cfg = server_config_from_args(*args, &warnings);
    if (*c.error == 0) {
      EXPECT_TRUE(cfg.ok()) << cfg.status().message();
      EXPECT_TRUE(warnings.empty());
    } else {
      ASSERT_FALSE(cfg.ok()) << c.argv[1];
      EXPECT_NE(cfg.status().message().find(c.error), std::string::npos) << cfg.status().message();
    }
  }
}

}  // namespace
}  // namespace strata::server

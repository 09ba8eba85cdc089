#include "core/options.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace strata {
namespace {

OptionSet make_options() {
  OptionSet o;
  o.add_int("max-num-seqs", 256, "max sequences per step");
  o.add_float("temperature", 1.0, "sampling temperature");
  o.add_bool("enable-prefix-caching", true, "prefix caching");
  o.add_string("host", "0.0.0.0", "bind address");
  o.add({.name = "prompt", .help = "prompt text", .repeated = true});
  o.add_ignored("trust-remote-code", false, "Strata never runs model code");
  o.add_ignored("compilation-config", true, "no graph compilation on CPU");
  return o;
}

TEST(OptionsTest, ParsesFormsAndDefaults) {
  auto o = make_options();
  auto r = o.parse({"model-dir", "--max_num_seqs", "16", "--temperature=0.5",
                    "--no-enable-prefix-caching", "--prompt", "a", "--prompt", "b"});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->positional(), std::vector<std::string>{"model-dir"});
  EXPECT_EQ(r->get_int("max-num-seqs"), 16);
  EXPECT_DOUBLE_EQ(r->get_float("temperature"), 0.5);
  EXPECT_FALSE(r->get_bool("enable-prefix-caching"));
  EXPECT_EQ(r->get("host"), "0.0.0.0");
  EXPECT_FALSE(r->is_set("host"));
  EXPECT_EQ(r->get_all("prompt"), (std::vector<std::string>{"a", "b"}));
}

TEST(OptionsTest, ErrorsNameTheOption) {
  auto o = make_options();
  auto r = o.parse({"--max-num-seq", "3"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--max-num-seq"), std::string::npos);
  r = o.parse({"--max-num-seqs", "many"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--max-num-seqs expects an integer"), std::string::npos);
  r = o.parse({"--host"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs a value"), std::string::npos);
}

TEST(OptionsTest, IgnoredFlagsWarn) {
  auto o = make_options();
  auto r = o.parse({"--trust-remote-code", "--compilation-config", "{\"level\":3}", "m"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->warnings().size(), 2u);
  EXPECT_EQ(r->positional(), std::vector<std::string>{"m"});
}

TEST(OptionsTest, EnvironmentFillsUnsetOptions) {
  auto o = make_options();
  setenv("STRATA_MAX_NUM_SEQS", "7", 1);
  auto r = o.parse({});
  unsetenv("STRATA_MAX_NUM_SEQS");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->get_int("max-num-seqs"), 7);
  EXPECT_TRUE(r->is_set("max-num-seqs"));
}

TEST(OptionsTest, HelpListsDefaults) {
  auto help = make_options().help_text();
  EXPECT_NE(help.find("--max-num-seqs N"), std::string::npos);
  EXPECT_NE(help.find("(default: 256; env STRATA_MAX_NUM_SEQS)"), std::string::npos);
  EXPECT_NE(help.find("--enable-prefix-caching, --no-enable-prefix-caching"), std::string::npos);
}

TEST(OptionsTest, ByteSizes) {
  EXPECT_EQ(*parse_byte_size("4096", "x"), 4096);
  EXPECT_EQ(*parse_byte_size("2GiB", "x"), 2LL << 30);
  EXPECT_EQ(*parse_byte_size("1.5G", "x"), 3LL << 29);
  EXPECT_EQ(*parse_byte_size("3GB", "x"), 3000000000LL);
  EXPECT_FALSE(parse_byte_size("lots", "x").ok());
  EXPECT_EQ(*parse_byte_size("8388607TiB", "x"), 8388607LL << 40);
  // Past 2^63 bytes: refused as too large, never wrapped into a negative size.
  for (const char* big : {"8388608TiB", "9000000000GiB", "99999999999999999999"}) {
    auto r = parse_byte_size(big, "--size");
    ASSERT_FALSE(r.ok()) << big << " -> " << *r;
    EXPECT_NE(r.status().message().find("too large"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace strata

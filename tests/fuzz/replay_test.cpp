// Replays every file under tests/fuzz/<target>/ (the hand-written seed corpus and the inputs of
// crashes the fuzzers found, kept as regressions) through its fuzz target, in every build: a
// Release run checks the promises, the sanitizer build also checks memory and undefined
// behaviour. A broken promise aborts with the target's message; the file being run is printed
// first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_targets.h"
#include "test_util.h"

namespace strata::fuzz {
namespace {

std::vector<std::string> corpus_files(const std::string& target) {
  std::vector<std::string> files;
  std::string dir = strata::testing::repo_path("tests/fuzz/" + target);
  if (!std::filesystem::is_directory(dir)) return files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class FuzzReplay : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzReplay, EveryCorpusFileKeepsThePromises) {
  const Target& t = GetParam();
  std::vector<std::string> files = corpus_files(t.name);
  ASSERT_GE(files.size(), 3u) << "tests/fuzz/" << t.name << "/ should hold a seed corpus";
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << path;
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.c_str(), bytes.size());
    EXPECT_EQ(t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0) << path;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, ::testing::ValuesIn(kTargets),
                         [](const ::testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace strata::fuzz

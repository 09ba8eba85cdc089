// Helpers shared by all test executables.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace strata::testing {

// ../shared/data relative to the repository root, or $STRATA_SHARED_DATA.
inline std::string shared_data_dir() {
  if (const char* env = std::getenv("STRATA_SHARED_DATA"); env != nullptr && *env) return env;
  return std::string(STRATA_SOURCE_DIR) + "/../shared/data";
}

inline std::string shared_data_path(const std::string& rel) { return shared_data_dir() + "/" + rel; }

inline std::string repo_path(const std::string& rel) {
  return std::string(STRATA_SOURCE_DIR) + "/" + rel;
}

inline bool path_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

}  // namespace strata::testing

// Fails (never skips) with a clear message when a shared data file is missing.
#define STRATA_REQUIRE_SHARED(rel)                                                         \
  do {                                                                                     \
    std::string p_ = ::strata::testing::shared_data_path(rel);                             \
    ASSERT_TRUE(::strata::testing::path_exists(p_))                                        \
        << "missing shared test data '" << p_                                              \
        << "': tests expect ../shared/data next to the repository (or set "                \
           "STRATA_SHARED_DATA to a copy)";                                                \
  } while (0)

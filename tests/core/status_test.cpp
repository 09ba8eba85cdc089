#include "core/status.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

Result<int> half(int x) {
  if (x % 2) return invalid_argument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> quarter(int x) {
  STRATA_ASSIGN_OR_RETURN(int h, half(x));
  STRATA_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(ok_status().ok());
  Status s = not_found("no file");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.to_string(), "NOT_FOUND: no file");
  EXPECT_EQ(s.with_context("loading x").message(), "loading x: no file");
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
  EXPECT_EQ(quarter(5).status().message(), "odd: 5");
}

TEST(StatusTest, ResultFromOkStatusIsAnError) {
  Result<int> r{Status()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace strata

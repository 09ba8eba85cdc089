// STRATA_CHECK: aborts with file:line and a message when an invariant is broken. Never use it for
// conditions a user or a file can cause; return a Status for those.
#pragma once

#include "core/logging.h"

#define STRATA_CHECK(cond)                                                                   \
  (cond) ? (void)0                                                                           \
         : ::strata::LogVoidify() &                                                          \
               ::strata::LogMessage(::strata::LogLevel::kFatal, __FILE__, __LINE__).stream() \
                   << "Check failed: " #cond " "

#define STRATA_CHECK_OP_(a, b, op) \
  STRATA_CHECK((a)op(b)) << "(" << (a) << " " #op " " << (b) << ") "
#define STRATA_CHECK_EQ(a, b) STRATA_CHECK_OP_(a, b, ==)
#define STRATA_CHECK_NE(a, b) STRATA_CHECK_OP_(a, b, !=)
#define STRATA_CHECK_LT(a, b) STRATA_CHECK_OP_(a, b, <)
#define STRATA_CHECK_LE(a, b) STRATA_CHECK_OP_(a, b, <=)
#define STRATA_CHECK_GT(a, b) STRATA_CHECK_OP_(a, b, >)
#define STRATA_CHECK_GE(a, b) STRATA_CHECK_OP_(a, b, >=)

#ifdef NDEBUG
#define STRATA_DCHECK(cond) \
  while (false) STRATA_CHECK(cond)
#else
#define STRATA_DCHECK(cond) STRATA_CHECK(cond)
#endif

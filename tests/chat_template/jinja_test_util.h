// Helpers for the Jinja interpreter tests: render a template with variables given as JSON.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/json.h"
#include "tokenizer/jinja/template.h"

namespace strata::jinja::testing {

// 2026-01-02 13:04:05 UTC, the time strftime_now() sees in tests (rendered in local time).
inline constexpr std::time_t kFixedNow = 1767359045;

inline Result<std::string> try_render(const std::string& source,
                                      const std::string& vars_json = "{}",
                                      RenderLimits limits = {}) {
  auto parsed = Template::parse(source);
  if (!parsed.ok()) return parsed.status();
  auto vars = parse_ordered_json(vars_json, "test variables");
  if (!vars.ok()) return vars.status();
  Variables variables;
  for (auto it = vars->begin(); it != vars->end(); ++it) {
    auto v = value_from_json(it.value());
    if (!v.ok()) return v.status();
    variables.emplace_back(it.key(), std::move(v).value());
  }
  RenderOptions options;
  options.limits = limits;
  options.now = kFixedNow;
  return parsed->render(variables, options);
}

// The rendered text, or "<error: message>" so that a failure shows in EXPECT_EQ.
inline std::string render(const std::string& source, const std::string& vars_json = "{}") {
  auto r = try_render(source, vars_json);
  return r.ok() ? *r : "<error: " + r.status().message() + ">";
}

// The error message of a template that must fail ("<no error>" when it rendered).
inline std::string error_of(const std::string& source, const std::string& vars_json = "{}") {
  auto r = try_render(source, vars_json);
  return r.ok() ? "<no error>" : r.status().message();
}

}  // namespace strata::jinja::testing

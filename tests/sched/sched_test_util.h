// A tiny engine stand-in for scheduler tests: schedules, "samples" with a stub, updates, checks
// invariants after every call, and renders each step as a line of text for exact comparisons.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace strata::sched::testing {

inline std::vector<int32_t> prompt(int n, int32_t start = 1000) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = start + i;
  return t;
}

struct Step {
  StepPlan plan;
  std::vector<RequestOutput> outputs;
  std::string trace;
};

class Driver {
 public:
  Driver(SchedulerConfig config, kv::CacheConfig cache, int64_t num_blocks) {
    auto s = Scheduler::create(config, cache, num_blocks, &clock);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) sched = std::move(s).value();
  }

  Status add(const std::string& id, std::vector<int32_t> tokens, int64_t max_tokens = 0,
             std::function<void(RequestSpec&)> edit = nullptr) {
    RequestSpec spec{.request_id = id, .prompt_token_ids = std::move(tokens)};
    spec.stop.max_tokens = max_tokens;
    if (edit) edit(spec);
    return sched->add_request(std::move(spec));
  }

  // The stub model: token = f(request, position), default a fixed function of both.
  std::function<int32_t(const ScheduledRequest&)> sampler = [](const ScheduledRequest& s) {
    return static_cast<int32_t>(7 + (s.num_computed_tokens + s.num_scheduled_tokens) % 5);
  };

  // One engine step. The trace lists each scheduled request as
  //   id<start>+<n>[whole block table]   (new or resumed)   or   id<start>+<n>+[new blocks]
  // with '*' when it samples, then "^id" for preemptions and "id=reason" for finishes.
  Step step() {
    Step st;
    st.plan = sched->schedule();
    sched->check_invariants();
    std::vector<int32_t> sampled;
    std::ostringstream os;
    for (const auto& s : st.plan.scheduled) {
      sampled.push_back(s.will_sample ? sampler(s) : kNoToken);
      os << (os.tellp() > 0 ? " " : "") << s.request_id << s.num_computed_tokens << "+"
         << s.num_scheduled_tokens << (s.new_block_table ? "[" : "+[");
      auto blocks = st.plan.block_ids_of(s);
      for (size_t i = 0; i < blocks.size(); ++i) os << (i ? "," : "") << blocks[i];
      os << "]" << (s.will_sample ? "*" : "");
    }
    for (const auto& id : st.plan.preempted_ids) os << " ^" << id;
    st.outputs = sched->update(st.plan, sampled);
    sched->check_invariants();
    for (const auto& o : st.outputs) {
      if (o.finished()) os << " " << o.request_id << "=" << finish_reason_name(o.finish_reason);
    }
    st.trace = os.str();
    clock.advance(1.0);
    return st;
  }

  // Runs until nothing is unfinished (at most max_steps); returns the traces.
  std::vector<std::string> run(int max_steps = 1000) {
    std::vector<std::string> traces;
    for (int i = 0; i < max_steps && sched->has_unfinished_requests(); ++i) {
      traces.push_back(step().trace);
    }
    EXPECT_FALSE(sched->has_unfinished_requests()) << "did not finish in " << max_steps << " steps";
    return traces;
  }

  ManualClock clock{100.0};
  std::unique_ptr<Scheduler> sched;
};

inline std::string join_lines(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

}  // namespace strata::sched::testing

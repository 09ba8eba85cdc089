#include "engine/executor.h"

namespace strata::engine {

Result<std::unique_ptr<UniprocExecutor>> UniprocExecutor::create(const WorkerConfig& config) {
  std::unique_ptr<UniprocExecutor> e(new UniprocExecutor());
  STRATA_ASSIGN_OR_RETURN(e->worker_, Worker::create(config));
  return e;
}

ExecutorFactory default_executor_factory() {
  return [](const WorkerConfig& config) -> Result<std::unique_ptr<Executor>> {
    STRATA_ASSIGN_OR_RETURN(auto e, UniprocExecutor::create(config));
    return std::unique_ptr<Executor>(std::move(e));
  };
}

}  // namespace strata::engine

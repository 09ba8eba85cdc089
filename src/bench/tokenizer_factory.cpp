#include "bench/tokenizer_factory.h"

namespace strata::bench {

Result<std::unique_ptr<PromptTokenizer>> make_prompt_tokenizer(const ServeBenchConfig& c,
                                                               const std::string& model_name) {
  if (!c.tokenizer_path.empty()) return make_local_tokenizer(c.tokenizer_path);
  ServerTokenizerOptions o;
  o.base_url = c.base_url;
  o.model = model_name;
  o.headers = c.headers;
  return make_server_tokenizer(std::move(o));
}

}  // namespace strata::bench

// Picks the PromptTokenizer for a run: the local tokenizer module when --tokenizer is given,
// else the server's /tokenize and /detokenize.
#pragma once

#include <memory>
#include <string>

#include "bench/prompt_tokenizer.h"
#include "bench/serve.h"

namespace strata::bench {

Result<std::unique_ptr<PromptTokenizer>> make_prompt_tokenizer(const ServeBenchConfig& config,
                                                               const std::string& model_name);

}  // namespace strata::bench

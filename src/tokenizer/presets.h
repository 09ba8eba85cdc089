// Named byte-level BPE configurations for vocabularies that do not carry their own pipeline
// description: vocab.json + merges.txt (by tokenizer_class) and GGUF (by tokenizer.ggml.pre).
// Each preset reproduces the normalizer / pre-tokenizer / ignore_merges of the model family's
// Hugging Face tokenizer.json. Every tokenizer.ggml.pre name llama.cpp writes for a byte-level
// BPE vocabulary is accepted (docs/tokenizers.md lists them); "gemma4" and "sarvam-moe", which
// are BPE over raw UTF-8 rather than bytes, are not.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace strata::tok {

struct BpePreset {
  std::string name;  // canonical name
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  bool ignore_merges = false;
  bool add_bos = false;  // llama.cpp's default for tokenizer.ggml.add_bos_token with this family
};

// Looks up a preset by canonical name or GGUF tokenizer.ggml.pre alias ("gpt2"/"gpt-2",
// "llama3"/"llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "deepseek-v3", "starcoder",
// "falcon", "mpt", ...). Unknown names are Unimplemented errors listing the known ones.
Result<BpePreset> bpe_preset(const std::string& name);
std::vector<std::string> bpe_preset_names();

}  // namespace strata::tok

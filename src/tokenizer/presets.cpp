#include "tokenizer/presets.h"

#include <map>

#include "core/strings.h"

namespace strata::tok {

namespace {

// Split patterns of the model families' tokenizer.json files.
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kDeepSeekLlmPatterns[] = {
    "[\\r\\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-"
    "ᲺᲽ-"
    "Ჿᴀ-"
    "ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-"
    "ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-"
    "ꝯꝱ-"
    "ꞇꞋ-"
    "ꞎꭰ-"
    "ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ\\x{10400}-\\x{1044f}𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-"
    "𑣟𞤀-"
    "𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
};
const char* const kDeepSeekCoderPatterns[] = {
    "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}",
};
const char* const kDeepSeekV3Patterns[] = {
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

Status add_split(PreTokenizer* pre, const char* pattern) {
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::kSplit;
  STRATA_ASSIGN_OR_RETURN(step.regex, Regex::compile(pattern));
  step.behavior = SplitBehavior::kIsolated;
  pre->add(std::move(step));
  return ok_status();
}

Status add_byte_level(PreTokenizer* pre, bool use_regex) {
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::kByteLevel;
  if (use_regex) {
    STRATA_ASSIGN_OR_RETURN(step.regex, Regex::compile(kGpt2Pattern));
  }
  pre->add(std::move(step));
  return ok_status();
}

// Canonical name of each accepted alias (GGUF tokenizer.ggml.pre names included).
const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> m = {
      {"gpt2", "gpt2"},
      {"gpt-2", "gpt2"},
      {"llama3", "llama3"},
      {"llama-bpe", "llama3"},
      {"llama-v3", "llama3"},
      {"qwen2", "qwen2"},
      {"deepseek-r1-qwen", "qwen2"},
      {"deepseek-llm", "deepseek-llm"},
      {"deepseek-coder", "deepseek-coder"},
      {"deepseek-v3", "deepseek-v3"},
      {"starcoder", "starcoder"},
      {"refact", "starcoder"},
      {"smollm", "starcoder"},
  };
  return m;
}

}  // namespace

std::vector<std::string> bpe_preset_names() {
  std::vector<std::string> names;
  for (const auto& [alias, canonical] : aliases()) names.push_back(alias);
  return names;
}

Result<BpePreset> bpe_preset(const std::string& name) {
  auto it = aliases().find(name);
  if (it == aliases().end()) {
    return unimplemented("unsupported BPE pre-tokenizer type '" + name +
                         "'; supported: " + join(bpe_preset_names(), ", "));
  }
  BpePreset p;
  p.name = it->second;
  if (p.name == "gpt2") {
    STRATA_RETURN_IF_ERROR(add_byte_level(&p.pre_tokenizer, /*use_regex=*/true));
  } else if (p.name == "llama3") {
    STRATA_RETURN_IF_ERROR(add_split(&p.pre_tokenizer, kLlama3Pattern));
    STRATA_RETURN_IF_ERROR(add_byte_level(&p.pre_tokenizer, false));
    p.ignore_merges = true;
  } else if (p.name == "qwen2") {
    p.normalizer.add(NormalizerStep{.kind = NormalizerStep::Kind::kNfc});
    STRATA_RETURN_IF_ERROR(add_split(&p.pre_tokenizer, kQwen2Pattern));
    STRATA_RETURN_IF_ERROR(add_byte_level(&p.pre_tokenizer, false));
  } else if (p.name == "deepseek-llm") {
    for (const char* pat : kDeepSeekLlmPatterns)
      STRATA_RETURN_IF_ERROR(add_split(&p.pre_tokenizer, pat));
    STRATA_RETURN_IF_ERROR(add_byte_level(&p.pre_tokenizer, false));
  } else if (p.name == "deepseek-coder") {
    for (const char* pat : kDeepSeekCoderPatterns)
      STRATA_RETURN_IF_ERROR(add_split(&p.pre_tokenizer, pat));
    STRATA_RETURN_IF_ERROR(add_byte_level(&p.pre_tokenizer, false));
  } else if (p.name == "deepseek-v3") {
    for (const char* pat : kDeepSeekV3Patterns)
      STRATA_RETURN_IF_ERROR(add_split(&p.pre_tokenizer, pat));
    STRATA_RETURN_IF_ERROR(add_byte_level(&p.pre_tokenizer, false));
  } else if (p.name == "starcoder") {
    PreTokenizerStep digits;
    digits.kind = PreTokenizerStep::Kind::kDigits;
    digits.individual_digits = true;
    p.pre_tokenizer.add(std::move(digits));
    STRATA_RETURN_IF_ERROR(add_byte_level(&p.pre_tokenizer, true));
  }
  return p;
}

}  // namespace strata::tok

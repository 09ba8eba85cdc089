#include "tokenizer/presets.h"

#include <cstdio>
#include <initializer_list>
#include <map>

#include "core/strings.h"

namespace strata::tok {

namespace {

// The split patterns of the model families' tokenizer.json files, in PCRE2 syntax. Characters
// outside ASCII are written as \x{...} escapes: a literal such as U+1F7D (GREEK SMALL LETTER OMEGA
// WITH OXIA) is silently replaced by its canonical equivalent U+03CE when a source file passes
// through Unicode normalisation, which turns the range U+1F5F-U+1F7D into one "out of order".

// GPT-2's contractions and word classes with Llama 3's single-run punctuation and newline runs;
// numbers in runs of up to three digits.
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Jais-2: Llama 3's pattern with whitespace runs cut into power-of-two lengths.
constexpr const char* kJais2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})";
// Qwen2: as Llama 3 but every digit alone.
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: combining marks stay with the letters they follow.
constexpr const char* kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Seed-Coder: single digits; punctuation runs never take newlines.
constexpr const char* kSeedCoderPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Bailing (Ling) MoE: possessive optional prefix and punctuation run; one newline per piece.
constexpr const char* kBailingPattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
// EXAONE MoE: letters (with their marks) joined across single spaces into one piece.
constexpr const char* kExaoneMoePattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)";
// OpenAI o200k (GPT-4o, Llama 4, MiniMax-M2): words split at case changes, contractions kept.
constexpr const char* kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Mistral's Tekken: o200k's case-aware words without contractions, single digits.
constexpr const char* kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Kimi K2: Han runs first; the o200k word classes exclude Han (the reference writes the classes
// as intersections [...&&[^\p{Han}]], here a negative look-ahead before each character).
constexpr const char* kKimiK2Pattern =
    R"(\p{Han}+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Youtu: Hangul, CJK punctuation, Bopomofo and CJK/kana runs first, then Tekken-like words with
// contractions.
constexpr const char* kYoutuScriptsPattern =
    R"([\x{ac00}-\x{d7a3}\x{3131}-\x{318e}]+|[\x{ff01}\x{2026}\x{201c}\x{201d}\x{2018}\x{2019}\x{2014}\x{ff1a}\x{ff1b}\x{ff0c}\x{3001}-\x{303f}\x{fe30}-\x{fe4f}]+|[\x{3105}-\x{312f}]+|[\x{4e00}-\x{9fa5}\x{3040}-\x{309f}\x{30a0}-\x{30ff}]+)";
constexpr const char* kYoutuWordsPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// BLOOM (and Poro, GPT-3 Finnish, Viking): runs of anything but whitespace and sentence
// punctuation, with an optional leading space. The reference nests a class ([^(\s|[.,!?…])]),
// which in PCRE2 is the flat class below.
constexpr const char* kBloomPattern =
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{ff0c}\x{3001}\x{964}\x{6d4}\x{60c})]+)";
// DeepSeek-V3 (and Hunyuan dense, JoyAI): up to three digits, CJK/kana runs, then words.
constexpr const char* kDeepSeekV3Digits = R"(\p{N}{1,3})";
constexpr const char* kDeepSeekV3Cjk = R"([\x{4e00}-\x{9fa5}\x{3040}-\x{309f}\x{30a0}-\x{30ff}]+)";
constexpr const char* kDeepSeekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// AFMoE: digit runs in groups of three counted from the right (1234567 -> 1|234|567), runs of
// CJK, kana, Thai, Lao, Khmer, Myanmar, Javanese and Hangul, then DeepSeek-V3's words.
constexpr const char* kAfmoeDigits = R"(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))";
constexpr const char* kAfmoeScripts =
    R"([\x{4e00}-\x{9fff}\x{3400}-\x{4dbf}\x{f900}-\x{faff}\x{3040}-\x{309f}\x{30a0}-\x{30ff}\x{ff65}-\x{ff9f}\x{2f00}-\x{2fdf}\x{e00}-\x{e7f}\x{e80}-\x{eff}\x{1780}-\x{17ff}\x{1000}-\x{109f}\x{aa60}-\x{aa7f}\x{a9e0}-\x{a9ff}\x{ac00}-\x{d7af}\x{1100}-\x{11ff}]+)";
// Tiny Aya: digit runs in groups of three from the right (ending at a word boundary).
constexpr const char* kTinyAyaDigits = R"(\d{1,3}(?=(?:\d{3})*\b))";
// SuperBPE: number runs, then cut before every group of three digits counted from the right.
constexpr const char* kSuperBpeNumbers = R"(\p{N}+)";
constexpr const char* kSuperBpeThousands = R"((?=(\d{3})+(?!\d)))";
// DeepSeek Coder: newlines, letter runs and punctuation runs (each with one optional leading
// space), CJK runs, single digits.
// clang-format off
constexpr const char* kDeepSeekCoderPatterns[] = {
    R"([\r\n])",
    R"(\s?\p{L}+)",
    R"(\s?\p{P}+)",
    R"([\x{4e00}-\x{9fa5}\x{800}-\x{4e00}\x{ac00}-\x{d7ff}]+)",
    R"(\p{N})",
};
// Chameleon: sentinel and image tokens, tabs/newlines and space pairs, single digits, single
// punctuation characters, then GPT-2's pattern.
constexpr const char* kChameleonPatterns[] = {
    R"(<sentinel:[0-9]+>)",
    R"((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)",
    R"(([\t\n]|    |  ))",
    R"(\p{N})",
    R"([\p{P}!-/:-@\[-`{-~])",
};
// clang-format on

// DeepSeek LLM's letter class: the cased letters (upper, lower and title case) of Unicode as
// its tokenizer.json lists them, as inclusive code point ranges.
struct CodeRange {
  char32_t lo, hi;
};
constexpr CodeRange kDeepSeekLlmLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
    {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
    {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},
    {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
    {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
    {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
    {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

// "[\x{lo}-\x{hi}...]" for `ranges`.
template <size_t N>
std::string char_class(const CodeRange (&ranges)[N]) {
  std::string s = "[";
  char buf[32];
  for (const CodeRange& r : ranges) {
    std::snprintf(buf, sizeof(buf), "\\x{%x}", static_cast<unsigned>(r.lo));
    s += buf;
    if (r.hi != r.lo) {
      std::snprintf(buf, sizeof(buf), "-\\x{%x}", static_cast<unsigned>(r.hi));
      s += buf;
    }
  }
  return s + "]";
}

// DeepSeek LLM: newlines alone; cased-letter runs and ASCII/full-width punctuation runs (each
// with one optional leading space); trailing whitespace; CJK and Hangul runs; number runs.
std::vector<std::string> deepseek_llm_patterns() {
  return {
      R"([\r\n])",
      R"(\s?)" + char_class(kDeepSeekLlmLetters) + "+",
      R"(\s?[!-/:-~\x{ff01}-\x{ff0f}\x{ff1a}-\x{ff5e}\x{2018}-\x{201f}\x{3000}-\x{3002}]+)",
      R"(\s+$)",
      R"([\x{4e00}-\x{9fa5}\x{800}-\x{4e00}\x{ac00}-\x{d7ff}]+)",
      R"(\p{N}+)",
  };
}

// Builds a pre-tokenizer Sequence step by step.
class Builder {
 public:
  explicit Builder(BpePreset* p) : p_(p) {}
  // A regex Split with the Isolated behaviour.
  Status split(const std::string& pattern) {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::kSplit;
    STRATA_ASSIGN_OR_RETURN(step.regex, Regex::compile(pattern));
    step.behavior = SplitBehavior::kIsolated;
    p_->pre_tokenizer.add(std::move(step));
    return ok_status();
  }
  Status splits(std::initializer_list<std::string> patterns) {
    for (const auto& pat : patterns) STRATA_RETURN_IF_ERROR(split(pat));
    return ok_status();
  }
  // ByteLevel, splitting with GPT-2's pattern first when `use_regex`.
  Status byte_level(bool use_regex) {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    if (use_regex) {
      STRATA_ASSIGN_OR_RETURN(step.regex, Regex::compile(kGpt2Pattern));
    }
    p_->pre_tokenizer.add(std::move(step));
    return ok_status();
  }
  void digits(bool individual) {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::kDigits;
    step.individual_digits = individual;
    p_->pre_tokenizer.add(std::move(step));
  }
  void punctuation(SplitBehavior behavior) {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::kPunctuation;
    step.behavior = behavior;
    p_->pre_tokenizer.add(std::move(step));
  }
  void nfc() { p_->normalizer.add(NormalizerStep{.kind = NormalizerStep::Kind::kNfc}); }

 private:
  BpePreset* p_;
};

// Canonical name of each accepted alias: the GGUF tokenizer.ggml.pre names llama.cpp writes, and
// the names Strata's own loaders use.
const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> a;
    auto group = [&a](const std::string& canonical, std::initializer_list<const char*> names) {
      a[canonical] = canonical;
      for (const char* n : names) a[n] = canonical;
    };
    group("gpt2", {"gpt-2", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "jina-v1-en",
                   "jina-v2-code", "roberta-bpe", "gigachat", "a.x-4.0", "mellum", "modern-bert",
                   "exaone4", "olmo", "jais", "trillion", "granite-docling"});
    group("mpt", {});
    group("llama3", {"llama-bpe", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                     "jina-v5-nano"});
    group("dbrx", {"smaug-bpe", "glm4", "chatglm-bpe"});
    group("jais-2", {});
    group("qwen2", {"deepseek-r1-qwen"});
    group("stablelm2", {"kormo", "f2llmv2", "megrez", "hunyuan", "solar-open", "grok-2"});
    group("qwen35", {});
    group("deepseek-llm", {});
    group("deepseek-coder", {});
    group("deepseek-v3", {"hunyuan-dense", "joyai-llm"});
    group("youtu", {});
    group("falcon", {});
    group("starcoder", {"refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"});
    group("bloom", {"poro-chat", "gpt3-finnish"});
    group("viking", {});
    group("tekken", {});
    group("chameleon", {});
    group("gpt-4o", {"llama4", "kanana2", "minimax-m2"});
    group("tiny_aya", {});
    group("kimi-k2", {});
    group("superbpe", {});
    group("bailingmoe", {"bailingmoe2", "llada-moe"});
    group("seed-coder", {});
    group("afmoe", {});
    group("exaone-moe", {});
    return a;
  }();
  return m;
}

Status build(BpePreset* p) {
  Builder b(p);
  const std::string& n = p->name;
  if (n == "gpt2") return b.byte_level(true);
  if (n == "mpt") {  // GPT-NeoX-20B's tokenizer: NFC, then GPT-2's byte-level split
    b.nfc();
    return b.byte_level(true);
  }
  if (n == "llama3" || n == "dbrx") {
    p->ignore_merges = n == "llama3";
    p->add_bos = n == "llama3";
    STRATA_RETURN_IF_ERROR(b.split(kLlama3Pattern));
    return b.byte_level(false);
  }
  if (n == "jais-2") {
    STRATA_RETURN_IF_ERROR(b.split(kJais2Pattern));
    return b.byte_level(false);
  }
  if (n == "qwen2" || n == "stablelm2") {
    if (n == "qwen2") b.nfc();
    STRATA_RETURN_IF_ERROR(b.split(kQwen2Pattern));
    return b.byte_level(false);
  }
  if (n == "qwen35") {
    b.nfc();
    STRATA_RETURN_IF_ERROR(b.split(kQwen35Pattern));
    return b.byte_level(false);
  }
  if (n == "deepseek-llm") {
    for (const auto& pat : deepseek_llm_patterns()) STRATA_RETURN_IF_ERROR(b.split(pat));
    return b.byte_level(false);
  }
  if (n == "deepseek-coder") {
    for (const char* pat : kDeepSeekCoderPatterns) STRATA_RETURN_IF_ERROR(b.split(pat));
    return b.byte_level(false);
  }
  if (n == "deepseek-v3") {
    STRATA_RETURN_IF_ERROR(b.splits({kDeepSeekV3Digits, kDeepSeekV3Cjk, kDeepSeekV3Words}));
    return b.byte_level(false);
  }
  if (n == "youtu") {
    p->ignore_merges = true;
    STRATA_RETURN_IF_ERROR(b.splits({kYoutuScriptsPattern, kYoutuWordsPattern}));
    return b.byte_level(false);
  }
  if (n == "falcon") {
    // Punctuation runs, GPT-2's byte-level split, digit runs, then runs of three ASCII digits
    // (the last two see the byte-level characters, where ASCII digits are themselves).
    b.punctuation(SplitBehavior::kContiguous);
    STRATA_RETURN_IF_ERROR(b.byte_level(true));
    b.digits(false);
    return b.split("[0-9][0-9][0-9]");
  }
  if (n == "starcoder") {
    b.digits(true);
    return b.byte_level(true);
  }
  if (n == "bloom" || n == "viking") {
    STRATA_RETURN_IF_ERROR(b.split(kBloomPattern));
    if (n == "viking") STRATA_RETURN_IF_ERROR(b.split(R"(\p{N})"));
    return b.byte_level(false);
  }
  if (n == "tekken") {
    p->ignore_merges = true;
    p->add_bos = true;
    STRATA_RETURN_IF_ERROR(b.split(kTekkenPattern));
    return b.byte_level(false);
  }
  if (n == "chameleon") {
    p->add_bos = true;
    for (const char* pat : kChameleonPatterns) STRATA_RETURN_IF_ERROR(b.split(pat));
    return b.byte_level(true);
  }
  if (n == "gpt-4o") {
    STRATA_RETURN_IF_ERROR(b.split(kO200kPattern));
    return b.byte_level(false);
  }
  if (n == "tiny_aya") {
    STRATA_RETURN_IF_ERROR(b.splits({kTinyAyaDigits, kO200kPattern}));
    return b.byte_level(false);
  }
  if (n == "kimi-k2") {
    STRATA_RETURN_IF_ERROR(b.split(kKimiK2Pattern));
    return b.byte_level(false);
  }
  if (n == "superbpe") {
    STRATA_RETURN_IF_ERROR(b.splits({kSuperBpeNumbers, kSuperBpeThousands}));
    return b.byte_level(false);
  }
  if (n == "bailingmoe") {
    STRATA_RETURN_IF_ERROR(b.split(kBailingPattern));
    return b.byte_level(false);
  }
  if (n == "seed-coder") {
    STRATA_RETURN_IF_ERROR(b.split(kSeedCoderPattern));
    return b.byte_level(false);
  }
  if (n == "afmoe") {
    STRATA_RETURN_IF_ERROR(b.splits({kAfmoeDigits, kAfmoeScripts, kDeepSeekV3Words}));
    return b.byte_level(false);
  }
  if (n == "exaone-moe") {
    STRATA_RETURN_IF_ERROR(b.split(kExaoneMoePattern));
    return b.byte_level(false);
  }
  return internal_error("BPE preset '" + n + "' has no definition");
}

}  // namespace

std::vector<std::string> bpe_preset_names() {
  std::vector<std::string> names;
  for (const auto& [alias, canonical] : aliases()) names.push_back(alias);
  return names;
}

Result<BpePreset> bpe_preset(const std::string& name) {
  auto it = aliases().find(name);
  if (name == "gemma4" || name == "sarvam-moe") {
    return unimplemented("BPE pre-tokenizer type '" + name +
                         "' (BPE over raw UTF-8 with SentencePiece-style spaces rather than "
                         "byte-level BPE) is not supported");
  }
  if (it == aliases().end()) {
    return unimplemented("unsupported BPE pre-tokenizer type '" + name +
                         "'; supported: " + join(bpe_preset_names(), ", "));
  }
  BpePreset p;
  p.name = it->second;
  STRATA_RETURN_IF_ERROR(build(&p));
  return p;
}

}  // namespace strata::tok

#include "bench/dataset.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/file_util.h"
#include "core/json.h"
#include "core/strings.h"

namespace strata::bench {

namespace {

constexpr int kMaxFitRounds = 10;

// Common English words; prompts built from them read as text and tokenize predictably.
constexpr const char* kWords[] = {
    "time",    "year",    "people",   "way",     "day",     "man",     "thing",     "woman",
    "life",    "child",   "world",    "school",  "state",   "family",  "student",   "group",
    "country", "problem", "hand",     "part",    "place",   "case",    "week",      "company",
    "system",  "program", "question", "work",    "number",  "night",   "point",     "home",
    "water",   "room",    "mother",   "area",    "money",   "story",   "fact",      "month",
    "lot",     "right",   "study",    "book",    "eye",     "job",     "word",      "business",
    "issue",   "side",    "kind",     "head",    "house",   "service", "friend",    "father",
    "power",   "hour",    "game",     "line",    "end",     "member",  "law",       "car",
    "city",    "name",    "team",     "minute",  "idea",    "kid",     "body",      "back",
    "parent",  "face",    "others",   "level",   "office",  "door",    "health",    "person",
    "art",     "history", "party",    "result",  "change",  "morning", "reason",    "research",
    "girl",    "guy",     "moment",   "air",     "teacher", "force",   "education", "good",
    "new",     "first",   "last",     "long",    "great",   "little",  "own",       "other",
    "old",     "big",     "high",     "small",   "large",   "young",   "early",     "important",
    "public",  "bad",     "same",     "able",    "make",    "know",    "take",      "see",
    "come",    "think",   "look",     "want",    "give",    "use",     "find",      "tell",
    "ask",     "seem",    "feel",     "try",     "leave",   "call",    "keep",      "begin",
    "help",    "talk",    "turn",     "start",   "show",    "hear",    "play",      "run",
    "move",    "like",    "live",     "believe", "hold",    "bring",   "happen",    "write",
    "sit",     "stand",   "lose",     "pay",     "meet",    "include", "learn",     "lead",
    "read",    "grow",
};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

template <typename T>
void shuffle_items(std::vector<T>* v, Rng* rng) {
  for (size_t i = v->size(); i > 1; --i) std::swap((*v)[i - 1], (*v)[rng->below(i)]);
}

std::string mismatch_note(int64_t mismatch) {
  return "Across all generated prompts there were " + std::to_string(std::llabs(mismatch)) + " " +
         (mismatch > 0 ? "more" : "fewer") +
         " tokens than requested after decoding and re-encoding; this tokenizer does not "
         "round-trip every sequence.";
}

// Candidates of exactly `target` tokens each: random ids (known vocabulary) or words.
Result<std::vector<FitCandidate>> exact_pieces(PromptTokenizer& tok,
                                               const std::vector<int64_t>& targets,
                                               const std::vector<int32_t>& allowed, Rng* rng,
                                               int64_t* mismatch) {
  std::vector<FitCandidate> c(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    c[i].target = targets[i];
    if (!allowed.empty()) {
      for (int64_t k = 0; k < targets[i]; ++k)
        c[i].ids.push_back(allowed[rng->below(allowed.size())]);
    } else {
      c[i].text = random_words(targets[i], rng);
    }
  }
  STRATA_ASSIGN_OR_RETURN(int64_t mm, fit_to_token_counts(tok, &c, allowed, rng));
  *mismatch += mm;
  return c;
}

}  // namespace

std::string random_words(int64_t n, Rng* rng) {
  std::string out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(0, n)) * 7);
  for (int64_t i = 0; i < n; ++i) {
    out += ' ';
    out += kWords[rng->below(kNumWords)];
  }
  return out;
}

Result<std::vector<int32_t>> allowed_prompt_ids(PromptTokenizer& tok) {
  int64_t vocab = tok.vocab_size();
  if (vocab <= 0) return std::vector<int32_t>{};
  std::vector<int32_t> specials = tok.special_ids();
  std::set<int32_t> banned(specials.begin(), specials.end());
  std::vector<TokenIds> singles;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!banned.count(static_cast<int32_t>(i))) singles.push_back({static_cast<int32_t>(i)});
  }
  STRATA_ASSIGN_OR_RETURN(auto texts, tok.decode(singles));
  std::vector<int32_t> out;
  for (size_t k = 0; k < singles.size(); ++k) {
    const std::string& t = texts[k];
    // Byte-fallback pieces of multi-byte characters decode to U+FFFD alone and re-encode to
    // several tokens; control characters may be normalised away. Neither keeps counts stable.
    bool clean = !t.empty() && is_valid_utf8(t) && t.find("\xEF\xBF\xBD") == std::string::npos;
    for (unsigned char ch : t) {
      if (ch < 0x20 && ch != '\n' && ch != '\t') clean = false;
      if (ch == 0x7f) clean = false;
    }
    if (clean) out.push_back(singles[k][0]);
  }
  if (out.empty()) {
    return failed_precondition(tok.description() +
                               ": no vocabulary entry decodes to plain text, so prompts cannot be "
                               "generated from token ids");
  }
  return out;
}

Result<int64_t> fit_to_token_counts(PromptTokenizer& tok, std::vector<FitCandidate>* candidates,
                                    const std::vector<int32_t>& allowed, Rng* rng) {
  auto& c = *candidates;
  // Candidates given as ids are decoded to text first.
  std::vector<size_t> to_decode;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].text.empty() && !c[i].ids.empty()) to_decode.push_back(i);
  }
  auto decode_into = [&](const std::vector<size_t>& idx) -> Status {
    if (idx.empty()) return ok_status();
    std::vector<TokenIds> ids;
    for (size_t i : idx) ids.push_back(c[i].ids);
    STRATA_ASSIGN_OR_RETURN(auto texts, tok.decode(ids));
    for (size_t k = 0; k < idx.size(); ++k) c[idx[k]].text = std::move(texts[k]);
    return ok_status();
  };
  STRATA_RETURN_IF_ERROR(decode_into(to_decode));

  std::vector<bool> done(c.size(), false);
  for (int round = 0; round <= kMaxFitRounds; ++round) {
    std::vector<size_t> pending;
    for (size_t i = 0; i < c.size(); ++i) {
      if (!done[i]) pending.push_back(i);
    }
    if (pending.empty()) break;
    std::vector<std::string> texts;
    for (size_t i : pending) texts.push_back(c[i].text);
    STRATA_ASSIGN_OR_RETURN(auto encoded, tok.encode(texts));
    if (encoded.size() != pending.size()) return internal_error("tokenizer returned a wrong count");
    std::vector<size_t> redo;
    for (size_t k = 0; k < pending.size(); ++k) {
      size_t i = pending[k];
      c[i].ids = std::move(encoded[k]);
      int64_t n = static_cast<int64_t>(c[i].ids.size());
      if (n == c[i].target || round == kMaxFitRounds) {
        done[i] = n == c[i].target;
        continue;
      }
      if (n > c[i].target) {
        c[i].ids.resize(static_cast<size_t>(c[i].target));
        redo.push_back(i);
      } else if (!allowed.empty()) {
        for (int64_t e = n; e < c[i].target; ++e) {
          c[i].ids.push_back(allowed[rng->below(allowed.size())]);
        }
        redo.push_back(i);
      } else {
        c[i].text += random_words(c[i].target - n, rng);
      }
    }
    STRATA_RETURN_IF_ERROR(decode_into(redo));
  }
  int64_t mismatch = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (!done[i]) mismatch += static_cast<int64_t>(c[i].ids.size()) - c[i].target;
  }
  return mismatch;
}

Result<Dataset> sample_random(PromptTokenizer& tok, const RandomDatasetOptions& o) {
  if (o.num_prompts <= 0) return invalid_argument("--num-prompts must be at least 1");
  if (!(o.range_ratio >= 0.0 && o.range_ratio < 1.0)) {
    return invalid_argument("--random-range-ratio must be in [0, 1), got " +
                            std::to_string(o.range_ratio));
  }
  if (o.input_len < 0 || o.output_len < 0 || o.prefix_len < 0) {
    return invalid_argument(
        "--random-input-len, --random-output-len and --random-prefix-len "
        "must not be negative");
  }
  int num_special = tok.num_special_tokens_to_add();
  int64_t real_input = std::max<int64_t>(0, o.input_len - num_special);
  int64_t in_lo = static_cast<int64_t>(std::floor(real_input * (1 - o.range_ratio)));
  int64_t in_hi = static_cast<int64_t>(std::ceil(real_input * (1 + o.range_ratio)));
  int64_t out_lo =
      std::max<int64_t>(1, static_cast<int64_t>(std::floor(o.output_len * (1 - o.range_ratio))));
  int64_t out_hi =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o.output_len * (1 + o.range_ratio))));
  if (o.prefix_len + in_lo < 1) {
    return invalid_argument("--random-input-len is too small: with " + std::to_string(num_special) +
                            " special token(s) added by the server and --random-range-ratio " +
                            std::to_string(o.range_ratio) +
                            " a prompt could have no tokens at all; increase --random-input-len or "
                            "--random-prefix-len");
  }
  Rng rng(o.seed);
  std::vector<int64_t> in_lens, out_lens, offsets;
  int64_t vocab = tok.vocab_size();
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    in_lens.push_back(in_lo +
                      static_cast<int64_t>(rng.below(static_cast<uint64_t>(in_hi - in_lo + 1))));
    out_lens.push_back(out_lo +
                       static_cast<int64_t>(rng.below(static_cast<uint64_t>(out_hi - out_lo + 1))));
    offsets.push_back(vocab > 0 ? static_cast<int64_t>(rng.below(static_cast<uint64_t>(vocab)))
                                : 0);
  }
  Dataset ds;
  int64_t mismatch = 0;
  STRATA_ASSIGN_OR_RETURN(std::vector<int32_t> allowed, allowed_prompt_ids(tok));
  // The shared prefix.
  TokenIds prefix_ids;
  std::string prefix_text;
  if (o.prefix_len > 0) {
    STRATA_ASSIGN_OR_RETURN(auto pieces,
                            exact_pieces(tok, {o.prefix_len}, allowed, &rng, &mismatch));
    prefix_ids = pieces[0].ids;
    prefix_text = pieces[0].text;
  }
  std::vector<FitCandidate> c(static_cast<size_t>(o.num_prompts));
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    auto& cand = c[static_cast<size_t>(i)];
    cand.target = o.prefix_len + in_lens[static_cast<size_t>(i)];
    if (!allowed.empty()) {
      // vLLM's sequence: consecutive allowed ids from a per-request offset.
      cand.ids = prefix_ids;
      for (int64_t k = 0; k < in_lens[static_cast<size_t>(i)]; ++k) {
        cand.ids.push_back(
            allowed[static_cast<size_t>(offsets[static_cast<size_t>(i)] + i + k) % allowed.size()]);
      }
      if (cand.ids.empty()) cand.text = "";
    } else {
      cand.text = prefix_text + random_words(in_lens[static_cast<size_t>(i)], &rng);
    }
  }
  STRATA_ASSIGN_OR_RETURN(int64_t mm, fit_to_token_counts(tok, &c, allowed, &rng));
  mismatch += mm;
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    auto& cand = c[static_cast<size_t>(i)];
    ds.requests.push_back({std::move(cand.text), static_cast<int64_t>(cand.ids.size()),
                           out_lens[static_cast<size_t>(i)]});
  }
  if (mismatch != 0) ds.notes.push_back(mismatch_note(mismatch));
  return ds;
}

Result<Dataset> sample_sharegpt(PromptTokenizer& tok, const ShareGptOptions& o) {
  if (o.num_prompts <= 0) return invalid_argument("--num-prompts must be at least 1");
  if (o.path.empty()) {
    return invalid_argument(
        "--dataset-name sharegpt needs --dataset-path FILE (a ShareGPT JSON "
        "file, e.g. ShareGPT_V3_unfiltered_cleaned_split.json)");
  }
  auto text = read_file(o.path);
  if (!text.ok()) return text.status().with_context("--dataset-path");
  auto json = parse_json(*text, "ShareGPT dataset " + o.path);
  if (!json.ok()) return json.status();
  if (!json->is_array()) {
    return invalid_argument("ShareGPT dataset " + o.path +
                            " must be a JSON list of {\"conversations\": [...]} entries");
  }
  struct Entry {
    std::string prompt;
    std::optional<std::string> reply;
  };
  std::vector<Entry> entries;
  for (const auto& e : *json) {
    if (!e.is_object() || !e.contains("conversations") || !e["conversations"].is_array()) continue;
    const auto& conv = e["conversations"];
    if (conv.empty() || !conv[0].is_object() || !conv[0].contains("value") ||
        !conv[0]["value"].is_string()) {
      continue;
    }
    Entry entry{conv[0]["value"].get<std::string>(), std::nullopt};
    if (conv.size() >= 2 && conv[1].is_object() && conv[1].contains("value") &&
        conv[1]["value"].is_string()) {
      entry.reply = conv[1]["value"].get<std::string>();
    }
    entries.push_back(std::move(entry));
  }
  if (entries.empty()) {
    return invalid_argument("ShareGPT dataset " + o.path +
                            " has no usable entry (each needs \"conversations\" whose first turn "
                            "has a string \"value\")");
  }
  Rng rng(o.seed);
  shuffle_items(&entries, &rng);
  int num_special = tok.num_special_tokens_to_add();
  Dataset ds;
  int64_t without_reply = 0;
  const size_t kBatch = 64;
  for (size_t start = 0;
       start < entries.size() && static_cast<int64_t>(ds.requests.size()) < o.num_prompts;
       start += kBatch) {
    size_t end = std::min(entries.size(), start + kBatch);
    std::vector<std::string> texts;
    std::vector<int> reply_index(end - start, -1);
    for (size_t i = start; i < end; ++i) texts.push_back(entries[i].prompt);
    if (!o.output_len) {
      for (size_t i = start; i < end; ++i) {
        if (entries[i].reply) {
          reply_index[i - start] = static_cast<int>(texts.size());
          texts.push_back(*entries[i].reply);
        }
      }
    }
    STRATA_ASSIGN_OR_RETURN(auto ids, tok.encode(texts));
    for (size_t i = start; i < end && static_cast<int64_t>(ds.requests.size()) < o.num_prompts;
         ++i) {
      int64_t prompt_len = static_cast<int64_t>(ids[i - start].size()) + num_special;
      int64_t output_len;
      bool fixed = o.output_len.has_value();
      if (fixed) {
        output_len = *o.output_len;
      } else if (reply_index[i - start] >= 0) {
        output_len = static_cast<int64_t>(ids[static_cast<size_t>(reply_index[i - start])].size());
      } else {
        output_len = kShareGptDefaultOutputLen;
        fixed = true;
        without_reply++;
      }
      // vLLM's pruning: prompts of 4..1024 tokens, replies of at least 4, at most 2048 in all.
      if (prompt_len < 4 || (!fixed && output_len < 4) || prompt_len > 1024 ||
          prompt_len + output_len > 2048) {
        continue;
      }
      ds.requests.push_back({entries[i].prompt, prompt_len, output_len});
    }
  }
  if (without_reply > 0) {
    ds.notes.push_back(std::to_string(without_reply) +
                       " sampled conversation(s) have no reply to size the output; they ask for " +
                       std::to_string(kShareGptDefaultOutputLen) +
                       " tokens (set --sharegpt-output-len to choose)");
  }
  if (ds.requests.empty()) {
    return invalid_argument("no ShareGPT entry in " + o.path +
                            " fits the length limits (prompt 4..1024 tokens, prompt + output <= "
                            "2048)");
  }
  if (static_cast<int64_t>(ds.requests.size()) < o.num_prompts && !o.no_oversample) {
    size_t have = ds.requests.size();
    while (static_cast<int64_t>(ds.requests.size()) < o.num_prompts) {
      ds.requests.push_back(ds.requests[rng.below(have)]);
    }
    ds.notes.push_back("Oversampled requests to reach " + std::to_string(o.num_prompts) +
                       " total samples (the dataset had " + std::to_string(have) + " usable).");
  }
  return ds;
}

Result<Dataset> sample_prefix_repetition(PromptTokenizer& tok, const PrefixRepetitionOptions& o) {
  if (o.num_prefixes <= 0) return invalid_argument("--prefix-repetition-num-prefixes must be >= 1");
  if (o.prefix_len < 0 || o.suffix_len < 0 || o.prefix_len + o.suffix_len < 1) {
    return invalid_argument(
        "--prefix-repetition-prefix-len and --prefix-repetition-suffix-len "
        "must be non-negative with at least one token in all");
  }
  if (o.output_len < 1) return invalid_argument("--prefix-repetition-output-len must be >= 1");
  int64_t per_prefix = o.num_prompts / o.num_prefixes;
  if (per_prefix == 0) {
    return invalid_argument("--num-prompts (" + std::to_string(o.num_prompts) +
                            ") must be at least --prefix-repetition-num-prefixes (" +
                            std::to_string(o.num_prefixes) + ")");
  }
  Rng rng(o.seed);
  STRATA_ASSIGN_OR_RETURN(std::vector<int32_t> allowed, allowed_prompt_ids(tok));
  int64_t mismatch = 0;
  std::vector<FitCandidate> prefixes, suffixes;
  if (o.prefix_len > 0) {
    STRATA_ASSIGN_OR_RETURN(
        prefixes,
        exact_pieces(tok, std::vector<int64_t>(static_cast<size_t>(o.num_prefixes), o.prefix_len),
                     allowed, &rng, &mismatch));
  } else {
    prefixes.resize(static_cast<size_t>(o.num_prefixes));
  }
  if (o.suffix_len > 0) {
    STRATA_ASSIGN_OR_RETURN(
        suffixes, exact_pieces(tok,
                               std::vector<int64_t>(
                                   static_cast<size_t>(o.num_prefixes * per_prefix), o.suffix_len),
                               allowed, &rng, &mismatch));
  } else {
    suffixes.resize(static_cast<size_t>(o.num_prefixes * per_prefix));
  }
  std::vector<TokenIds> combined;
  if (o.round_robin) {
    for (int64_t j = 0; j < per_prefix; ++j) {
      for (int64_t p = 0; p < o.num_prefixes; ++p) {
        TokenIds ids = prefixes[static_cast<size_t>(p)].ids;
        const auto& s = suffixes[static_cast<size_t>(p * per_prefix + j)].ids;
        ids.insert(ids.end(), s.begin(), s.end());
        combined.push_back(std::move(ids));
      }
    }
  }
  for (int64_t p = 0; p < o.num_prefixes && !o.round_robin; ++p) {
    for (int64_t j = 0; j < per_prefix; ++j) {
      TokenIds ids = prefixes[static_cast<size_t>(p)].ids;
      const auto& s = suffixes[static_cast<size_t>(p * per_prefix + j)].ids;
      ids.insert(ids.end(), s.begin(), s.end());
      combined.push_back(std::move(ids));
    }
  }
  STRATA_ASSIGN_OR_RETURN(auto texts, tok.decode(combined));
  Dataset ds;
  for (size_t i = 0; i < combined.size(); ++i) {
    ds.requests.push_back(
        {std::move(texts[i]), static_cast<int64_t>(combined[i].size()), o.output_len});
  }
  if (!o.round_robin) shuffle_items(&ds.requests, &rng);
  if (mismatch != 0) ds.notes.push_back(mismatch_note(mismatch));
  return ds;
}

}  // namespace strata::bench

#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"
#include "tokenizer/word_cache.h"

namespace strata::tok {

namespace {

constexpr size_t kSmallWord = 64;  // symbols: quadratic merge below, heap merge above

}  // namespace

bool follows_metaspace(std::string_view s, size_t p) {
  return p >= kSpmSpace.size() && s.compare(p - kSpmSpace.size(), kSpmSpace.size(), kSpmSpace) == 0;
}

bool pieces_split_at_metaspace(const Vocab& vocab) {
  if (!vocab.find(kSpmSpace)) return false;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    std::string_view piece = vocab.piece(id);
    for (size_t p = piece.find(kSpmSpace, 1); p != std::string_view::npos;
         p = piece.find(kSpmSpace, p + 1)) {
      if (!follows_metaspace(piece, p)) return false;
    }
  }
  return true;
}

Result<std::unique_ptr<BpeModel>> BpeModel::create(
    Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeConfig config) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->vocab_ = std::move(vocab);
  m->config_ = std::move(config);
  m->instance_id_ = new_cache_owner();
  if (!m->config_.unk_token.empty()) {
    auto unk = m->vocab_.find(m->config_.unk_token);
    if (!unk) {
      return invalid_argument("BPE unk_token '" + m->config_.unk_token +
                              "' is not in the vocabulary");
    }
    m->unk_id_ = *unk;
  }
  m->all_byte_fallback_ = true;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto fb = m->vocab_.find(name);
    m->byte_fallback_id_[b] = fb ? *fb : -1;
    if (!fb) m->all_byte_fallback_ = false;
    auto single = m->vocab_.find(utf8_encode(byte_to_char(static_cast<uint8_t>(b))));
    m->byte_to_id_[b] = single ? *single : -1;
  }
  m->split_at_metaspace_ = !m->config_.byte_level && pieces_split_at_metaspace(m->vocab_);
  if (m->config_.byte_level) {
    std::string raw;
    m->raw_vocab_.reserve(m->vocab_.num_pieces());
    for (int32_t id = 0; id < m->vocab_.size(); ++id) {
      const std::string& p = m->vocab_.piece(id);
      if (!p.empty() && byte_level_to_bytes(p, &raw)) m->raw_vocab_.set(id, raw);
    }
  }
  m->pairs_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = m->vocab_.find(a), ib = m->vocab_.find(b), im = m->vocab_.find(a + b);
    if (!ia || !ib || !im) {
      return invalid_argument("BPE merge #" + std::to_string(rank) + " '" + a + " " + b +
                              "' uses a token that is not in the vocabulary ('" +
                              (!ia   ? a
                               : !ib ? b
                                     : a + b) +
                              "')");
    }
    // A repeated pair keeps its last rank, as a map built from the merge list would.
    m->pairs_.insert(*ia, *ib, static_cast<uint32_t>(rank), *im);
  }
  m->num_merges_ = merges.size();
  return m;
}

std::string BpeModel::describe() const {
  std::string s = config_.byte_level ? "BPE (byte-level" : "BPE (characters";
  if (config_.byte_fallback) s += ", byte fallback";
  if (config_.ignore_merges) s += ", ignore_merges";
  return s + ")";
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>* syms) const {
  syms->clear();
  bool pending_unk = false;  // an unk symbol waiting to be pushed (for fuse_unk)
  auto unknown = [&]() {
    if (unk_id_ < 0) return;  // no unk token: the character is dropped
    if (pending_unk && config_.fuse_unk) return;
    if (pending_unk) syms->push_back(unk_id_);
    pending_unk = true;
  };
  auto flush = [&]() {
    if (pending_unk) syms->push_back(unk_id_);
    pending_unk = false;
  };
  if (config_.byte_level) {
    for (char c : word) {
      int32_t id = byte_to_id_[static_cast<uint8_t>(c)];
      if (id >= 0) {
        flush();
        syms->push_back(id);
      } else {
        unknown();
      }
    }
    flush();
    return;
  }
  size_t pos = 0;
  while (pos < word.size()) {
    size_t n = std::min<size_t>(utf8_len(static_cast<uint8_t>(word[pos])), word.size() - pos);
    std::string_view ch = word.substr(pos, n);
    pos += n;
    if (auto id = vocab_.find(ch)) {
      flush();
      syms->push_back(*id);
      continue;
    }
    if (config_.byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_fallback_id_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : ch) syms->push_back(byte_fallback_id_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    unknown();
  }
  flush();
}

void BpeModel::merge_small(std::vector<int32_t>* syms) const {
  size_t n = syms->size();
  if (n < 2) return;
  int32_t* s = syms->data();
  uint32_t ranks[kSmallWord];
  int32_t merged[kSmallWord];
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = lookup(s[i], s[i + 1], &merged[i]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoRank) break;
    s[best] = merged[best];
    for (size_t i = best + 1; i + 1 < n; ++i) s[i] = s[i + 1];
    for (size_t i = best + 1; i + 2 < n; ++i) {
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) ranks[best - 1] = lookup(s[best - 1], s[best], &merged[best - 1]);
    if (best + 1 < n) ranks[best] = lookup(s[best], s[best + 1], &merged[best]);
  }
  syms->resize(n);
}

void BpeModel::merge_large(std::vector<int32_t>* syms) const {
  struct Sym {
    int32_t id, prev, next;
  };
  struct Cand {
    uint32_t rank;
    int32_t pos, left, right, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  size_t n = syms->size();
  std::vector<Sym> list(n);
  for (size_t i = 0; i < n; ++i) {
    list[i] = {(*syms)[i], static_cast<int32_t>(i) - 1,
               i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  }
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || list[pos].next < 0) return;
    int32_t m = 0;
    uint32_t r = lookup(list[pos].id, list[list[pos].next].id, &m);
    if (r != kNoRank) heap.push({r, pos, list[pos].id, list[list[pos].next].id, m});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Sym& left = list[c.pos];
    if (left.id != c.left || left.next < 0 || list[left.next].id != c.right) continue;  // stale
    int32_t r = left.next;
    left.id = c.merged;
    left.next = list[r].next;
    if (left.next >= 0) list[left.next].prev = c.pos;
    list[r].id = -1;
    push(left.prev);
    push(c.pos);
  }
  syms->clear();
  for (int32_t i = n ? 0 : -1; i >= 0; i = list[i].next) syms->push_back(list[i].id);
}

void BpeModel::encode_uncached(std::string_view word, std::vector<int32_t>* ids) const {
  if (config_.ignore_merges) {
    auto whole = config_.byte_level ? raw_vocab_.find(word) : vocab_.find(word);
    if (whole) {
      ids->push_back(*whole);
      return;
    }
  }
  thread_local std::vector<int32_t> syms;
  initial_symbols(word, &syms);
  if (syms.size() <= kSmallWord) {
    merge_small(&syms);
  } else {
    merge_large(&syms);
  }
  ids->insert(ids->end(), syms.begin(), syms.end());
}

void BpeModel::encode(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  auto compute = [this](std::string_view w, std::vector<int32_t>* out) { encode_uncached(w, out); };
  if (!split_at_metaspace_) {
    encode_cached(instance_id_, word, ids, compute);
    return;
  }
  // No piece spans "x▁", so each run starting at a "▁" after other text merges on its own.
  size_t start = 0;
  for (size_t p = word.find(kSpmSpace, 1); p != std::string_view::npos;
       p = word.find(kSpmSpace, p + 1)) {
    if (!follows_metaspace(word, p)) {
      encode_cached(instance_id_, word.substr(start, p - start), ids, compute);
      start = p;
    }
  }
  encode_cached(instance_id_, word.substr(start), ids, compute);
}

}  // namespace strata::tok

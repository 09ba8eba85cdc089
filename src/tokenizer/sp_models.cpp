#include "tokenizer/sp_models.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "tokenizer/bpe_model.h"
#include "tokenizer/unicode.h"
#include "tokenizer/word_cache.h"

namespace strata::tok {

Status SpPieceTable::init(std::vector<SpPiece> pieces, std::optional<int32_t> unk_id,
                          bool byte_fallback) {
  pieces_ = std::move(pieces);
  byte_fallback_ = byte_fallback;
  vocab_.reserve(pieces_.size());
  for (int32_t id = 0; id < static_cast<int32_t>(pieces_.size()); ++id) {
    const SpPiece& p = pieces_[id];
    if (p.piece.empty()) return invalid_argument("piece " + std::to_string(id) + " is empty");
    if (vocab_.find(p.piece)) {
      return invalid_argument("piece '" + p.piece + "' is defined twice");
    }
    vocab_.set(id, p.piece);
    if (p.type == SpPiece::Type::kNormal || p.type == SpPiece::Type::kUserDefined ||
        p.type == SpPiece::Type::kUnused) {
      mergeable_.set(id, p.piece);
    }
    if (p.type == SpPiece::Type::kUnknown && !unk_id) unk_id = id;
  }
  if (unk_id) {
    if (*unk_id < 0 || *unk_id >= size()) return invalid_argument("unk id out of range");
    unk_id_ = *unk_id;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto id = vocab_.find(name);
    byte_ids_[b] = id ? *id : -1;
    if (byte_fallback_ && !id) {
      return invalid_argument(std::string("byte_fallback is on but piece ") + name + " is missing");
    }
  }
  return ok_status();
}

void SpPieceTable::emit_unknown(std::string_view text, std::vector<int32_t>* ids,
                                bool* prev_unk) const {
  if (byte_fallback_) {
    for (char c : text) ids->push_back(byte_ids_[static_cast<uint8_t>(c)]);
    *prev_unk = false;
    return;
  }
  if (unk_id_ < 0) return;
  if (!*prev_unk) ids->push_back(unk_id_);
  *prev_unk = true;
}

// ---- SentencePiece BPE ----

Result<std::unique_ptr<SpmBpeModel>> SpmBpeModel::create(std::vector<SpPiece> pieces,
                                                         std::optional<int32_t> unk_id,
                                                         bool byte_fallback) {
  std::unique_ptr<SpmBpeModel> m(new SpmBpeModel());
  STRATA_RETURN_IF_ERROR(m->table_.init(std::move(pieces), unk_id, byte_fallback));
  for (int32_t id = 0; id < m->table_.size(); ++id) {
    if (m->table_.at(id).type == SpPiece::Type::kUnused) m->has_unused_ = true;
  }
  Vocab mergeable;
  for (int32_t id = 0; id < m->table_.size(); ++id) {
    if (m->table_.find_mergeable(m->table_.at(id).piece)) mergeable.set(id, m->table_.at(id).piece);
  }
  m->split_at_metaspace_ = pieces_split_at_metaspace(mergeable);
  m->cache_owner_ = new_cache_owner();
  // Every way of writing a mergeable piece as two mergeable pieces.
  m->pairs_.reserve(static_cast<size_t>(mergeable.size()) * 4);
  for (int32_t id = 0; id < mergeable.size(); ++id) {
    std::string_view p = mergeable.piece(id);
    if (p.empty()) continue;
    for (size_t k = utf8_len(static_cast<uint8_t>(p[0])); k < p.size();
         k += utf8_len(static_cast<uint8_t>(p[k]))) {
      auto l = mergeable.find(p.substr(0, k)), r = mergeable.find(p.substr(k));
      if (l && r) m->pairs_.insert(*l, *r, 0, id);
    }
  }
  for (int c = 0; c < 128; ++c) {
    auto id = mergeable.find(std::string(1, static_cast<char>(c)));
    m->ascii_ids_[c] = id ? *id : -1;
  }
  return m;
}

void SpmBpeModel::encode(std::string_view text, std::vector<int32_t>* ids) const {
  if (text.empty()) return;
  auto compute = [this](std::string_view w, std::vector<int32_t>* out) { encode_chunk(w, out); };
  if (!split_at_metaspace_) {
    encode_cached(cache_owner_, text, ids, compute);
    return;
  }
  size_t start = 0;
  for (size_t p = text.find(kSpmSpace, 1); p != std::string_view::npos;
       p = text.find(kSpmSpace, p + 1)) {
    if (!follows_metaspace(text, p)) {
      encode_cached(cache_owner_, text.substr(start, p - start), ids, compute);
      start = p;
    }
  }
  encode_cached(cache_owner_, text.substr(start), ids, compute);
}

void SpmBpeModel::encode_chunk(std::string_view text, std::vector<int32_t>* ids) const {
  if (text.empty()) return;
  struct Sym {
    uint32_t begin, len;
    int32_t prev, next;
    int32_t id;  // mergeable piece of the symbol's text, or -1
  };
  struct Pair {
    float score;
    int32_t left, right, merged;
    uint32_t len;
  };
  auto worse = [](const Pair& a, const Pair& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  thread_local std::vector<Sym> syms;
  syms.clear();
  size_t pos = 0;
  while (pos < text.size()) {
    // (User-defined pieces never get here: they are matched as added tokens before the model.)
    auto lead = static_cast<uint8_t>(text[pos]);
    size_t len = std::min<size_t>(utf8_len(lead), text.size() - pos);
    int32_t id = -1;
    if (lead < 0x80) {
      id = ascii_ids_[lead];
    } else if (auto f = table_.find_mergeable(text.substr(pos, len))) {
      id = *f;
    }
    auto n = static_cast<int32_t>(syms.size());
    syms.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(len), n - 1, n + 1, id});
    pos += len;
  }
  syms.back().next = -1;

  // Max-heap under `worse`: the best-scoring, leftmost pair on top.
  thread_local std::vector<Pair> agenda;
  agenda.clear();
  // Unused pieces may be merged through but are split back at the end.
  std::vector<std::pair<std::pair<uint32_t, uint32_t>, uint32_t>> rev_merge;  // (begin,len)->left
  auto maybe_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Sym& l = syms[left];
    const Sym& r = syms[right];
    uint32_t len = l.len + r.len;
    int32_t merged = -1;
    if (l.id >= 0 && r.id >= 0) {
      if (pairs_.find(l.id, r.id, &merged) == PairTable::kNone) return;
    } else {
      auto id = table_.find_mergeable(text.substr(l.begin, len));
      if (!id) return;
      merged = *id;
    }
    agenda.push_back({table_.at(merged).score, left, right, merged, len});
    std::push_heap(agenda.begin(), agenda.end(), worse);
    if (has_unused_ && table_.at(merged).type == SpPiece::Type::kUnused) {
      rev_merge.push_back({{l.begin, len}, l.len});
    }
  };
  for (size_t i = 1; i < syms.size(); ++i)
    maybe_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  while (!agenda.empty()) {
    std::pop_heap(agenda.begin(), agenda.end(), worse);
    Pair top = agenda.back();
    agenda.pop_back();
    Sym& l = syms[top.left];
    Sym& r = syms[top.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != top.len || l.next != top.right) continue;
    l.len += r.len;
    l.id = top.merged;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = top.left;
    r.len = 0;
    maybe_add(l.prev, top.left);
    maybe_add(top.left, l.next);
  }
  bool prev_unk = false;
  // Resegments unused pieces into the two parts they were merged from.
  auto emit = [&](auto& self, uint32_t begin, uint32_t len, int32_t known) -> void {
    std::string_view piece = text.substr(begin, len);
    std::optional<int32_t> id;
    if (known >= 0) {
      id = known;
    } else {
      id = table_.vocab().find(piece);
    }
    if (id && table_.at(*id).type == SpPiece::Type::kUnused) {
      for (const auto& [key, left_len] : rev_merge) {
        if (key.first == begin && key.second == len) {
          self(self, begin, left_len, -1);
          self(self, begin + left_len, len - left_len, -1);
          return;
        }
      }
    }
    if (id && table_.at(*id).type != SpPiece::Type::kUnknown) {
      ids->push_back(*id);
      prev_unk = false;
    } else {
      table_.emit_unknown(piece, ids, &prev_unk);
    }
  };
  for (int32_t i = 0; i >= 0; i = syms[i].next) emit(emit, syms[i].begin, syms[i].len, syms[i].id);
}

// ---- Unigram ----

Result<std::unique_ptr<UnigramModel>> UnigramModel::create(std::vector<SpPiece> pieces,
                                                           std::optional<int32_t> unk_id,
                                                           bool byte_fallback) {
  std::unique_ptr<UnigramModel> m(new UnigramModel());
  STRATA_RETURN_IF_ERROR(m->table_.init(std::move(pieces), unk_id, byte_fallback));
  m->min_score_ = std::numeric_limits<float>::max();
  m->max_score_ = std::numeric_limits<float>::lowest();
  bool any = false;
  for (int32_t id = 0; id < m->table_.size(); ++id) {
    const SpPiece& p = m->table_.at(id);
    if (p.type == SpPiece::Type::kNormal) {
      m->min_score_ = std::min(m->min_score_, p.score);
      m->max_score_ = std::max(m->max_score_, p.score);
      any = true;
    }
  }
  if (!any) m->min_score_ = m->max_score_ = 0;
  m->trie_.assign(1, Node{});
  for (int32_t id = 0; id < m->table_.size(); ++id) {
    const SpPiece& p = m->table_.at(id);
    if (p.type != SpPiece::Type::kNormal && p.type != SpPiece::Type::kUserDefined) continue;
    int32_t node = 0;
    for (char ch : p.piece) {
      auto b = static_cast<uint8_t>(ch);
      auto& next = m->trie_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(b, INT32_MIN));
      if (it != next.end() && it->first == b) {
        node = it->second;
      } else {
        auto child = static_cast<int32_t>(m->trie_.size());
        next.insert(it, {b, child});
        m->trie_.push_back(Node{});
        node = child;
      }
    }
    m->trie_[node].id = id;
  }
  return m;
}

void UnigramModel::encode(std::string_view text, std::vector<int32_t>* ids) const {
  if (text.empty()) return;
  struct Best {
    int32_t id = -1;
    float score = 0;
    int32_t starts_at = -1;
  };
  const size_t size = text.size();
  const float unk_score = min_score_ - 10.0f;
  std::vector<Best> best(size + 1);
  size_t starts_at = 0;
  while (starts_at < size) {
    const float base = best[starts_at].score;
    size_t mblen =
        std::min<size_t>(utf8_len(static_cast<uint8_t>(text[starts_at])), size - starts_at);
    bool has_single = false;
    int32_t node = 0;
    for (size_t k = starts_at; k < size; ++k) {
      auto b = static_cast<uint8_t>(text[k]);
      const auto& next = trie_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(b, INT32_MIN));
      if (it == next.end() || it->first != b) break;
      node = it->second;
      int32_t id = trie_[node].id;
      if (id < 0) continue;
      size_t length = k + 1 - starts_at;
      const SpPiece& p = table_.at(id);
      // User-defined pieces get a bonus so that they are always chosen.
      float score = p.type == SpPiece::Type::kUserDefined
                        ? static_cast<float>(length) * max_score_ - 0.1f
                        : p.score;
      float candidate = score + base;
      Best& target = best[k + 1];
      if (target.starts_at < 0 || candidate > target.score) {
        target = {id, candidate, static_cast<int32_t>(starts_at)};
      }
      if (length == mblen) has_single = true;
    }
    if (!has_single) {
      Best& target = best[starts_at + mblen];
      float candidate = unk_score + base;
      if (target.starts_at < 0 || candidate > target.score) {
        target = {-1, candidate, static_cast<int32_t>(starts_at)};
      }
    }
    starts_at += mblen;
  }
  std::vector<std::pair<size_t, size_t>> path;  // (begin, end) with id in best[end]
  for (size_t end = size; end > 0; end = static_cast<size_t>(best[end].starts_at)) {
    path.emplace_back(best[end].starts_at, end);
  }
  std::reverse(path.begin(), path.end());
  bool prev_unk = false;
  for (const auto& [b, e] : path) {
    int32_t id = best[e].id;
    if (id >= 0) {
      ids->push_back(id);
      prev_unk = false;
    } else {
      table_.emit_unknown(text.substr(b, e - b), ids, &prev_unk);
    }
  }
}

}  // namespace strata::tok

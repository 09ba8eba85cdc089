// CompiledGrammar (per-state token tables over a sorted vocabulary) and GrammarMatcher.
//
// For a DFA state (rule R, state s) the vocabulary splits three ways, looking at R alone:
//   accepted   the token's bytes can all be read by R's DFA from s: allowed in any context;
//   uncertain  the DFA dies on the way, after passing (at a depth >= 1) a state where R may
//              call another rule or end: whether the token is allowed depends on the stack;
//   rejected   the DFA dies before any such state: never allowed from here.
// The tables are computed on first use by walking the vocabulary in byte order, sharing each
// token's common prefix with the previous one, and kept for every later matcher. At run time a
// mask is the union over the frames of the current stack set of their accepted bits, plus the
// uncertain tokens that survive a full run of the pushdown machine from that frame. Boundaries
// at depth 0 need no run: the set is closed, so the frames they lead to are in it already.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "core/check.h"
#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammar/stack_machine.h"

namespace strata::grammar {

namespace {

// The vocabulary sorted by bytes, with the common prefix length of each entry and the one
// before it. Tokens that can never be part of a constrained output (special, empty) are left out.
struct VocabIndex {
  std::vector<int32_t> order;
  std::vector<uint32_t> lcp;
  size_t max_len = 0;
};

std::shared_ptr<const VocabIndex> build_index(const TokenVocabulary& v) {
  auto idx = std::make_shared<VocabIndex>();
  for (size_t id = 0; id < v.token_bytes.size(); ++id) {
    bool special = id < v.is_special.size() && v.is_special[id];
    if (special || v.token_bytes[id].empty() || static_cast<int64_t>(id) >= v.vocab_size) continue;
    idx->order.push_back(static_cast<int32_t>(id));
  }
  std::sort(idx->order.begin(), idx->order.end(),
            [&](int32_t a, int32_t b) { return v.token_bytes[a] < v.token_bytes[b]; });
  idx->lcp.resize(idx->order.size(), 0);
  for (size_t i = 0; i < idx->order.size(); ++i) {
    const std::string& cur = v.token_bytes[idx->order[i]];
    idx->max_len = std::max(idx->max_len, cur.size());
    if (i == 0) continue;
    const std::string& prev = v.token_bytes[idx->order[i - 1]];
    size_t n = 0;
    while (n < cur.size() && n < prev.size() && cur[n] == prev[n]) ++n;
    idx->lcp[i] = static_cast<uint32_t>(n);
  }
  return idx;
}

// One index per vocabulary object, built on its first compile and kept while the vocabulary
// lives, shared by every grammar compiled against it.
std::shared_ptr<const VocabIndex> index_for(const std::shared_ptr<const TokenVocabulary>& v) {
  static std::mutex mu;
  static std::map<const TokenVocabulary*, std::pair<std::weak_ptr<const TokenVocabulary>,
                                                    std::shared_ptr<const VocabIndex>>>
      cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(v.get());
  if (it != cache.end() && it->second.first.lock() == v) return it->second.second;
  for (auto i = cache.begin(); i != cache.end();) {  // forget dead vocabularies
    i = i->second.first.expired() ? cache.erase(i) : std::next(i);
  }
  auto idx = build_index(*v);
  cache[v.get()] = {v, idx};
  return idx;
}

struct TokenTable {
  std::vector<uint64_t> accepted;       // [mask words]
  std::vector<int32_t> uncertain;       // token ids in byte order
  std::vector<uint32_t> uncertain_lcp;  // common prefix with the previous uncertain token
  // The most an accepted token raises the bytes still needed to finish the rule (>= 0).
  int32_t max_increase = 0;
};

}  // namespace

struct CompiledGrammar::Impl {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenVocabulary> vocab;
  std::shared_ptr<const VocabIndex> index;
  const Automaton* automaton = nullptr;
  size_t words = 0;
  mutable std::mutex mu;
  mutable std::vector<std::unique_ptr<TokenTable>> owned;
  mutable std::unique_ptr<std::atomic<const TokenTable*>[]> tables;  // [total states]

  const TokenTable& table(int rule, int state) const {
    const size_t g = static_cast<size_t>(automaton->state_base[rule] + state);
    const TokenTable* t = tables[g].load(std::memory_order_acquire);
    if (t != nullptr) return *t;
    std::lock_guard<std::mutex> lock(mu);
    t = tables[g].load(std::memory_order_relaxed);
    if (t != nullptr) return *t;
    owned.push_back(build(rule, state));
    t = owned.back().get();
    tables[g].store(t, std::memory_order_release);
    return *t;
  }

  std::unique_ptr<TokenTable> build(int rule, int state) const {
    auto t = std::make_unique<TokenTable>();
    t->accepted.assign(words, 0);
    const Automaton& a = *automaton;
    const RuleDfa& d = a.rules[rule];
    auto boundary = [&](int s) { return d.accept[s] || d.call_begin[s] != d.call_begin[s + 1]; };
    std::vector<int32_t> st(index->max_len + 1, 0);
    std::vector<uint8_t> flag(index->max_len + 1, 0);
    st[0] = state;
    size_t prev_dead = SIZE_MAX;  // depth at which the previous token died (SIZE_MAX: it lived)
    bool prev_uncertain = false;
    uint32_t run_min = UINT32_MAX;
    for (size_t i = 0; i < index->order.size(); ++i) {
      const int32_t id = index->order[i];
      const std::string& b = vocab->token_bytes[id];
      const size_t l = index->lcp[i];
      run_min = std::min<uint32_t>(run_min, index->lcp[i]);
      bool uncertain = false;
      if (prev_dead != SIZE_MAX && l > prev_dead) {
        uncertain = prev_uncertain;  // same prefix, same death
      } else {
        size_t dpt = l;
        size_t dead = SIZE_MAX;
        while (dpt < b.size()) {
          int32_t nx = a.step(rule, st[dpt], static_cast<uint8_t>(b[dpt]));
          if (nx < 0) {
            dead = dpt;
            break;
          }
          st[dpt + 1] = nx;
          flag[dpt + 1] = flag[dpt] || boundary(nx);
          ++dpt;
        }
        prev_dead = dead;
        if (dead == SIZE_MAX) {
          t->accepted[id >> 6] |= uint64_t{1} << (id & 63);
          t->max_increase = std::max(t->max_increase, d.dist[st[b.size()]] - d.dist[state]);
          continue;
        }
        uncertain = prev_uncertain = flag[dead] != 0;
      }
      if (uncertain) {
        t->uncertain.push_back(id);
        t->uncertain_lcp.push_back(t->uncertain.size() == 1 ? 0 : run_min);
        run_min = UINT32_MAX;
      }
    }
    return t;
  }
};

std::shared_ptr<const CompiledGrammar> CompiledGrammar::compile(
    std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocabulary) {
  STRATA_CHECK(grammar != nullptr && vocabulary != nullptr);
  std::shared_ptr<CompiledGrammar> g(new CompiledGrammar());
  g->impl_ = std::make_unique<Impl>();
  Impl& m = *g->impl_;
  m.grammar = std::move(grammar);
  m.vocab = std::move(vocabulary);
  m.index = index_for(m.vocab);
  m.automaton = &m.grammar->automaton();
  m.words = GrammarMatcher::mask_words(m.vocab->vocab_size);
  const size_t n = static_cast<size_t>(m.automaton->total_states());
  m.tables = std::make_unique<std::atomic<const TokenTable*>[]>(n);
  for (size_t i = 0; i < n; ++i) m.tables[i].store(nullptr, std::memory_order_relaxed);
  return g;
}

CompiledGrammar::~CompiledGrammar() = default;
const Grammar& CompiledGrammar::grammar() const {
  return *impl_->grammar;
}
const TokenVocabulary& CompiledGrammar::vocabulary() const {
  return *impl_->vocab;
}

struct GrammarMatcher::State {
  std::shared_ptr<const CompiledGrammar> g;
  StackMachine machine;
  std::vector<int32_t> set;
  bool terminated = false;
  // Scratch reused across calls (no allocation per step once grown).
  std::vector<std::vector<int32_t>> levels;  // stack sets by depth
  std::vector<int32_t> cur, next;
  std::vector<std::pair<int32_t, int32_t>> tables_done;  // (rule, state) ORed into this mask

  explicit State(std::shared_ptr<const CompiledGrammar> grammar)
      : g(std::move(grammar)), machine(g->grammar().automaton()) {
    set = machine.initial();
  }

  const TokenVocabulary& vocab() const { return g->vocabulary(); }

  bool allowed_bytes_token(int32_t id) const {
    const TokenVocabulary& v = vocab();
    if (id < 0 || static_cast<size_t>(id) >= v.token_bytes.size() || id >= v.vocab_size)
      return false;
    if (static_cast<size_t>(id) < v.is_special.size() && v.is_special[id]) return false;
    return !v.token_bytes[id].empty();
  }

  bool is_eos(int32_t id) const {
    const auto& e = vocab().eos_token_ids;
    return std::find(e.begin(), e.end(), id) != e.end();
  }

  // The tokens that follow a shortest completion: every byte lowers the bytes still needed by
  // one. Used when the token budget runs out, so the output finishes as a whole sentence.
  void shortest_path_mask(int64_t cost, const VocabIndex& index, uint64_t* mask) {
    const TokenVocabulary& v = vocab();
    std::vector<int64_t> costs(index.max_len + 1, 0);
    if (levels.size() < index.max_len + 1) levels.resize(index.max_len + 1);
    levels[0] = set;
    costs[0] = cost;
    size_t prev_dead = SIZE_MAX;
    for (size_t i = 0; i < index.order.size(); ++i) {
      const int32_t id = index.order[i];
      const std::string& b = v.token_bytes[id];
      const size_t l = i == 0 ? 0 : index.lcp[i];
      if (prev_dead != SIZE_MAX && l > prev_dead) continue;
      size_t d = l;
      size_t dead = SIZE_MAX;
      while (d < b.size()) {
        machine.step(levels[d], static_cast<uint8_t>(b[d]), &levels[d + 1]);
        const int64_t c = levels[d + 1].empty() ? kNoPath : machine.completion_cost(levels[d + 1]);
        if (c != costs[d] - 1) {
          dead = d;
          break;
        }
        costs[d + 1] = c;
        ++d;
      }
      prev_dead = dead;
      if (dead == SIZE_MAX) mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }

  // Runs the uncertain tokens of frame f's table, setting the bits of those that survive; raises
  // *max_cost to the completion cost after each of them.
  void run_uncertain(int32_t f, const TokenTable& t, uint64_t* mask, int64_t* max_cost) {
    const TokenVocabulary& v = vocab();
    size_t prev_dead = SIZE_MAX;
    for (size_t j = 0; j < t.uncertain.size(); ++j) {
      const int32_t id = t.uncertain[j];
      const std::string& b = v.token_bytes[id];
      const size_t l = t.uncertain_lcp[j];
      if (prev_dead != SIZE_MAX && l > prev_dead) continue;
      if (levels.size() < b.size() + 1) levels.resize(b.size() + 1);
      size_t d = j == 0 ? 0 : l;
      size_t dead = SIZE_MAX;
      while (d < b.size()) {
        auto byte = static_cast<uint8_t>(b[d]);
        if (d == 0) {
          machine.step_frame(f, byte, &levels[1]);
        } else {
          machine.step(levels[d], byte, &levels[d + 1]);
        }
        if (levels[d + 1].empty()) {
          dead = d;
          break;
        }
        ++d;
      }
      prev_dead = dead;
      if (dead == SIZE_MAX) {
        mask[id >> 6] |= uint64_t{1} << (id & 63);
        *max_cost = std::max(*max_cost, machine.completion_cost(levels[b.size()]));
      }
    }
  }
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : s_(std::make_unique<State>(std::move(grammar))) {}
GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

void GrammarMatcher::fill_next_token_mask(std::span<uint64_t> mask, int64_t remaining_tokens) {
  State& s = *s_;
  const CompiledGrammar::Impl& g = s.g->impl();
  STRATA_CHECK_GE(mask.size(), g.words);
  std::fill(mask.begin(), mask.end(), 0);
  auto set_eos = [&]() {
    for (int32_t e : s.vocab().eos_token_ids) {
      if (e >= 0 && e < s.vocab().vocab_size) mask[e >> 6] |= uint64_t{1} << (e & 63);
    }
  };
  if (s.terminated) {
    set_eos();
    return;
  }
  const size_t mark = s.machine.checkpoint();
  bool any = false;
  // An upper bound of the completion cost after any allowed token: per frame its cost plus its
  // table's largest rise, and the exact cost after each uncertain token that survives.
  int64_t max_cost_after = 0;
  // Frames sharing (rule, state) share a table; OR each accepted set once.
  std::vector<std::pair<int32_t, int32_t>>& done = s.tables_done;
  done.clear();
  for (int32_t f : s.set) {
    const auto& fr = s.machine.frame(f);
    if (!g.automaton->rules[fr.rule].has_bytes[fr.state]) continue;
    const TokenTable& t = g.table(fr.rule, fr.state);
    max_cost_after = std::max(max_cost_after, s.machine.frame_cost(f) + t.max_increase);
    std::pair<int32_t, int32_t> key{fr.rule, fr.state};
    if (std::find(done.begin(), done.end(), key) == done.end()) {
      done.push_back(key);
      for (size_t w = 0; w < g.words; ++w) mask[w] |= t.accepted[w];
    }
    if (!t.uncertain.empty()) s.run_uncertain(f, t, mask.data(), &max_cost_after);
  }
  // Near the end of the token budget (within a margin of the most bytes any allowed token could
  // leave to do), only tokens on a shortest completion remain, each lowering the bytes needed,
  // so the output ends complete rather than cut off. Outside that window every token leaves at
  // most max_cost_after bytes, fewer than the tokens then left, so the window is entered in time.
  constexpr int64_t kBudgetMargin = 8;
  if (remaining_tokens != kUnlimited) {
    const int64_t cost = s.machine.completion_cost(s.set);
    if (remaining_tokens <= std::max(cost, max_cost_after) + kBudgetMargin) {
      std::fill(mask.begin(), mask.end(), 0);
      // Complete: end now (EOS is set below) rather than start what the budget cannot finish.
      if (cost > 0) s.shortest_path_mask(cost, *g.index, mask.data());
    }
  }
  s.machine.rollback(mark);
  for (size_t w = 0; w < g.words && !any; ++w) any = mask[w] != 0;
  // Complete: EOS may end it. Nothing allowed at all (the vocabulary cannot spell what the
  // grammar needs next): EOS too, so the sequence ends instead of sampling from nothing.
  if (s.machine.complete(s.set) || !any) set_eos();
}

bool GrammarMatcher::accept_token(int32_t id) {
  State& s = *s_;
  // After the end, EOS is all there is (a request with ignore_eos keeps sampling it).
  if (s.terminated) return s.is_eos(id);
  if (s.is_eos(id)) {
    if (!s.machine.complete(s.set)) return false;
    s.terminated = true;
    return true;
  }
  if (!s.allowed_bytes_token(id)) return false;
  return accept_bytes(s.vocab().token_bytes[id]);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  State& s = *s_;
  if (s.terminated) return false;
  const size_t mark = s.machine.checkpoint();
  std::vector<int32_t>& cur = s.cur;
  cur.assign(s.set.begin(), s.set.end());
  for (char c : bytes) {
    s.machine.step(cur, static_cast<uint8_t>(c), &s.next);
    cur.swap(s.next);
    if (cur.empty()) {
      s.machine.rollback(mark);
      return false;
    }
  }
  s.set.swap(cur);
  return true;
}

bool GrammarMatcher::is_complete() const {
  return s_->terminated || s_->machine.complete(s_->set);
}

bool GrammarMatcher::is_terminated() const {
  return s_->terminated || (s_->machine.complete(s_->set) && !s_->machine.can_continue(s_->set));
}

}  // namespace strata::grammar

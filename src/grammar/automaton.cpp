#include "grammar/automaton.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>

namespace strata::grammar {

namespace {

// Limits that keep a hostile grammar from exhausting memory or time.
constexpr int64_t kMaxNfaStates = 2'000'000;
constexpr int64_t kMaxDfaStates = 500'000;
// A rule used more than once is compiled on its own (called) rather than copied into each user
// when its inlined size exceeds this many NFA states.
constexpr int64_t kInlineLimit = 4000;

using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;

// The UTF-8 encodings of the code points in [lo, hi] as sequences of byte ranges.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteSeq>* out) {
  static constexpr uint32_t kMaxOfLength[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (int n = 0; n < 4; ++n) {  // split at the encoded-length boundaries
    uint32_t first = n == 0 ? 0 : kMaxOfLength[n - 1] + 1;
    if (lo <= kMaxOfLength[n] && hi >= first && (lo < first || hi > kMaxOfLength[n])) {
      uint32_t a = std::max(lo, first), b = std::min(hi, kMaxOfLength[n]);
      if (lo < a) utf8_sequences(lo, a - 1, out);
      utf8_sequences(a, b, out);
      if (b < hi) utf8_sequences(b + 1, hi, out);
      return;
    }
  }
  int len = hi <= 0x7F ? 1 : hi <= 0x7FF ? 2 : hi <= 0xFFFF ? 3 : 4;
  // Split until lo and hi differ only where every continuation byte spans its full range.
  for (int i = 1; i < len; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  auto encode = [len](uint32_t cp, uint8_t* b) {
    if (len == 1) {
      b[0] = static_cast<uint8_t>(cp);
    } else {
      for (int i = len - 1; i > 0; --i) {
        b[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
        cp >>= 6;
      }
      static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
      b[0] = static_cast<uint8_t>(kLead[len] | cp);
    }
  };
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  ByteSeq seq;
  for (int i = 0; i < len; ++i) seq.emplace_back(a[i], b[i]);
  out->push_back(std::move(seq));
}

struct Nfa {
  std::vector<std::vector<int>> eps;
  std::vector<std::vector<std::tuple<uint8_t, uint8_t, int>>> bytes;
  std::vector<std::vector<std::pair<int, int>>> calls;  // (called rule index, target)
  int start = 0, end = 0;

  int add() {
    eps.emplace_back();
    bytes.emplace_back();
    calls.emplace_back();
    return static_cast<int>(eps.size()) - 1;
  }
  int size() const { return static_cast<int>(eps.size()); }
};

class Compiler {
 public:
  explicit Compiler(const GrammarIr& ir) : ir_(ir) {}

  Result<std::unique_ptr<Automaton>> run() {
    choose_called_rules();
    std::vector<Nfa> nfas(called_.size());
    for (size_t i = 0; i < called_.size(); ++i) {
      Nfa& nfa = nfas[i];
      nfa_ = &nfa;
      auto frag = build(ir_.rule_body[called_[i]]);
      if (!frag.ok()) return frag.status();
      nfa.start = frag->first;
      nfa.end = frag->second;
    }
    auto a = std::make_unique<Automaton>();
    make_byte_classes(nfas, a.get());
    int64_t total = 0;
    for (size_t i = 0; i < called_.size(); ++i) {
      RuleDfa dfa;
      dfa.name = ir_.rule_names[called_[i]];
      STRATA_RETURN_IF_ERROR(determinize(nfas[i], *a, &total, &dfa));
      a->rules.push_back(std::move(dfa));
    }
    STRATA_RETURN_IF_ERROR(prune(a.get()));
    STRATA_RETURN_IF_ERROR(check_left_recursion(*a));
    shortest_completions(a.get());
    a->state_base.assign(1, 0);
    for (const RuleDfa& d : a->rules) a->state_base.push_back(a->state_base.back() + d.num_states);
    return a;
  }

 private:
  using Frag = std::pair<int, int>;

  // Called rules: the root, rules on a reference cycle, big rules referenced twice or more.
  void choose_called_rules() {
    const int n = static_cast<int>(ir_.rule_names.size());
    std::vector<std::vector<int>> refs(n);
    std::vector<int> ref_count(n, 0);
    for (int r = 0; r < n; ++r) collect_refs(ir_.rule_body[r], &refs[r]);
    for (int r = 0; r < n; ++r) {
      for (int q : refs[r]) ++ref_count[q];
    }
    // Tarjan's strongly connected components: a rule is recursive when its component has more
    // than one rule or it refers to itself.
    std::vector<int> index(n, -1), low(n, 0), comp(n, -1), stack;
    std::vector<bool> on_stack(n, false);
    int counter = 0, num_comps = 0;
    std::function<void(int)> visit = [&](int v) {
      index[v] = low[v] = counter++;
      stack.push_back(v);
      on_stack[v] = true;
      for (int w : refs[v]) {
        if (index[w] < 0) {
          visit(w);
          low[v] = std::min(low[v], low[w]);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
      }
      if (low[v] == index[v]) {
        int w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          comp[w] = num_comps;
        } while (w != v);
        ++num_comps;
      }
    };
    for (int r = 0; r < n; ++r) {
      if (index[r] < 0) visit(r);
    }
    std::vector<int> comp_size(num_comps, 0);
    for (int r = 0; r < n; ++r) ++comp_size[comp[r]];
    // Rules the root never reaches are not compiled at all.
    std::vector<bool> reachable(n, false);
    std::vector<int> work{ir_.root};
    while (!work.empty()) {
      int r = work.back();
      work.pop_back();
      if (reachable[r]) continue;
      reachable[r] = true;
      for (int q : refs[r]) work.push_back(q);
    }
    is_called_.assign(n, false);
    for (int r = 0; r < n; ++r) {
      if (!reachable[r]) continue;
      bool self = std::find(refs[r].begin(), refs[r].end(), r) != refs[r].end();
      if (comp_size[comp[r]] > 1 || self) is_called_[r] = true;
    }
    is_called_[ir_.root] = true;
    // Sizes of the inlined rules, leaves first (the non-called reference graph is acyclic).
    size_.assign(n, -1);
    for (int r = 0; r < n; ++r) {
      if (!is_called_[r] && reachable[r]) {
        int64_t s = rule_size(r);
        if (s > kInlineLimit && ref_count[r] >= 2) is_called_[r] = true;
      }
    }
    called_index_.assign(n, -1);
    called_.push_back(ir_.root);
    called_index_[ir_.root] = 0;
    for (int r = 0; r < n; ++r) {
      if (is_called_[r] && r != ir_.root) {
        called_index_[r] = static_cast<int>(called_.size());
        called_.push_back(r);
      }
    }
  }

  void collect_refs(int node, std::vector<int>* out) const {
    const IrNode& n = ir_.nodes[node];
    if (n.kind == IrNode::Kind::kRef) out->push_back(n.rule);
    for (int c : n.children) collect_refs(c, out);
  }

  int64_t rule_size(int r) {
    if (size_[r] >= 0) return size_[r];
    size_[r] = 0;  // (acyclic here: recursive rules are called)
    int64_t s = node_size(ir_.rule_body[r]);
    size_[r] = s;
    return s;
  }

  int64_t node_size(int node) {
    const IrNode& n = ir_.nodes[node];
    switch (n.kind) {
      case IrNode::Kind::kEmpty:
        return 1;
      case IrNode::Kind::kLiteral:
        return static_cast<int64_t>(n.bytes.size()) + 1;
      case IrNode::Kind::kClass:
        return 4 * static_cast<int64_t>(n.ranges.size()) + 2;
      case IrNode::Kind::kRef:
        return is_called_[n.rule] ? 2 : rule_size(n.rule);
      case IrNode::Kind::kSeq:
      case IrNode::Kind::kAlt: {
        int64_t s = 2;
        for (int c : n.children) s = std::min<int64_t>(s + node_size(c), kMaxNfaStates * 4);
        return s;
      }
      case IrNode::Kind::kRepeat: {
        int64_t copies = n.max < 0 ? std::max(n.min, 1) : n.max;
        return std::min<int64_t>(node_size(n.children[0]) * std::max<int64_t>(copies, 1) + 2,
                                 kMaxNfaStates * 4);
      }
    }
    return 1;
  }

  Status too_big() const {
    return invalid_argument("grammar is too large to compile (over " +
                            std::to_string(kMaxNfaStates) +
                            " automaton states); simplify it or lower its repetition counts");
  }

  Result<Frag> build(int node) {
    if (nfa_->size() > kMaxNfaStates) return too_big();
    const IrNode& n = ir_.nodes[node];
    Nfa& a = *nfa_;
    switch (n.kind) {
      case IrNode::Kind::kEmpty: {
        int s = a.add();
        return Frag{s, s};
      }
      case IrNode::Kind::kLiteral: {
        int s = a.add(), cur = s;
        for (char ch : n.bytes) {
          int t = a.add();
          auto b = static_cast<uint8_t>(ch);
          a.bytes[cur].emplace_back(b, b, t);
          cur = t;
        }
        return Frag{s, cur};
      }
      case IrNode::Kind::kClass: {
        int s = a.add(), e = a.add();
        std::vector<ByteSeq> seqs;
        for (auto [lo, hi] : n.ranges) utf8_sequences(lo, hi, &seqs);
        for (const ByteSeq& seq : seqs) {
          int cur = s;
          for (size_t i = 0; i < seq.size(); ++i) {
            int t = i + 1 == seq.size() ? e : a.add();
            a.bytes[cur].emplace_back(seq[i].first, seq[i].second, t);
            cur = t;
          }
        }
        return Frag{s, e};
      }
      case IrNode::Kind::kRef: {
        if (is_called_[n.rule]) {
          int s = a.add(), e = a.add();
          a.calls[s].emplace_back(called_index_[n.rule], e);
          return Frag{s, e};
        }
        return build(ir_.rule_body[n.rule]);
      }
      case IrNode::Kind::kSeq: {
        int s = a.add(), cur = s;
        for (int c : n.children) {
          auto f = build(c);
          if (!f.ok()) return f;
          nfa_->eps[cur].push_back(f->first);
          cur = f->second;
        }
        return Frag{s, cur};
      }
      case IrNode::Kind::kAlt: {
        int s = a.add(), e = a.add();
        for (int c : n.children) {
          auto f = build(c);
          if (!f.ok()) return f;
          nfa_->eps[s].push_back(f->first);
          nfa_->eps[f->second].push_back(e);
        }
        return Frag{s, e};
      }
      case IrNode::Kind::kRepeat: {
        int s = a.add(), cur = s;
        for (int i = 0; i < n.min; ++i) {
          auto f = build(n.children[0]);
          if (!f.ok()) return f;
          nfa_->eps[cur].push_back(f->first);
          cur = f->second;
        }
        if (n.max < 0) {
          int loop = nfa_->add();
          nfa_->eps[cur].push_back(loop);
          auto f = build(n.children[0]);
          if (!f.ok()) return f;
          nfa_->eps[loop].push_back(f->first);
          nfa_->eps[f->second].push_back(loop);
          return Frag{s, loop};
        }
        int e = nfa_->add();
        nfa_->eps[cur].push_back(e);
        for (int i = n.min; i < n.max; ++i) {
          auto f = build(n.children[0]);
          if (!f.ok()) return f;
          nfa_->eps[cur].push_back(f->first);
          cur = f->second;
          nfa_->eps[cur].push_back(e);
        }
        return Frag{s, e};
      }
    }
    return Frag{a.add(), a.add()};
  }

  static void make_byte_classes(const std::vector<Nfa>& nfas, Automaton* a) {
    std::array<bool, 257> boundary{};
    boundary[0] = true;
    for (const Nfa& nfa : nfas) {
      for (const auto& edges : nfa.bytes) {
        for (auto [lo, hi, t] : edges) {
          boundary[lo] = true;
          boundary[hi + 1] = true;
        }
      }
    }
    int cls = -1;
    for (int b = 0; b < 256; ++b) {
      if (boundary[b]) ++cls;
      a->byte_class[b] = static_cast<uint8_t>(cls);
    }
    a->num_classes = cls + 1;
  }

  // Subset construction of one rule's NFA.
  Status determinize(const Nfa& nfa, const Automaton& a, int64_t* total, RuleDfa* out) {
    const int k = a.num_classes;
    std::vector<uint32_t> mark(nfa.size(), 0);
    uint32_t stamp = 0;
    auto closure = [&](std::vector<int> seeds) {
      ++stamp;
      std::vector<int> out_set, work = std::move(seeds);
      while (!work.empty()) {
        int s = work.back();
        work.pop_back();
        if (mark[s] == stamp) continue;
        mark[s] = stamp;
        out_set.push_back(s);
        for (int t : nfa.eps[s]) work.push_back(t);
      }
      std::sort(out_set.begin(), out_set.end());
      return out_set;
    };
    struct SetHash {
      size_t operator()(const std::vector<int>& v) const {
        uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
        for (int x : v) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001B3ull;
        return static_cast<size_t>(h ^ (h >> 31));
      }
    };
    std::unordered_map<std::vector<int>, int, SetHash> ids;
    std::vector<std::vector<int>> sets;
    auto intern = [&](std::vector<int> set) -> int {
      auto [it, inserted] = ids.emplace(set, static_cast<int>(sets.size()));
      if (inserted) sets.push_back(std::move(set));
      return it->second;
    };
    intern(closure({nfa.start}));
    std::vector<std::vector<int>> targets(k);
    std::vector<std::vector<std::pair<int32_t, int32_t>>> calls;
    for (size_t d = 0; d < sets.size(); ++d) {
      if (*total + static_cast<int64_t>(sets.size()) > kMaxDfaStates) {
        return invalid_argument("grammar is too large to compile (over " +
                                std::to_string(kMaxDfaStates) + " DFA states)");
      }
      for (auto& t : targets) t.clear();
      std::map<int, std::vector<int>> by_callee;
      bool accept = false;
      for (int s : sets[d]) {
        if (s == nfa.end) accept = true;
        for (auto [lo, hi, t] : nfa.bytes[s]) {
          for (int c = a.byte_class[lo]; c <= a.byte_class[hi]; ++c) targets[c].push_back(t);
        }
        for (auto [rule, t] : nfa.calls[s]) by_callee[rule].push_back(t);
      }
      out->next.resize((d + 1) * k, -1);
      out->accept.push_back(accept ? 1 : 0);
      for (int c = 0; c < k; ++c) {
        if (targets[c].empty()) continue;
        int id = intern(closure(targets[c]));
        out->next[d * k + c] = id;
      }
      calls.emplace_back();
      for (auto& [rule, ts] : by_callee) calls.back().emplace_back(rule, intern(closure(ts)));
    }
    out->num_states = static_cast<int>(sets.size());
    out->start = 0;
    out->call_begin.assign(1, 0);
    for (auto& c : calls) {
      out->calls.insert(out->calls.end(), c.begin(), c.end());
      out->call_begin.push_back(static_cast<int32_t>(out->calls.size()));
    }
    *total += out->num_states;
    return Status();
  }

  // Marks live states (an accepting state is reachable) to a fixpoint across rules, then drops
  // every edge into a dead state and every call of a rule that matches nothing.
  Status prune(Automaton* a) const {
    const int k = a->num_classes;
    const size_t nr = a->rules.size();
    std::vector<std::vector<uint8_t>> live(nr);
    std::vector<bool> productive(nr, false);
    for (size_t r = 0; r < nr; ++r) live[r] = a->rules[r].accept;
    bool changed = true;
    while (changed) {
      changed = false;
      for (size_t r = 0; r < nr; ++r) {
        RuleDfa& d = a->rules[r];
        for (int s = d.num_states - 1; s >= 0; --s) {
          if (live[r][s]) continue;
          bool l = false;
          for (int c = 0; c < k && !l; ++c) {
            int t = d.next[static_cast<size_t>(s) * k + c];
            l = t >= 0 && live[r][t];
          }
          auto [b, e] = d.calls_of(s);
          for (auto it = b; it != e && !l; ++it) l = productive[it->first] && live[r][it->second];
          if (l) {
            live[r][s] = 1;
            changed = true;
          }
        }
        if (!productive[r] && live[r][d.start]) {
          productive[r] = true;
          changed = true;
        }
      }
    }
    if (!productive[0])
      return invalid_argument("grammar matches nothing (rule '" + a->rules[0].name +
                              "' can never finish)");
    for (size_t r = 0; r < nr; ++r) {
      RuleDfa& d = a->rules[r];
      for (auto& t : d.next) {
        if (t >= 0 && !live[r][t]) t = -1;
      }
      std::vector<std::pair<int32_t, int32_t>> calls;
      std::vector<int32_t> begin{0};
      for (int s = 0; s < d.num_states; ++s) {
        auto [b, e] = d.calls_of(s);
        for (auto it = b; it != e; ++it) {
          if (productive[it->first] && live[r][it->second]) calls.push_back(*it);
        }
        begin.push_back(static_cast<int32_t>(calls.size()));
      }
      d.calls = std::move(calls);
      d.call_begin = std::move(begin);
      d.has_bytes.assign(d.num_states, 0);
      for (int s = 0; s < d.num_states; ++s) {
        for (int c = 0; c < k; ++c) {
          if (d.next[static_cast<size_t>(s) * k + c] >= 0) {
            d.has_bytes[s] = 1;
            break;
          }
        }
      }
    }
    return Status();
  }

  // dist[s] per rule: Bellman-Ford style relaxation across rules until nothing changes (each
  // pass can only lower distances, which are bounded below by 0).
  static void shortest_completions(Automaton* a) {
    const int k = a->num_classes;
    for (RuleDfa& d : a->rules) {
      d.dist.assign(d.num_states, kNoPath);
      for (int s = 0; s < d.num_states; ++s) {
        if (d.accept[s]) d.dist[s] = 0;
      }
    }
    bool changed = true;
    while (changed) {
      changed = false;
      for (RuleDfa& d : a->rules) {
        for (int s = d.num_states - 1; s >= 0; --s) {
          int32_t best = d.dist[s];
          for (int c = 0; c < k; ++c) {
            int32_t t = d.next[static_cast<size_t>(s) * k + c];
            if (t >= 0 && d.dist[t] + 1 < best) best = d.dist[t] + 1;
          }
          auto [b, e] = d.calls_of(s);
          for (auto it = b; it != e; ++it) {
            const RuleDfa& callee = a->rules[it->first];
            int64_t via = static_cast<int64_t>(callee.dist[callee.start]) + d.dist[it->second];
            if (via < best) best = static_cast<int32_t>(via);
          }
          if (best < d.dist[s]) {
            d.dist[s] = best;
            changed = true;
          }
        }
      }
    }
  }

  // A rule that can call itself (through other rules) before reading a byte would loop forever.
  static Status check_left_recursion(const Automaton& a) {
    const size_t nr = a.rules.size();
    std::vector<bool> nullable(nr, false);
    // States reachable from the start through calls of nullable rules only.
    auto reach = [&](size_t r) {
      const RuleDfa& d = a.rules[r];
      std::vector<uint8_t> seen(d.num_states, 0);
      std::vector<int> work{d.start}, out;
      while (!work.empty()) {
        int s = work.back();
        work.pop_back();
        if (seen[s]) continue;
        seen[s] = 1;
        out.push_back(s);
        auto [b, e] = d.calls_of(s);
        for (auto it = b; it != e; ++it) {
          if (nullable[it->first]) work.push_back(it->second);
        }
      }
      return out;
    };
    bool changed = true;
    while (changed) {
      changed = false;
      for (size_t r = 0; r < nr; ++r) {
        if (nullable[r]) continue;
        for (int s : reach(r)) {
          if (a.rules[r].accept[s]) {
            nullable[r] = true;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<int>> left(nr);
    for (size_t r = 0; r < nr; ++r) {
      for (int s : reach(r)) {
        auto [b, e] = a.rules[r].calls_of(s);
        for (auto it = b; it != e; ++it) left[r].push_back(it->first);
      }
    }
    std::vector<int> color(nr, 0);
    std::string cycle;
    std::function<bool(int)> dfs = [&](int v) {
      color[v] = 1;
      for (int w : left[v]) {
        if (color[w] == 1) {
          cycle = a.rules[w].name;
          return true;
        }
        if (color[w] == 0 && dfs(w)) return true;
      }
      color[v] = 2;
      return false;
    };
    for (size_t r = 0; r < nr; ++r) {
      if (color[r] == 0 && dfs(static_cast<int>(r))) {
        return invalid_argument("grammar rule '" + cycle +
                                "' is left-recursive (it can reach itself without reading any "
                                "input); rewrite it with repetition, e.g. x ::= y (\",\" y)*");
      }
    }
    return Status();
  }

  const GrammarIr& ir_;
  Nfa* nfa_ = nullptr;
  std::vector<bool> is_called_;
  std::vector<int> called_, called_index_;
  std::vector<int64_t> size_;
};

}  // namespace

Result<std::unique_ptr<Automaton>> compile_automaton(const GrammarIr& ir) {
  return Compiler(ir).run();
}

}  // namespace strata::grammar

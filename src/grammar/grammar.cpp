#include "grammar/grammar.h"

#include <cstdio>

#include "grammar/automaton.h"
#include "grammar/grammar_ir.h"
#include "grammar/stack_machine.h"

namespace strata::grammar {

Grammar::Grammar(std::unique_ptr<GrammarIr> ir, std::unique_ptr<Automaton> automaton)
    : ir_(std::move(ir)), automaton_(std::move(automaton)) {}

Grammar::~Grammar() = default;

Result<std::shared_ptr<const Grammar>> Grammar::parse_ebnf(std::string_view text,
                                                           std::string_view root_rule) {
  auto ir = parse_ebnf_ir(text, root_rule);
  if (!ir.ok()) return ir.status();
  auto automaton = compile_automaton(**ir);
  if (!automaton.ok()) return automaton.status();
  return std::shared_ptr<const Grammar>(new Grammar(std::move(*ir), std::move(*automaton)));
}

namespace {

// Runs `bytes` from the start; the final set (empty when rejected on the way).
std::vector<int32_t> run(StackMachine& m, std::string_view bytes) {
  std::vector<int32_t> set = m.initial(), next;
  for (char c : bytes) {
    m.step(set, static_cast<uint8_t>(c), &next);
    set.swap(next);
    if (set.empty()) break;
  }
  return set;
}

void escape_code_point(uint32_t cp, bool in_class, std::string* out) {
  auto hex = [&](const char* fmt, uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, fmt, v);
    *out += buf;
  };
  if (cp == '\\' || (in_class ? (cp == ']' || cp == '-' || cp == '^') : cp == '"')) {
    *out += '\\';
    *out += static_cast<char>(cp);
  } else if (cp == '\n') {
    *out += "\\n";
  } else if (cp == '\r') {
    *out += "\\r";
  } else if (cp == '\t') {
    *out += "\\t";
  } else if (cp < 0x20 || cp == 0x7F) {
    hex("\\x%02X", cp);
  } else if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp <= 0xFFFF) {
    hex("\\u%04X", cp);
  } else {
    hex("\\U%08X", cp);
  }
}

void node_to_ebnf(const GrammarIr& ir, int node, std::string* out) {
  const IrNode& n = ir.nodes[node];
  switch (n.kind) {
    case IrNode::Kind::kEmpty:
      *out += "\"\"";
      break;
    case IrNode::Kind::kLiteral: {
      *out += '"';
      for (unsigned char c : n.bytes) {
        if (c >= 0x80) {
          // Bytes of a multi-byte character are written as they are (valid UTF-8 literal).
          *out += static_cast<char>(c);
        } else {
          escape_code_point(c, false, out);
        }
      }
      *out += '"';
      break;
    }
    case IrNode::Kind::kClass:
      *out += '[';
      for (auto [lo, hi] : n.ranges) {
        escape_code_point(lo, true, out);
        if (hi != lo) {
          *out += '-';
          escape_code_point(hi, true, out);
        }
      }
      *out += ']';
      break;
    case IrNode::Kind::kRef:
      *out += ir.rule_names[n.rule];
      break;
    case IrNode::Kind::kSeq:
    case IrNode::Kind::kAlt:
      *out += '(';
      for (size_t i = 0; i < n.children.size(); ++i) {
        if (i > 0) *out += n.kind == IrNode::Kind::kAlt ? " | " : " ";
        node_to_ebnf(ir, n.children[i], out);
      }
      *out += ')';
      break;
    case IrNode::Kind::kRepeat:
      node_to_ebnf(ir, n.children[0], out);
      if (n.min == 0 && n.max < 0) {
        *out += '*';
      } else if (n.min == 1 && n.max < 0) {
        *out += '+';
      } else if (n.min == 0 && n.max == 1) {
        *out += '?';
      } else {
        *out += '{' + std::to_string(n.min);
        if (n.max != n.min) *out += ',' + (n.max < 0 ? std::string() : std::to_string(n.max));
        *out += '}';
      }
      break;
  }
}

}  // namespace

bool Grammar::accepts(std::string_view bytes) const {
  StackMachine m(*automaton_);
  std::vector<int32_t> set = run(m, bytes);
  return m.complete(set);
}

bool Grammar::accepts_prefix(std::string_view bytes) const {
  StackMachine m(*automaton_);
  return !run(m, bytes).empty();
}

std::string Grammar::to_ebnf() const {
  std::string out;
  for (size_t r = 0; r < ir_->rule_names.size(); ++r) {
    out += ir_->rule_names[r] + " ::= ";
    node_to_ebnf(*ir_, ir_->rule_body[r], &out);
    out += '\n';
  }
  return out;
}

}  // namespace strata::grammar

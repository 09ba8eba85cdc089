#include "server/structured_output.h"

#include "core/json.h"
#include "grammar/json_schema.h"

namespace strata::server {

namespace {

using Kind = StructuredOutput::Kind;

// A schema given as an object or as JSON text (vLLM accepts both for `json`/`guided_json`).
bool read_schema(JsonFields& f, const char* field, const OrderedJson& v, const std::string& param,
                 StructuredOutput* so) {
  if (v.is_object() || v.is_boolean()) {
    so->text = v.dump();
  } else if (v.is_string()) {
    auto parsed = parse_ordered_json(v.get<std::string>(), param);
    if (!parsed.ok()) {
      f.fail(param, param + " is not valid JSON: " + parsed.status().message());
      return false;
    }
    so->text = parsed->dump();
  } else {
    f.fail(param,
           std::string(field) + " must be a JSON Schema (an object), got " + json_type_name(v));
    return false;
  }
  return true;
}

bool read_choices(JsonFields& f, const OrderedJson& v, const std::string& param,
                  StructuredOutput* so) {
  if (!v.is_array() || v.empty()) {
    f.fail(param, param + " must be a non-empty array of strings");
    return false;
  }
  for (const auto& c : v) {
    if (!c.is_string()) {
      f.fail(param, param + " must hold strings only, got " + json_type_name(c));
      return false;
    }
    so->choices.push_back(c.get<std::string>());
  }
  return true;
}

void read_response_format(JsonFields& f, const OrderedJson& rf, StructuredOutput* so) {
  auto t = rf.find("type");
  std::string type = (t != rf.end() && t->is_string()) ? t->get<std::string>() : "";
  if (type == "text") return;
  so->param = "response_format";
  if (type == "json_object") {
    so->kind = Kind::kJsonObject;
    return;
  }
  if (type == "json_schema") {
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object()) {
      f.fail("response_format", "response_format.json_schema must be an object holding the schema");
      return;
    }
    auto schema = js->find("schema");
    if (schema == js->end() || schema->is_null()) {
      f.fail("response_format", "response_format.json_schema.schema is required");
      return;
    }
    so->kind = Kind::kJsonSchema;
    if (!read_schema(f, "response_format.json_schema.schema", *schema, "response_format", so))
      return;
    auto strict = js->find("strict");
    so->strict = strict != js->end() && strict->is_boolean() && strict->get<bool>();
    return;
  }
  if (type == "structural_tag") {
    f.fail("response_format",
           "response_format type 'structural_tag' is not supported; use "
           "json_schema, json_object or text");
    return;
  }
  f.fail("response_format",
         "response_format type must be 'text', 'json_object' or "
         "'json_schema', got '" +
             type + "'");
}

void read_structured_outputs(JsonFields& f, const OrderedJson& so_json, StructuredOutput* so) {
  const std::string p = "structured_outputs";
  int count = 0;
  for (auto it = so_json.begin(); it != so_json.end(); ++it) {
    const std::string& k = it.key();
    const OrderedJson& v = it.value();
    if (v.is_null()) continue;
    if (k == "json") {
      ++count;
      so->kind = Kind::kJsonSchema;
      if (!read_schema(f, "structured_outputs.json", v, p, so)) return;
    } else if (k == "regex" || k == "grammar") {
      ++count;
      if (!v.is_string()) return f.fail(p, "structured_outputs." + k + " must be a string");
      so->kind = k == "regex" ? Kind::kRegex : Kind::kGrammar;
      so->text = v.get<std::string>();
    } else if (k == "choice") {
      ++count;
      so->kind = Kind::kChoice;
      if (!read_choices(f, v, p, so)) return;
    } else if (k == "json_object") {
      if (!v.is_boolean()) return f.fail(p, "structured_outputs.json_object must be a boolean");
      if (v.get<bool>()) {
        ++count;
        so->kind = Kind::kJsonObject;
      }
    } else if (k == "disable_any_whitespace" || k == "disable_additional_properties" ||
               k == "disable_fallback") {
      if (!v.is_boolean()) return f.fail(p, "structured_outputs." + k + " must be a boolean");
      if (k == "disable_any_whitespace") so->disable_any_whitespace = v.get<bool>();
      if (k == "disable_additional_properties") so->disable_additional_properties = v.get<bool>();
    } else if (k == "whitespace_pattern") {
      return f.fail(p,
                    "structured_outputs.whitespace_pattern is not supported; use "
                    "disable_any_whitespace to forbid whitespace between JSON tokens");
    } else if (k == "structural_tag") {
      return f.fail(p, "structured_outputs.structural_tag is not supported");
    } else if (k == "backend" || k == "_backend" || k == "_backend_was_auto") {
      // The engine has one grammar backend; a backend name changes nothing.
    } else {
      return f.fail(p, "unknown structured_outputs field '" + k + "'");
    }
  }
  if (count != 1) {
    f.fail(p,
           "structured_outputs must set exactly one of json, regex, choice, grammar or "
           "json_object (got " +
               std::to_string(count) + ")");
  }
  so->param = p;
}

}  // namespace

void read_structured_output(JsonFields& f, GenerationRequest* r) {
  StructuredOutput& so = r->structured;
  std::vector<std::string> sources;
  if (const OrderedJson* rf = f.object("response_format")) {
    StructuredOutput one;
    read_response_format(f, *rf, &one);
    if (one.kind != Kind::kNone) {
      so = std::move(one);
      sources.push_back("response_format");
    }
  }
  if (const OrderedJson* s = f.object("structured_outputs")) {
    StructuredOutput one;
    read_structured_outputs(f, *s, &one);
    so = std::move(one);
    sources.push_back("structured_outputs");
  }
  static constexpr const char* kGuided[] = {"guided_json", "guided_regex", "guided_choice",
                                            "guided_grammar"};
  for (const char* g : kGuided) {
    const OrderedJson* v = f.raw(g);
    if (v == nullptr) continue;
    StructuredOutput one;
    one.param = g;
    const std::string name = g;
    if (name == "guided_json") {
      one.kind = Kind::kJsonSchema;
      if (!read_schema(f, g, *v, g, &one)) return;
    } else if (name == "guided_choice") {
      one.kind = Kind::kChoice;
      if (!read_choices(f, *v, g, &one)) return;
    } else {
      if (!v->is_string()) return f.fail(g, name + " must be a string");
      one.kind = name == "guided_regex" ? Kind::kRegex : Kind::kGrammar;
      one.text = v->get<std::string>();
    }
    so = std::move(one);
    sources.push_back(g);
  }
  if (f.has("guided_whitespace_pattern")) {
    return f.fail("guided_whitespace_pattern", "guided_whitespace_pattern is not supported");
  }
  if (sources.size() > 1) {
    f.fail(sources[1], "only one output constraint may be given; this request sets " + sources[0] +
                           " and " + sources[1]);
  }
}

ConstraintCompiler::ConstraintCompiler(std::shared_ptr<const grammar::TokenVocabulary> vocabulary,
                                       size_t capacity)
    : vocabulary_(std::move(vocabulary)), capacity_(std::max<size_t>(1, capacity)) {}

Result<std::string> ConstraintCompiler::to_ebnf(const StructuredOutput& so) {
  grammar::JsonSchemaOptions o;
  o.any_whitespace = !so.disable_any_whitespace;
  o.disable_additional_properties = so.disable_additional_properties;
  o.strict = so.strict;
  switch (so.kind) {
    case Kind::kNone:
      return std::string();
    case Kind::kJsonObject:
      return grammar::json_object_ebnf(o);
    case Kind::kJsonSchema: {
      auto schema = parse_ordered_json(so.text, "schema");
      if (!schema.ok()) return schema.status();
      return grammar::json_schema_to_ebnf(*schema, o);
    }
    case Kind::kRegex:
      return grammar::regex_to_ebnf(so.text);
    case Kind::kChoice:
      return grammar::choice_to_ebnf(so.choices);
    case Kind::kGrammar:
      return so.text;
  }
  return std::string();
}

ApiResult<std::shared_ptr<const grammar::CompiledGrammar>> ConstraintCompiler::compile(
    const StructuredOutput& so) {
  if (so.kind == Kind::kNone) return std::shared_ptr<const grammar::CompiledGrammar>();
  std::string key = std::to_string(static_cast<int>(so.kind)) + (so.strict ? "s" : "-") +
                    (so.disable_any_whitespace ? "w" : "-") +
                    (so.disable_additional_properties ? "a" : "-") + '\n' + so.text;
  for (const auto& c : so.choices) key += '\n' + std::to_string(c.size()) + ':' + c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  auto ebnf = to_ebnf(so);
  if (!ebnf.ok()) return ApiError{400, ebnf.status().message(), so.param};
  auto g = grammar::Grammar::parse_ebnf(*ebnf);
  if (!g.ok()) {
    // A grammar the client wrote: its own error. One we generated: say what it came from.
    std::string what = so.kind == Kind::kGrammar
                           ? g.status().message()
                           : "the constraint could not be compiled: " + g.status().message();
    return ApiError{400, what, so.param};
  }
  auto compiled = grammar::CompiledGrammar::compile(std::move(*g), vocabulary_);
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.find(key) == index_.end()) {
    lru_.emplace_front(key, compiled);
    index_[key] = lru_.begin();
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return compiled;
}

}  // namespace strata::server

// OpenAI request bodies (server/openai_request.h): the input is a request body, parsed as each of
// /v1/completions, /v1/chat/completions, /tokenize and /detokenize would, with the repository's
// tiny tokenizer (models/strata-tiny) and a chat template that uses tools, tool calls, documents
// and template kwargs. Promises checked: no crash, no exception; a refusal is a 4xx ApiError with
// a message; an accepted request has a prompt and n >= 1, and its token ids decode.
#include <memory>
#include <string>

#include "fuzz_targets.h"
#include "server/openai_request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::fuzz {
namespace {

// Written for this target: walks every field a chat request can hand the template.
constexpr const char* kChatTemplate = R"TMPL(
{%- if tools %}<|system|>Tools:
{%- for t in tools %}
{{ t | tojson }}
{%- endfor %}<|eos|>
{%- endif %}
{%- if documents %}{% for d in documents %}<|doc|>{{ d.title | default('') }}: {{ d.text | default(d) }}<|eos|>{% endfor %}{% endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' and m.tool_calls %}<|assistant|>
{%- for c in m.tool_calls %}{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}<|eos|>
{%- elif m.content is string %}<|{{ m.role }}|>{{ m.content | trim }}<|eos|>
{%- elif m.content is iterable %}<|{{ m.role }}|>{% for part in m.content %}{% if part.type == 'text' %}{{ part.text }}{% else %}[{{ part.type }}]{% endif %}{% endfor %}<|eos|>
{%- else %}{{ raise_exception('message ' ~ loop.index ~ ' has no content') }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|assistant|>{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}{% endif %})TMPL";

struct Context {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;
  server::ParseContext parse;
};

const Context& context() {
  static const Context* ctx = [] {
    auto* c = new Context();
    auto tok = Tokenizer::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny");
    STRATA_CHECK(tok.ok()) << tok.status().message();
    c->tokenizer = *tok;
    ChatTemplateSpecialTokens specials;
    specials.tokens = {{"bos_token", "<|bos|>"}, {"eos_token", "<|eos|>"}};
    auto tmpl = ChatTemplate::parse(kChatTemplate, specials);
    STRATA_CHECK(tmpl.ok()) << tmpl.status().message();
    c->chat_template = std::make_unique<ChatTemplate>(std::move(tmpl).value());
    c->parse.tokenizer = c->tokenizer.get();
    c->parse.chat_template = c->chat_template.get();
    c->parse.max_n = 8;
    return c;
  }();
  return *ctx;
}

void check_error(const server::ApiError& e, const char* endpoint) {
  STRATA_FUZZ_CHECK(e.status >= 400 && e.status < 500) << endpoint << ": status " << e.status;
  STRATA_FUZZ_CHECK(!e.message.empty()) << endpoint << ": an error without a message";
}

void check_generation(const server::ApiResult<server::GenerationRequest>& r, const char* endpoint,
                      const Tokenizer& tok) {
  if (!r.ok()) return check_error(r.error(), endpoint);
  const server::GenerationRequest& g = r.value();
  STRATA_FUZZ_CHECK(!g.prompts.empty()) << endpoint << ": accepted with no prompt";
  STRATA_FUZZ_CHECK(g.params.n >= 1) << endpoint << ": n " << g.params.n;
  // Ids of id prompts are checked against the vocabulary by the engine, not here; decoding any
  // id must still work (unknown ones are skipped).
  for (const auto& p : g.prompts) (void)tok.decode(p.token_ids, false);
}

}  // namespace

int openai_request(const uint8_t* data, size_t size) {
  const Context& ctx = context();
  std::string body(reinterpret_cast<const char*>(data), size);
  check_generation(server::parse_completion_request(body, ctx.parse), "completions",
                   *ctx.tokenizer);
  check_generation(server::parse_chat_request(body, ctx.parse), "chat", *ctx.tokenizer);
  auto t = server::parse_tokenize_request(body, ctx.parse);
  if (!t.ok()) check_error(t.error(), "tokenize");
  auto d = server::parse_detokenize_request(body);
  if (!d.ok()) {
    check_error(d.error(), "detokenize");
  } else {
    (void)ctx.tokenizer->decode(d.value().token_ids, true);
  }
  return 0;
}

}  // namespace strata::fuzz

// Pieces shared by the completion and chat request parsers (server-internal).
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "server/json_fields.h"
#include "server/openai_request.h"

namespace strata::server::detail {

// Parses `body` as a JSON object (400 with the byte offset when malformed).
ApiResult<nlohmann::ordered_json> parse_body(const std::string& body);
// Sampling fields common to both endpoints (temperature ... logit_bias, n, stream options,
// priority, user, cache_salt, vLLM extras), applied over ctx.defaults into *r.
void read_common_fields(JsonFields& f, const ParseContext& ctx, GenerationRequest* r);
// Checks that n x `num_prompts` stays within ctx.max_n: before any prompt is tokenized.
void check_fan_out(JsonFields& f, const ParseContext& ctx, int n, size_t num_prompts);

}  // namespace strata::server::detail

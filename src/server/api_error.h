// OpenAI-style errors: {"error": {"message", "type", "param", "code"}} with the HTTP status, the
// type named after it as vLLM does ("BadRequestError", "NotFoundError", ...) and `code` equal to
// the status.
#pragma once

#include <string>

#include "core/status.h"
#include "net/http_message.h"

namespace strata::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;         // the request field at fault; empty: null
  double retry_after_s = 0;  // > 0: a Retry-After header (429/503)
};

// "BadRequestError" for 400, "AuthenticationError" for 401, ...
const char* error_type(int status);
// The JSON object {"error": {...}}.
std::string error_json(const ApiError& error);
// The complete response, with Retry-After when asked.
net::HttpResponse error_response(const ApiError& error);

// Maps an engine/tokenizer Status to an error a client can act on: bad input is 400 (naming the
// field when the message starts with one), shutting down is 503, anything else 500.
ApiError api_error_from_status(const Status& status, const std::string& param = "");

}  // namespace strata::server

#include "server/api_error.h"

#include <cmath>

#include "core/json.h"

namespace strata::server {

const char* error_type(int status) {
  switch (status) {
    case 400:
      return "BadRequestError";
    case 401:
      return "AuthenticationError";
    case 403:
      return "PermissionDeniedError";
    case 404:
      return "NotFoundError";
    case 405:
      return "MethodNotAllowedError";
    case 408:
      return "RequestTimeoutError";
    case 413:
      return "RequestTooLargeError";
    case 422:
      return "UnprocessableEntityError";
    case 429:
      return "RateLimitError";
    case 501:
      return "NotImplementedError";
    case 503:
      return "ServiceUnavailableError";
    case 504:
      return "GatewayTimeoutError";
    case 505:
      return "HTTPVersionNotSupportedError";
    default:
      return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

std::string error_json(const ApiError& e) {
  OrderedJson err;
  err["message"] = e.message;
  err["type"] = error_type(e.status);
  err["param"] = e.param.empty() ? OrderedJson(nullptr) : OrderedJson(e.param);
  err["code"] = e.status;
  OrderedJson j;
  j["error"] = std::move(err);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

net::HttpResponse error_response(const ApiError& e) {
  net::HttpResponse r = net::HttpResponse::json(e.status, error_json(e));
  if (e.retry_after_s > 0)
    r.headers.set("Retry-After",
                  std::to_string(static_cast<long long>(std::ceil(e.retry_after_s))));
  return r;
}

ApiError api_error_from_status(const Status& s, const std::string& param) {
  ApiError e;
  e.message = s.message();
  e.param = param;
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kUnimplemented:
    // A prompt that can never fit in the KV cache: retrying does not help.
    case StatusCode::kResourceExhausted:
      e.status = 400;
      break;
    case StatusCode::kNotFound:
      e.status = 404;
      break;
    case StatusCode::kUnavailable:
      e.status = 503;
      e.retry_after_s = 1;
      break;
    default:
      e.status = 500;
      break;
  }
  return e;
}

}  // namespace strata::server

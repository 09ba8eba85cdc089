// Blocking HTTP helpers for setup work (listing models, tokenizing prompts): they run a private
// event loop on the calling thread until every request has finished.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "net/http_client.h"

namespace strata::net {

// One request. A transport failure is an error Status; any HTTP status is a response.
Result<ClientResponse> http_fetch(ClientRequest request, HttpClientOptions options = {});

// Many requests, at most `max_parallel` at a time; results in the order of `requests`.
std::vector<Result<ClientResponse>> http_fetch_all(std::vector<ClientRequest> requests,
                                                   size_t max_parallel = 32,
                                                   HttpClientOptions options = {});

// A POST with a JSON body ("Content-Type: application/json").
ClientRequest json_post(const Url& url, std::string body, double timeout_s = 60);

}  // namespace strata::net

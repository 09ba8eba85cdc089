#include "net/blocking_http.h"

#include <optional>

namespace strata::net {

Result<ClientResponse> http_fetch(ClientRequest request, HttpClientOptions options) {
  std::vector<ClientRequest> one;
  one.push_back(std::move(request));
  auto results = http_fetch_all(std::move(one), 1, std::move(options));
  return std::move(results[0]);
}

std::vector<Result<ClientResponse>> http_fetch_all(std::vector<ClientRequest> requests,
                                                   size_t max_parallel, HttpClientOptions options) {
  std::vector<std::optional<Result<ClientResponse>>> slots(requests.size());
  auto loop_or = EventLoop::create();
  if (!loop_or.ok()) {
    std::vector<Result<ClientResponse>> out;
    for (size_t i = 0; i < requests.size(); ++i) out.push_back(loop_or.status());
    return out;
  }
  auto loop = std::move(loop_or).value();
  {
    HttpClient client(loop.get(), std::move(options));
    size_t next = 0, done = 0;
    if (max_parallel == 0) max_parallel = 1;
    std::function<void()> launch = [&] {
      while (next < requests.size() && client.num_in_flight() < max_parallel) {
        size_t i = next++;
        ClientCallbacks cb;
        cb.on_done = [&, i](Status st, ClientResponse r) {
          if (st.ok())
            slots[i].emplace(std::move(r));
          else
            slots[i].emplace(std::move(st));
          ++done;
          if (done == requests.size()) {
            loop->stop();
          } else {
            loop->post(launch);
          }
        };
        client.start(std::move(requests[i]), std::move(cb));
      }
    };
    if (!requests.empty()) {
      launch();
      loop->run();
    }
  }
  std::vector<Result<ClientResponse>> out;
  out.reserve(slots.size());
  for (auto& s : slots)
    out.push_back(s ? std::move(*s)
                    : Result<ClientResponse>(internal_error("request did not finish")));
  return out;
}

ClientRequest json_post(const Url& url, std::string body, double timeout_s) {
  ClientRequest r;
  r.method = "POST";
  r.url = url;
  r.headers.add("Content-Type", "application/json");
  r.body = std::move(body);
  r.timeout_s = timeout_s;
  return r;
}

}  // namespace strata::net

#pragma once
// The remote backend: the sandbox port over a service (remote_sandbox.hpp). It describes the
// service, keeps that description a while, refuses before sending what the service already says
// it cannot meet, and hands each execution to a remote_execution.
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/ssl/context.hpp>

#include "backends/remote/remote_requests.hpp"
#include "http/http_link.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "psych/host/sandbox.hpp"

namespace psych::host {

class remote_backend final : public sandbox {
 public:
  remote_backend(remote_sandbox_options options, service_endpoint where, std::unique_ptr<asio::ssl::context> tls)
      : options_(std::move(options)), where_(std::move(where)), tls_(std::move(tls)) {}
  ~remote_backend() override;

  backend_offer offer() const override { return cached_description().offer(); }
  description describe() override;
  sandbox_result run(const run_request& request, std::stop_token stop) override;

  const remote_sandbox_options& options() const { return options_; }

  /// Opens a connection, resuming the last TLS session when there is one.
  awaitable<result<std::unique_ptr<http_link>>> connect();

  /// Keeps a connection's session for the next one (TLS 1.3 tickets arrive after the handshake,
  /// so this is called once a response has been read).
  void keep_session(const http_link& link);

  template <class Body>
  http::request<Body> request_to(http::verb verb, std::string target, std::string_view token) const {
    http::request<Body> request{verb, target, 11};
    add_common_fields(request, where_, token);
    return request;
  }

 private:
  static description not_ready(std::string why);
  description cached_description() const;
  result<description> fetch_description();
  awaitable<result<description>> fetch_description_with(std::string token);

  remote_sandbox_options options_;
  service_endpoint where_;
  std::unique_ptr<asio::ssl::context> tls_;
  mutable std::mutex mutex_;
  std::optional<description> cached_;
  std::chrono::steady_clock::time_point cached_at_;
  SSL_SESSION* session_ = nullptr;
};

}  // namespace psych::host

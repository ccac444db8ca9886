#pragma once
// The reference sandbox service (`psych serve`): runs executions sent over the remote protocol
// (docs/remote-protocol.md) on one local backend, relaying each program's calls back to the client
// that sent it. docs/serve.md says how to run it and what it promises, and what its GET /metrics
// tells an operator.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psych/host/sandbox.hpp"
#include "psych/host/service_stats.hpp"
#include "psych/result.hpp"

namespace psych {

struct sandbox_service_options {
  std::string listen_host = "127.0.0.1";
  std::uint16_t port = 8443;  ///< 0: any free port (port() says which)
  /// PEM certificate chain and key. Without them the service speaks plaintext HTTP, which it
  /// refuses on an address that is not loopback unless allow_insecure_http.
  std::optional<std::string> tls_cert_file, tls_key_file;
  bool allow_insecure_http = false;
  /// Addresses of the proxies in front of the service (a load balancer): a request that comes from
  /// one of them has the last address of its X-Forwarded-For logged as `forwarded_for` (the client
  /// the proxy saw). From any other peer the header is ignored, since a client could write anything.
  std::vector<std::string> trusted_proxies;
  /// One credential per line: "<name> <token>" or just "<token>" (named by its line); blank lines
  /// and lines starting with '#' are skipped. Re-read by reload_tokens() (SIGHUP for psych serve).
  std::string token_file;
  /// Executions running at once; beyond it they wait in a queue of max_queued, and beyond that a
  /// request is answered 503 with Retry-After before anything runs.
  std::size_t max_concurrent = 4;
  std::size_t max_queued = 16;
  /// Open connections; one more is closed as soon as it is accepted.
  std::size_t max_connections = 512;
  /// On shutdown, how long running executions may go on before they are cancelled.
  double drain_seconds = 30;
  /// How often the backend's description is probed again (GET /v1/describe serves the last one;
  /// ?fresh=1 probes now). 0: only at start and on ?fresh=1.
  double describe_refresh_seconds = 30;
  /// The TLS handshake, and each request's header and body, must arrive within this.
  double request_timeout_seconds = 10;
  /// A kept-alive connection with no request for this long is closed.
  double idle_timeout_seconds = 30;
  /// The largest execution request (program, terms, binding names) and results body accepted.
  std::uint64_t max_request_bytes = std::uint64_t{16} << 20;
  std::uint64_t max_results_bytes = std::uint64_t{64} << 20;
  /// One JSON object per request, no secret and no program text in it; default: standard error.
  std::function<void(std::string_view)> access_log;
};

class sandbox_service {
 public:
  /// Probes the backend (describe()), reads the tokens, binds and starts serving on a thread of
  /// its own. Errors: an unreadable token file or certificate, plaintext on a non-loopback address,
  /// an address that cannot be bound.
  static result<std::unique_ptr<sandbox_service>> start(std::unique_ptr<sandbox> backend,
                                                         sandbox_service_options options);
  ~sandbox_service();  ///< shutdown(), if it was not called

  std::uint16_t port() const;
  /// Reads the token file again; on an error the old tokens stay.
  result<void> reload_tokens();
  /// Stops accepting, lets running executions finish for up to drain_seconds, then cancels the
  /// rest (each client's `done` says cancelled), answers queued ones `shutting_down`, closes every
  /// connection. Returns once every execution has ended.
  void shutdown();
  /// The counts GET /metrics renders.
  sandbox_service_stats stats() const;

  struct impl;

 private:
  explicit sandbox_service(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

}  // namespace psych

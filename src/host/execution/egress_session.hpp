#pragma once
// One execution's side of network=allowlist (docs/network.md): before the launch, the socket the
// launcher hands the proxy's listeners back over (its fd 5) and the proxy's variables in the
// program's environment; after `started`, psych's egress proxy serving those listeners with the
// terms' hosts; at the end, its meters for the result. Nothing at all for another network.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "psych/egress_report.hpp"
#include "psych/result.hpp"
#include "psych/terms.hpp"

namespace psych::host {

struct launcher_fds;
class egress_proxy;

/// The port the proxy listens on inside each sandbox: its own network namespace, so any port is
/// free there; 3128 is where HTTP proxies are looked for.
inline constexpr std::uint16_t sandbox_proxy_port = 3128;

/// HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and their lowercase spellings name the proxy; NO_PROXY is
/// empty, so nothing is meant to bypass it (a program that sets its own reaches only its own
/// namespace's loopback).
inline std::map<std::string, std::string> proxy_environment(std::uint16_t port = sandbox_proxy_port) {
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  return {{"HTTP_PROXY", url}, {"HTTPS_PROXY", url}, {"ALL_PROXY", url}, {"http_proxy", url},
          {"https_proxy", url}, {"all_proxy", url},  {"NO_PROXY", ""},     {"no_proxy", ""}};
}

class egress_session {
 public:
  egress_session();
  ~egress_session();
  egress_session(const egress_session&) = delete;
  egress_session& operator=(const egress_session&) = delete;

  /// For network=allowlist: the handover socket, its launcher's end into `fds` (to be closed by
  /// the caller once the launcher started). A no-op for any other network.
  result<void> prepare(const execution_terms& terms, launcher_fds& fds);
  /// The launcher's end, for the caller to close once the launcher holds its own.
  void release_launcher_end();
  /// After `started`: the listeners the launcher sent, served by the proxy. The launcher sends them
  /// before `started`, so they are there already.
  result<void> serve(const execution_terms& terms);
  /// The program is about to be sent: what the proxy did until now was the child's probe, which is
  /// not the program's, and is left out of the report.
  void program_starts();
  /// Stops the proxy (every connection ends) and says what it did; nullopt when there was none.
  std::optional<egress_report> finish();

 private:
  struct handover;
  std::unique_ptr<handover> handover_;
  // Shared for its type-erased deleter: where no proxy is built (Windows), none is destroyed either.
  std::shared_ptr<egress_proxy> proxy_;
  std::optional<egress_report> before_program_;
};

}  // namespace psych::host

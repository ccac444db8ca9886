#pragma once
// The remote backend: programs run on a sandbox service (`psych serve`, or anything speaking
// docs/remote-protocol.md), while the program's calls come back here and go through this host's
// own gateway, budget and run log, so the tools never move to the service. Failures of the service
// are provider_error, never retried: only describe() retries.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "psych/host/sandbox.hpp"
#include "psych/host/secret_resolver.hpp"
#include "psych/result.hpp"

namespace psych {

struct remote_sandbox_options {
  /// "https://host:port". http:// is refused with a credential unless the host is loopback or
  /// allow_insecure_http says the network in between is trusted.
  std::string url;
  /// The bearer token, resolved fresh for each execution and each describe().
  secret_resolver token;
  /// PEM file of the CA (or the self-signed certificate) the service's certificate must chain
  /// to; default: the system's trust store. The host name is always verified.
  std::optional<std::string> ca_file;
  bool allow_insecure_http = false;
  /// The connect budget: how long describe() may take as a whole, every attempt and the backoff
  /// between them included, and how long any one connection may take to connect and finish its TLS
  /// handshake. A service that accepts the connection and never answers is given up within it.
  double connect_timeout_seconds = 10;
  /// How long a description read from the service is used (offer(), and run()'s check before
  /// sending a program) before it is read again.
  double describe_ttl_seconds = 10;
  /// describe() attempts (the only request that is ever retried), with a backoff of 0.2 s
  /// doubling; an attempt is made only while the connect budget lasts.
  int describe_attempts = 3;
  // The grace: run() returns at most the terms' wall_seconds plus wall_clock_slack_seconds plus
  // cancel_grace_seconds (2 s by default) after the execution starts (its connection included),
  // whatever the service does: every connection, read, write and post of the execution ends by then. A describe() it needs
  // first (none cached) adds at most the connect budget (docs/remote-protocol.md, "Time bounds").

  /// Beyond the terms' wall clock, how long the client waits for the service's `done` before it
  /// posts a cancel: the service enforces the wall clock itself and needs its graces and the network.
  double wall_clock_slack_seconds = 1;
  /// After a cancel is posted, how long the service's `done` is waited for.
  double cancel_grace_seconds = 1;
};

/// A sandbox whose executions run on the service at options.url, or a sandbox_setup error for
/// a URL that is not one, a credential over plaintext to a host that is not loopback, or a CA file
/// that cannot be read. Nothing is sent until describe(), offer() or run().
result<std::unique_ptr<sandbox>> remote_sandbox(remote_sandbox_options options);

}  // namespace psych

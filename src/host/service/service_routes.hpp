#pragma once
// The sandbox service's routes (docs/remote-protocol.md): which exist, who may call them (a bearer
// token of the token file; GET /metrics needs none), what each takes, and a connection's requests
// read, answered and logged one after another.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "psych/host/sandbox_service.hpp"

namespace psych::host {

/// What a request's target names: one of the service's routes, and the execution it is about.
struct route {
  enum class kind { describe, describe_fresh, metrics, execute, results, cancel } what = kind::describe;
  std::string execution_id;
};

/// The route a target names, or nullopt for one that is not the protocol's.
std::optional<route> route_of(std::string_view target);

/// The `error` code a refusal's answer carries: an oversized request is a bad request on the wire.
std::string_view wire_code(service_refusal why);

/// A refusal's body: {"error":<code>,"message":<message>}.
std::string json_error(std::string_view code, std::string_view message);

/// A connection's requests, until one of them or the connection ends it. Stream: beast::tcp_stream
/// or tls_stream.
template <class Stream>
boost::asio::awaitable<void> serve_requests(sandbox_service::impl& service, Stream& stream, const std::string& peer,
                                            bool via_proxy);

/// Answers a request with `body` whole; false: close the connection.
template <class Stream>
boost::asio::awaitable<bool> respond(Stream& stream, double timeout_seconds, unsigned status, std::string body,
                                     bool keep_alive, std::optional<std::string> retry_after = std::nullopt,
                                     std::string_view content_type = "application/json");

}  // namespace psych::host

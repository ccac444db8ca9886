#pragma once
// What every request of the remote client carries (the credential, resolved fresh; the common
// header fields) and its short exchanges: describe, results, cancel. docs/remote-protocol.md.
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/string_body.hpp>
#include <fmt/format.h>

#include "http/http_link.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "psych/result.hpp"

namespace psych::host {

result<std::string> resolve_token(const secret_resolver& resolver);

template <class Body>
void add_common_fields(http::request<Body>& request, const service_endpoint& where, std::string_view token) {
  request.set(http::field::host, where.authority);
  request.set(http::field::user_agent, "psych-remote/1");
  request.set(http::field::authorization, fmt::format("Bearer {}", token));
}

/// A short exchange (describe, results, cancel): the request, then a whole response of at most
/// `body_limit` bytes. Errors name the status, never the request's headers.
struct short_response {
  unsigned status = 0;
  std::string content_type;
  std::string body;
};

awaitable<result<short_response>> exchange(http_link& link, http::request<http::string_body>& request,
                                           std::size_t body_limit, std::chrono::steady_clock::duration timeout);

std::string status_problem(unsigned status, std::string_view what);

/// Runs one coroutine to completion on a fresh event loop of this thread.
template <class T>
T run_here(asio::io_context& io, awaitable<T> work) {
  std::optional<T> out;
  asio::co_spawn(
      io, [&]() -> awaitable<void> { out.emplace(co_await std::move(work)); },
      [](std::exception_ptr thrown) {
        if (thrown) std::rethrow_exception(thrown);
      });
  io.run();
  return std::move(*out);
}

}  // namespace psych::host

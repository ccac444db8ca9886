// The remote client's credential and short exchanges (remote_requests.hpp).
#include "backends/remote/remote_requests.hpp"

#include <algorithm>
#include <chrono>

#include <boost/beast/http/write.hpp>

#include "os/run_command.hpp"

extern char** environ;

namespace psych {
namespace host {
namespace {

/// A bearer token must be one header value: printable, no spaces, no line breaks.
bool usable_token(std::string_view token) {
  return !token.empty() && token.size() <= 4096 &&
         std::ranges::all_of(token, [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace

result<std::string> resolve_token(const secret_resolver& resolver) {
  if (!resolver) return fail_with(error_kind::sandbox_setup, "no token resolver is configured");
  auto token = resolver();
  if (!token) return fail_with(error_kind::provider_error, "the token resolver failed: " + token.error().message());
  if (!usable_token(token.value()))
    return fail_with(error_kind::provider_error,
                   "the token resolver returned something that cannot be a bearer token (empty, too long, or "
                   "with spaces or control characters)");
  return token;
}

awaitable<result<short_response>> exchange(http_link& link, http::request<http::string_body>& request,
                                           std::size_t body_limit, std::chrono::steady_clock::duration timeout) {
  request.prepare_payload();
  link.tcp().expires_after(timeout);
  auto [write_ec, written] = co_await link.with(
      [&](auto& stream) { return http::async_write(stream, request, use_tuple); });
  if (write_ec) co_return fail_with(error_kind::provider_error, "sending the request: " + write_ec.message());
  http::response_parser<http::string_body> parser;
  parser.header_limit(max_header_bytes);
  parser.body_limit(body_limit);
  auto [read_ec, read] = co_await link.with(
      [&](auto& stream) { return http::async_read(stream, link.buffer(), parser, use_tuple); });
  if (read_ec) co_return fail_with(error_kind::provider_error, "reading the response: " + read_ec.message());
  if (too_many_fields(parser.get()))
    co_return fail_with(error_kind::provider_error, "the response has more header fields than allowed");
  short_response out;
  out.status = parser.get().result_int();
  out.content_type = std::string(parser.get()[http::field::content_type]);
  out.body = std::move(parser.get().body());
  co_return out;
}

std::string status_problem(unsigned status, std::string_view what) {
  if (status == 401 || status == 403) return fmt::format("{}: the service refused the credential ({})", what, status);
  if (status == 503) return fmt::format("{}: the service is busy or shutting down (503)", what);
  return fmt::format("{}: the service answered HTTP {}", what, status);
}

}  // namespace host

secret_resolver command_secret(std::string command) {
  return [command = std::move(command)]() -> result<std::string> {
    std::vector<std::string> environment;
    for (char** e = environ; e && *e; ++e) environment.emplace_back(*e);
    auto ran = host::run_command({"/bin/sh", "-c", command}, environment, std::chrono::seconds(30));
    if (!ran) return ran.error();
    if (ran.value().exit_code != 0)
      return fail_with(error_kind::provider_error,
                     fmt::format("the token command exited with status {}", ran.value().exit_code));
    return host::without_trailing_space(std::move(ran.value().stdout_text));
  };
}

}  // namespace psych

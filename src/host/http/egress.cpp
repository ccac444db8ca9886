// The egress seam (egress.hpp): one origin, one deadline, a bounded body.
#include "http/egress.hpp"

#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <mutex>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

namespace psych::host {
namespace {

egress_error failure(egress_error_kind kind, std::string detail, bool sent) { return {kind, std::move(detail), sent}; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::ranges::equal(a, b, [](char x, char y) { return lower(x) == lower(y); });
}

bool same_origin(const service_endpoint& a, const service_endpoint& b) {
  return a.tls == b.tls && equal_ignoring_case(a.host, b.host) && a.port == b.port;
}

/// A request target may carry only visible ASCII: anything else must be percent-encoded by whoever
/// made it, so nothing here can be smuggled into the request line.
bool printable_target(std::string_view target) {
  return !target.empty() && target.front() == '/' &&
         std::ranges::all_of(target, [](char c) { return c > 0x20 && c < 0x7f && c != '#'; });
}

/// A header field the caller sets: a token for its name, no line break or NUL in its value.
bool usable_field(std::string_view name, std::string_view value) {
  const auto token_char = [](char c) { return c > 0x20 && c < 0x7f && std::string_view("()<>@,;:\\\"/[]?={}").find(c) == std::string_view::npos; };
  return !name.empty() && std::ranges::all_of(name, token_char) &&
         std::ranges::none_of(value, [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

bool is_redirect(unsigned status) { return status == 301 || status == 302 || status == 303 || status == 307 || status == 308; }

/// What one exchange's coroutine shares with the thread that waits for it.
struct exchange_progress {
  bool sent = false;
};

/// The URL as a message may quote it: without user information, which may be a password.
std::string quotable_url(std::string_view url) {
  const auto scheme_end = url.find("://");
  const auto authority_start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const auto authority_end = url.find_first_of("/?#", authority_start);
  const auto at = url.substr(0, authority_end).rfind('@');
  if (at == std::string_view::npos || at < authority_start) return peer_excerpt(url, 100);
  return peer_excerpt(std::string(url.substr(0, authority_start)) + "[user information]" + std::string(url.substr(at)), 100);
}

}  // namespace

result<http_url> parse_http_url(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return fail_with(error_kind::sandbox_setup, fmt::format("the URL {}: {}", quotable_url(url), why));
  };
  std::string_view rest = url;
  std::string scheme;
  if (const auto colon = rest.find("://"); colon != std::string_view::npos) {
    for (const char c : rest.substr(0, colon)) scheme.push_back(lower(c));
    rest.remove_prefix(colon + 3);
  }
  if (scheme != "https" && scheme != "http") return bad("must start with https:// (or http://)");
  if (std::ranges::any_of(url, [](char c) { return c <= 0x20 || c >= 0x7f; }))
    return bad("has a space, a control byte or a byte that is not ASCII (percent-encode it)");
  if (url.find('#') != std::string_view::npos) return bad("has a fragment ('#'), which is never sent");
  const auto path_start = rest.find_first_of("/?");
  const std::string_view authority = rest.substr(0, path_start);
  if (authority.find('@') != std::string_view::npos)
    return bad("has user information ('user@'): a credential comes from a secret resolver, never a URL");
  auto origin = parse_service_url(scheme + "://" + std::string(authority));
  if (!origin) return bad("has no usable host and port");
  http_url out{std::move(origin).value(), "/"};
  if (path_start != std::string_view::npos) {
    const std::string_view target = rest.substr(path_start);
    out.target = target.front() == '?' ? "/" + std::string(target) : std::string(target);
  }
  return out;
}

std::string origin_text(const service_endpoint& origin) {
  return fmt::format("{}://{}", origin.tls ? "https" : "http", origin.authority);
}

std::string redact(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  constexpr std::string_view mark = "[credential]";
  for (auto at = text.find(secret); at != std::string::npos; at = text.find(secret, at + mark.size()))
    text.replace(at, secret.size(), mark);
  return text;
}

std::string_view egress_response_head::header(std::string_view name) const {
  for (const auto& [field, value] : headers)
    if (equal_ignoring_case(field, name)) return value;
  return {};
}

struct egress_client::state {
  service_endpoint origin;
  std::string base_target;
  std::unique_ptr<asio::ssl::context> tls;
  std::mutex session_mutex;
  SSL_SESSION* session = nullptr;  ///< the last TLS session, resumed by the next connection

  ~state() {
    if (session) SSL_SESSION_free(session);
  }

  SSL_SESSION* take_session_reference() {
    std::lock_guard lock(session_mutex);
    if (session) SSL_SESSION_up_ref(session);
    return session;
  }
  void keep_session(SSL_SESSION* fresh) {
    if (!fresh) return;
    std::lock_guard lock(session_mutex);
    if (session) SSL_SESSION_free(session);
    session = fresh;
  }

  awaitable<egress_result<egress_response_head>> run(const egress_request& request, const egress_limits& limits,
                                                     exchange_progress& progress, const egress_body_sink& sink);
  awaitable<egress_result<egress_response_head>> once(const std::string& target, const egress_request& request,
                                                      const egress_limits& limits, exchange_progress& progress,
                                                      const egress_body_sink& sink, bool& redirected_to,
                                                      std::string& next_target);
};

egress_client::egress_client(std::unique_ptr<state> s) : state_(std::move(s)) {}
egress_client::~egress_client() = default;

result<std::unique_ptr<egress_client>> egress_client::create(std::string_view base_url, egress_options options) {
  auto url = parse_http_url(base_url);
  if (!url) return url.error();
  if (!url.value().origin.tls && !options.allow_insecure_http && !is_loopback_host(url.value().origin.host))
    return fail_with(error_kind::sandbox_setup,
                     fmt::format("{}: http:// is allowed only to a loopback host; use https://",
                                 origin_text(url.value().origin)));
  auto s = std::make_unique<state>();
  s->origin = std::move(url.value().origin);
  s->base_target = std::move(url.value().target);
  if (s->origin.tls) {
    s->tls = tls_context(asio::ssl::context::tls_client);
    boost::system::error_code ec;
    if (options.ca_file)
      s->tls->load_verify_file(*options.ca_file, ec);
    else
      s->tls->set_default_verify_paths(ec);
    if (ec)
      return fail_with(error_kind::sandbox_setup,
                       fmt::format("the CA file {} cannot be used: {}", options.ca_file.value_or("(system)"), ec.message()));
  }
  return std::unique_ptr<egress_client>(new egress_client(std::move(s)));
}

const service_endpoint& egress_client::origin() const noexcept { return state_->origin; }
const std::string& egress_client::base_target() const noexcept { return state_->base_target; }

egress_result<std::string> egress_client::target_of(std::string_view url_or_target) const {
  if (url_or_target.starts_with('/') && !url_or_target.starts_with("//")) {
    if (!printable_target(url_or_target))
      return failure(egress_error_kind::refused, "a request target with a space, a control byte or a '#'", false);
    return std::string(url_or_target);
  }
  std::string absolute(url_or_target);
  if (url_or_target.starts_with("//")) absolute = (state_->origin.tls ? "https:" : "http:") + absolute;
  auto url = parse_http_url(absolute);
  if (!url) return failure(egress_error_kind::refused, url.error().message(), false);
  if (!same_origin(url.value().origin, state_->origin))
    return failure(egress_error_kind::refused,
                   fmt::format("{} is not this source's origin, {}", origin_text(url.value().origin),
                               origin_text(state_->origin)),
                   false);
  return std::move(url.value().target);
}

awaitable<egress_result<egress_response_head>> egress_client::state::once(
    const std::string& target, const egress_request& request, const egress_limits& limits,
    exchange_progress& progress, const egress_body_sink& sink, bool& redirected, std::string& next_target) {
  redirected = false;
  const auto remaining = [&] {
    return std::max(limits.deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration::zero());
  };
  SSL_SESSION* resume = take_session_reference();
  auto opened = co_await http_link::open(origin, tls.get(), remaining(), resume);
  if (resume) SSL_SESSION_free(resume);
  if (!opened) co_return failure(egress_error_kind::unreachable, opened.error().message(), progress.sent);
  http_link& link = *opened.value();
  keep_session(link.session());

  http::request<http::string_body> message;
  message.method_string(request.method);
  message.target(target);
  message.version(11);
  message.set(http::field::host, origin.authority);
  message.set(http::field::user_agent, "psych");
  for (const auto& [name, value] : request.headers) message.set(name, value);
  message.body() = request.body;
  message.prepare_payload();
  const bool head_only = request.method == "HEAD";

  progress.sent = true;
  link.tcp().expires_after(remaining());
  auto [write_ec, written] =
      co_await link.with([&](auto& stream) { return http::async_write(stream, message, use_tuple); });
  if (write_ec) co_return failure(egress_error_kind::connection_lost, "sending the request: " + write_ec.message(), true);

  http::response_parser<http::buffer_body> parser;
  parser.header_limit(max_header_bytes);
  parser.body_limit(limits.max_body_bytes);
  if (head_only) parser.skip(true);
  const auto read_problem = [&](boost::system::error_code ec, std::string_view step) {
    if (ec == http::error::body_limit)
      return failure(egress_error_kind::too_large, fmt::format("the response body is over {} bytes", limits.max_body_bytes),
                     true);
    if (ec == http::error::header_limit)
      return failure(egress_error_kind::too_large, fmt::format("the response header is over {} bytes", max_header_bytes),
                     true);
    if (ec == beast::error::timeout)
      return failure(egress_error_kind::timeout, fmt::format("{}: the deadline passed", step), true);
    if (ec.category() == http::make_error_code(http::error::bad_version).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message)
      return failure(egress_error_kind::malformed, fmt::format("{}: not HTTP ({})", step, ec.message()), true);
    return failure(egress_error_kind::connection_lost, fmt::format("{}: {}", step, ec.message()), true);
  };

  link.tcp().expires_after(remaining());
  auto [header_ec, header_bytes] =
      co_await link.with([&](auto& stream) { return http::async_read_header(stream, link.buffer(), parser, use_tuple); });
  if (header_ec) co_return read_problem(header_ec, "reading the response");
  if (too_many_fields(parser.get()))
    co_return failure(egress_error_kind::too_large,
                      fmt::format("the response has more than {} header fields", max_header_fields), true);

  egress_response_head head;
  head.status = parser.get().result_int();
  for (const auto& field : parser.get())
    head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));

  if (is_redirect(head.status) && (request.method == "GET" || head_only)) {
    const std::string_view location = head.header("location");
    if (location.empty())
      co_return failure(egress_error_kind::malformed, fmt::format("a redirect (HTTP {}) without a Location", head.status),
                        true);
    std::string absolute(location);
    if (!location.starts_with('/') && location.find("://") == std::string_view::npos)
      co_return failure(egress_error_kind::malformed,
                        fmt::format("a redirect (HTTP {}) to a relative path, which psych does not resolve", head.status),
                        true);
    if (location.starts_with("//")) absolute = (origin.tls ? "https:" : "http:") + absolute;
    if (absolute.starts_with('/')) {
      if (!printable_target(absolute))
        co_return failure(egress_error_kind::malformed, fmt::format("a redirect (HTTP {}) to an unusable path", head.status),
                          true);
      next_target = std::move(absolute);
    } else {
      auto url = parse_http_url(absolute);
      if (!url)
        co_return failure(egress_error_kind::malformed, fmt::format("a redirect (HTTP {}) to an unusable URL", head.status),
                          true);
      if (!same_origin(url.value().origin, origin))
        co_return failure(egress_error_kind::refused,
                          fmt::format("a redirect (HTTP {}) to another origin, {}, is not followed", head.status,
                                      origin_text(url.value().origin)),
                          true);
      next_target = std::move(url.value().target);
    }
    redirected = true;
    link.close();
    co_return head;
  }

  std::array<char, 8 * 1024> chunk{};
  while (!parser.is_done()) {
    if (std::chrono::steady_clock::now() >= limits.deadline)
      co_return failure(egress_error_kind::timeout, "the deadline passed while the body was read", true);
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    link.tcp().expires_after(remaining());
    auto [ec, n] = co_await link.with(
        [&](auto& stream) { return http::async_read_some(stream, link.buffer(), parser, use_tuple); });
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return read_problem(ec, "reading the response body");
    const std::size_t got = chunk.size() - parser.get().body().size;
    if (got > 0 && sink && !sink(std::string_view(chunk.data(), got))) break;
  }
  link.close();
  co_return head;
}

awaitable<egress_result<egress_response_head>> egress_client::state::run(const egress_request& request,
                                                                         const egress_limits& limits,
                                                                         exchange_progress& progress,
                                                                         const egress_body_sink& sink) {
  std::string target = request.target;
  for (int redirects = 0;; ++redirects) {
    bool redirected = false;
    std::string next;
    auto answered = co_await once(target, request, limits, progress, sink, redirected, next);
    if (!answered || !redirected) co_return answered;
    if (redirects >= limits.max_redirects)
      co_return failure(egress_error_kind::malformed, fmt::format("more than {} redirects", limits.max_redirects), true);
    target = std::move(next);
  }
}

egress_result<egress_response_head> egress_client::exchange(const egress_request& request, const egress_limits& limits,
                                                            std::stop_token stop, const egress_body_sink& sink) {
  if (!printable_target(request.target))
    return failure(egress_error_kind::refused, "a request target with a space, a control byte or a '#'", false);
  for (const auto& [name, value] : request.headers)
    if (!usable_field(name, value))
      return failure(egress_error_kind::refused, "a header field with a bad name or a line break in its value", false);
  if (request.method.empty() || !usable_field(request.method, ""))
    return failure(egress_error_kind::refused, "a method that is not a token", false);
  if (stop.stop_requested()) return failure(egress_error_kind::cancelled, "cancelled before it was sent", false);

  // The deadline and the stop token end the event loop itself, whatever step the exchange is in:
  // no step can outlast them, and the coroutine's frame (its connection) goes with the loop.
  asio::io_context io;
  exchange_progress progress;
  std::optional<egress_result<egress_response_head>> answer;
  bool stopped = false;
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        answer.emplace(co_await state_->run(request, limits, progress, sink));
        io.stop();
      },
      [](std::exception_ptr thrown) {
        if (thrown) std::rethrow_exception(thrown);
      });
  asio::steady_timer deadline(io, limits.deadline);
  deadline.async_wait([&](boost::system::error_code ec) {
    if (!ec) io.stop();
  });
  {
    std::stop_callback on_stop(stop, [&] {
      asio::post(io, [&] {
        stopped = true;
        io.stop();
      });
    });
    io.run();
  }
  if (answer) {
    // A connection that failed as the deadline came failed because of it.
    if (!*answer && std::chrono::steady_clock::now() >= limits.deadline &&
        (answer->error().kind == egress_error_kind::unreachable ||
         answer->error().kind == egress_error_kind::connection_lost))
      return failure(egress_error_kind::timeout, "the deadline passed", answer->error().sent);
    return std::move(*answer);
  }
  if (stopped) return failure(egress_error_kind::cancelled, "cancelled", progress.sent);
  return failure(egress_error_kind::timeout, "the deadline passed", progress.sent);
}

egress_result<egress_response> egress_client::fetch(const egress_request& request, const egress_limits& limits,
                                                    std::stop_token stop) {
  std::string body;
  auto head = exchange(request, limits, std::move(stop), [&](std::string_view chunk) {
    body.append(chunk);
    return true;
  });
  if (!head) return head.error();
  return egress_response{std::move(head).value(), std::move(body)};
}

}  // namespace psych::host

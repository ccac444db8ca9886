#include "service/service_routes.hpp"

#include <chrono>
#include <utility>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

#include "http/http_server.hpp"
#include "psych/host/remote_protocol.hpp"
#include "service/access_log.hpp"
#include "service/prometheus_text.hpp"
#include "service/service_state.hpp"

namespace psych::host {

std::optional<route> route_of(std::string_view target) {
  // ?fresh=1: probe the backend now (remote describe() does), instead of the periodic probe's
  // answer (what a health check reads).
  if (target == "/v1/describe") return route{route::kind::describe, {}};
  if (target == "/v1/describe?fresh=1") return route{route::kind::describe_fresh, {}};
  if (target == "/metrics") return route{route::kind::metrics, {}};
  constexpr std::string_view prefix = "/v1/executions/";
  if (!target.starts_with(prefix)) return std::nullopt;
  std::string_view id = target.substr(prefix.size()), action;
  if (const auto slash = id.find('/'); slash != std::string_view::npos) {
    action = id.substr(slash + 1);
    id = id.substr(0, slash);
  }
  if (!remote::is_url_safe_id(id)) return std::nullopt;
  if (action.empty()) return route{route::kind::execute, std::string(id)};
  if (action == "results") return route{route::kind::results, std::string(id)};
  if (action == "cancel") return route{route::kind::cancel, std::string(id)};
  return std::nullopt;
}

std::string_view wire_code(service_refusal why) {
  return why == service_refusal::too_large ? name_of(service_refusal::bad_request) : name_of(why);
}

std::string json_error(std::string_view code, std::string_view message) {
  return fmt::format(R"({{"error":{},"message":{}}})", protocol::encode_json(std::string(code)),
                     protocol::encode_json(std::string(message)));
}

template <class Stream>
awaitable<bool> respond(Stream& stream, double timeout_seconds, unsigned status, std::string body, bool keep_alive,
                        std::optional<std::string> retry_after, std::string_view content_type) {
  http::response<http::string_body> response{static_cast<http::status>(status), 11};
  response.set(http::field::content_type, content_type);
  response.set(http::field::cache_control, "no-store");
  if (status == 401) response.set(http::field::www_authenticate, "Bearer");
  if (retry_after) response.set(http::field::retry_after, *retry_after);
  response.keep_alive(keep_alive);
  response.body() = std::move(body);
  const bool written = co_await write_whole(stream, response, timeout_seconds);
  co_return written && keep_alive;
}

namespace {

using clock = std::chrono::steady_clock;

/// One request whose header has arrived. False: close the connection.
template <class Stream>
awaitable<bool> handle(sandbox_service::impl& service, Stream& stream, beast::flat_buffer& buffer,
                       http::request_parser<http::empty_body>& header, access_record& record) {
  const auto& options = service.options;
  const auto& request = header.get();
  const bool keep_alive = request.keep_alive();  // `request` is moved from once a body is read
  const auto answer = [&](unsigned status, std::string body, bool keep = false) {
    record.status = status;
    return respond(stream, options.request_timeout_seconds, status, std::move(body), keep && keep_alive);
  };
  const auto refuse = [&](service_refusal why, unsigned status, std::string_view message, bool keep = false) {
    service.counters.count([why](auto& c) { ++c.refused[why]; });
    return answer(status, json_error(wire_code(why), message), keep);
  };
  using enum service_refusal;
  if (too_many_fields(request)) co_return co_await refuse(too_large, 431, "too many header fields");
  const auto to = route_of(request.target());
  if (!to) co_return co_await refuse(not_found, 404, "no such route");
  using kind = route::kind;
  const auto method = request.method();
  // Served without a credential: a scraper then holds no token, which could run programs, and
  // nothing in it is secret (docs/serve.md, "Metrics").
  if (to->what == kind::metrics) {
    if (method != http::verb::get) co_return co_await refuse(bad_request, 405, "use GET");
    if (request.has_content_length() || request.chunked())
      co_return co_await refuse(bad_request, 400, "metrics takes no body");
    auto text = service_metrics_text(service.counters.counted(), {.max_concurrent = options.max_concurrent,
                                                                  .max_queued = options.max_queued,
                                                                  .max_connections = options.max_connections});
    record.status = 200;
    co_return co_await respond(stream, options.request_timeout_seconds, 200, std::move(text), keep_alive,
                               std::nullopt, prometheus::content_type);
  }
  const auto client = service.credentials.authenticate(request[http::field::authorization]);
  if (!client) co_return co_await refuse(unauthorized, 401, "unauthorized");
  record.client = *client;
  if (to->what == kind::describe || to->what == kind::describe_fresh) {
    if (method != http::verb::get) co_return co_await refuse(bad_request, 405, "use GET");
    if (request.has_content_length() || request.chunked())
      co_return co_await refuse(bad_request, 400, "describe takes no body");
    if (service.admitted.shutting_down())
      co_return co_await refuse(shutting_down, 503, "the service is shutting down: it runs nothing new");
    if (to->what == kind::describe_fresh) co_await service.description.probe_now();  // concurrent ones share one probe
    co_return co_await answer(200, service.description.json(), true);
  }
  if (method != http::verb::post) co_return co_await refuse(bad_request, 405, "use POST");

  const std::uint64_t limit = to->what == kind::execute   ? options.max_request_bytes
                              : to->what == kind::results ? options.max_results_bytes
                                                          : 4096;
  // A declared length is checked here (Beast's body parser never compares it with its limit); a
  // chunked body is checked by the parser as it arrives.
  if (const auto declared = header.content_length(); declared && *declared > limit)
    co_return co_await refuse(too_large, 413, fmt::format("the body is over {} bytes", limit));
  http::request_parser<http::string_body> body(std::move(header));
  body.body_limit(limit);
  beast::get_lowest_layer(stream).expires_after(millis(options.request_timeout_seconds));
  auto [ec, n] = co_await http::async_read(stream, buffer, body, use_tuple);
  if (ec) {
    if (ec == http::error::body_limit)
      co_return co_await refuse(too_large, 413, fmt::format("the body is over {} bytes", limit));
    record.status = 0;
    record.outcome = "the request did not arrive: " + ec.message();
    co_return false;
  }
  if (to->what == kind::cancel) {
    // Somebody else's execution and one that does not exist get the same answer, body included.
    if (!service.executions.cancel(to->execution_id, *client))
      co_return co_await refuse(not_found, 404, "no such execution is running", true);
    co_return co_await answer(200, "{}", true);
  }
  if (to->what == kind::results) {
    const auto delivered = service.executions.deliver(to->execution_id, *client, body.get().body());
    if (!delivered) {
      const bool missing = delivered.error().kind == error_kind::invalid_argument;
      co_return co_await refuse(missing ? not_found : bad_request, missing ? 404 : 400,
                                delivered.error().message());
    }
    co_return co_await answer(200, fmt::format(R"({{"delivered":{}}})", delivered.value()), true);
  }
  co_await service.executions.execute(stream, to->execution_id, *client, body.get().body(), record);
  co_return false;
}

}  // namespace

template <class Stream>
awaitable<void> serve_requests(sandbox_service::impl& service, Stream& stream, const std::string& peer,
                               bool via_proxy) {
  const auto& options = service.options;
  beast::flat_buffer buffer;
  bool first = true;
  for (;;) {
    // No body limit yet: the route's is applied in handle().
    http::request_parser<http::empty_body> header;
    const double timeout = first ? options.request_timeout_seconds : options.idle_timeout_seconds;
    const auto ec = co_await read_request_header(stream, buffer, header, timeout);
    if (ec) {
      if (ec == http::error::header_limit) {
        service.counters.count([](auto& c) { ++c.refused[service_refusal::too_large]; });
        write_access_log(options.access_log,
                         {.time = utc_now(), .peer = peer, .status = 431, .outcome = "the request header is too large"});
        const auto code = wire_code(service_refusal::too_large);
        co_await respond(stream, options.request_timeout_seconds, 431,
                         json_error(code, "the request header is too large"), false);
      }
      co_return;
    }
    first = false;
    access_record record{.time = utc_now(),
                         .peer = peer,
                         .method = std::string(header.get().method_string()),
                         .path = std::string(header.get().target().substr(0, 200))};
    if (via_proxy) record.forwarded_for = forwarded_client(header.get()["X-Forwarded-For"]);
    const auto started = clock::now();
    const bool keep = co_await handle(service, stream, buffer, header, record);
    record.duration_ms = std::chrono::duration<double, std::milli>(clock::now() - started).count();
    write_access_log(options.access_log, record);
    if (!keep) co_return;
  }
}

template awaitable<void> serve_requests(sandbox_service::impl&, beast::tcp_stream&, const std::string&, bool);
template awaitable<void> serve_requests(sandbox_service::impl&, tls_stream&, const std::string&, bool);
template awaitable<bool> respond(beast::tcp_stream&, double, unsigned, std::string, bool, std::optional<std::string>,
                                 std::string_view);
template awaitable<bool> respond(tls_stream&, double, unsigned, std::string, bool, std::optional<std::string>,
                                 std::string_view);

}  // namespace psych::host

// The reference sandbox service (sandbox_service.hpp; the protocol in docs/remote-protocol.md).
// One event loop thread serves every connection; each execution's blocking run() has a thread of
// its own, and everything it says to its client (relayed calls, then its captured output and
// `done`) is posted to the event loop, which alone writes to connections.
#include "psych/host/sandbox_service.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <future>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "http/base64.hpp"
#include "http/http_link.hpp"
#include "service/prometheus_text.hpp"
#include "psych/host/remote_protocol.hpp"
#include "service/service_metrics.hpp"
#include "service/service_tokens.hpp"

namespace psych {
namespace service_detail {

/// One line of the access log.
struct access_record {
  std::string time;
  std::string peer;
  /// The client a trusted proxy says it forwards (its X-Forwarded-For), or "" for another peer.
  std::string forwarded_for;
  std::string method;
  std::string path;
  unsigned status = 0;
  std::string client;        ///< the credential's name, never the token
  std::string tenant;
  std::string outcome;       ///< for an execution: "ok", its failure kind, or why it did not run
  double duration_ms = 0;
};

}  // namespace service_detail
}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::service_detail::access_record, time, peer, forwarded_for, method, path, status, client, tenant,
                        outcome, duration_ms);

namespace psych {

using namespace psych::host;
using service_detail::access_record;

namespace {

using clock = std::chrono::steady_clock;
using remote::ndjson_content_type;
/// Raw bytes per output frame: 64 KiB of base64.
constexpr std::size_t output_chunk = 48 * 1024;

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const std::tm tm = fmt::gmtime(t);  // gmtime_r where there is one, gmtime_s on Windows
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

/// What a request's target names: one of the service's routes, and the execution it is about.
struct route {
  enum class kind { describe, describe_fresh, metrics, execute, results, cancel } what = kind::describe;
  std::string execution_id;
};

/// The route a target names, or nullopt for one that is not the protocol's.
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

/// The `error` code a refusal's answer carries: an oversized request is a bad request on the wire.
std::string_view wire_code(service_refusal why) {
  return why == service_refusal::too_large ? name_of(service_refusal::bad_request) : name_of(why);
}

/// The client a trusted proxy names: the last address of its X-Forwarded-For (each proxy appends
/// the peer it saw, so only the last one is the trusted proxy's own word), or "invalid" when that is
/// not an IP address (never the raw text, which came from a client: the log stays parseable).
std::string forwarded_client(std::string_view header) {
  if (header.empty()) return {};
  const auto comma = header.rfind(',');
  auto last = comma == std::string_view::npos ? header : header.substr(comma + 1);
  while (!last.empty() && (last.front() == ' ' || last.front() == '\t')) last.remove_prefix(1);
  while (!last.empty() && (last.back() == ' ' || last.back() == '\t')) last.remove_suffix(1);
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(std::string(last.substr(0, 64)), ec);
  return ec || last.size() > 64 ? "invalid" : address.to_string();
}

std::string json_error(std::string_view code, std::string_view message) {
  return fmt::format(R"({{"error":{},"message":{}}})", protocol::encode_json(std::string(code)),
                     protocol::encode_json(std::string(message)));
}

/// Relays one program's calls to its client and the client's answers back, each answer delivered
/// at most once and only for a call that is waiting for one.
class service_relay final : public call_relay {
 public:
  explicit service_relay(std::function<void(std::string)> send) : send_(std::move(send)) {}

  void begin(answer_sink answer) override {
    std::lock_guard lock(mutex_);
    answer_ = std::move(answer);
  }
  void call(const protocol::call_frame& call) override {
    {
      std::lock_guard lock(mutex_);
      if (ended_) return;
      waiting_.insert(call.id);
    }
    send_(protocol::encode_frame(call));
  }
  void cancel_call(std::int64_t id) override { send_(protocol::encode_frame(protocol::cancel_call_frame{id})); }
  void end() override {
    std::lock_guard lock(mutex_);
    ended_ = true;
    answer_ = nullptr;
    waiting_.clear();
  }
  /// Whether the answer was for a call that waited for one.
  bool deliver(const protocol::result_frame& answer) {
    answer_sink sink;
    {
      std::lock_guard lock(mutex_);
      if (ended_ || !waiting_.erase(answer.id)) return false;
      sink = answer_;
    }
    if (sink) sink(answer);
    return true;
  }

 private:
  std::function<void(std::string)> send_;
  std::mutex mutex_;
  answer_sink answer_;
  std::set<std::int64_t> waiting_;
  bool ended_ = false;
};

struct execution {
  explicit execution(asio::io_context& io) : wake(io) {}
  std::string id, client, tenant;
  enum class phase { queued, granted, finished } state = phase::queued;
  bool cancel_requested = false;
  bool client_gone = false;
  /// Released as soon as the backend's run() returned: sending the outcome holds no sandbox, and a
  /// client that has its `done` must find the slot free already.
  bool slot_released = false;
  std::stop_source stop;
  std::unique_ptr<service_relay> relay;
  std::deque<std::string> outbox;  ///< NDJSON lines for the client, in order
  asio::steady_timer wake;
  std::thread worker;
  std::optional<sandbox_result> result;
  clock::time_point granted_at;  ///< when it took its slot and started
};

/// Limits beyond what the description's ceiling allows, in words; empty when within.
std::string beyond_ceiling(const sandbox_limits& asked, const sandbox_limits& ceiling) {
  sandbox_limits narrowed = asked;
  narrow(narrowed, ceiling);
  if (narrowed == asked) return {};
  return fmt::format("the terms' limits ({}) are beyond the service's ceiling ({})", protocol::encode_json(asked),
                     protocol::encode_json(ceiling));
}

std::optional<remote::error_frame> unmet_terms(const description& d, const execution_terms& terms) {
  if (const auto refused = refusal_by_backend(d.offer(), terms))
    return remote::error_frame{
        .code = remote::error_code::terms_unmet, .message = refused->message, .refusal = refused->reason};
  if (auto beyond = beyond_ceiling(terms.limits, d.limit_ceiling); !beyond.empty())
    return remote::error_frame{.code = remote::error_code::terms_unmet, .message = beyond, .refusal = std::nullopt};
  return std::nullopt;
}

/// The result as the stream carries it: the bytes in chunks, then `done`.
void frame_result(sandbox_result& r, std::deque<std::string>& out) {
  const auto chunks = [&](std::string_view bytes, std::string_view stream, std::uint64_t index) {
    for (std::size_t at = 0; at < bytes.size(); at += output_chunk)
      out.push_back(protocol::encode_frame(remote::output_frame{
          .stream = std::string(stream), .index = index, .data = base64_encode(bytes.substr(at, output_chunk))}));
  };
  chunks(r.stdout_data, "stdout", 0);
  chunks(r.stderr_data, "stderr", 0);
  remote::execution_outcome o;
  remote::for_each_carried_member([&](auto carried, auto from) { o.*carried = std::move(r.*from); });
  for (std::size_t i = 0; i < r.artifacts.size(); ++i) {
    chunks(r.artifacts[i].data, "artifact", i);
    o.artifacts.push_back({.path = r.artifacts[i].path, .size_bytes = r.artifacts[i].data.size()});
  }
  out.push_back(protocol::encode_frame(remote::done_frame{std::move(o)}));
}

template <class Stream>
beast::tcp_stream& lowest(Stream& stream) {
  return beast::get_lowest_layer(stream);
}

}  // namespace

struct sandbox_service::impl {
  impl(std::unique_ptr<sandbox> backend_in, sandbox_service_options options_in)
      : options(std::move(options_in)), backend(std::move(backend_in)), acceptor(io), drain_deadline(io) {}

  sandbox_service_options options;
  std::unique_ptr<sandbox> backend;
  asio::io_context io;
  std::unique_ptr<asio::ssl::context> tls;
  std::vector<asio::ip::address> proxies;  ///< options.trusted_proxies, parsed
  asio::ip::tcp::acceptor acceptor;
  asio::steady_timer drain_deadline;
  std::thread io_thread;
  std::jthread refresher;

  mutable std::mutex tokens_mutex;
  token_table tokens;
  mutable std::mutex describe_mutex;
  description described;
  std::string described_json;
  std::mutex refresh_mutex;
  std::condition_variable_any refresh_wake;

  // The event loop's alone.
  std::map<std::string, std::shared_ptr<execution>> executions;
  std::deque<std::shared_ptr<execution>> waiting;
  std::set<std::string> recent_ids;
  std::deque<std::string> recent_order;
  std::size_t running = 0;
  std::set<beast::tcp_stream*> connections;
  std::thread prober;  ///< a fresh describe's probe
  bool probing = false;
  std::vector<std::shared_ptr<asio::steady_timer>> probe_waiters;
  bool shutting_down = false;
  std::promise<void> drained;
  bool drained_set = false;

  mutable std::mutex stats_mutex;
  sandbox_service_stats counters;
  std::once_flag shutdown_once;

  template <class F>
  void count(F&& f) {
    std::lock_guard lock(stats_mutex);
    f(counters);
  }

  sandbox_service_stats counted() const {
    std::lock_guard lock(stats_mutex);
    return counters;
  }

  /// A started execution's end: its outcome, the cap that ended it, how long it held its slot.
  void count_finished(const execution& exec, std::optional<failure_kind> failed, std::optional<limit_name> limit) {
    const double held = std::chrono::duration<double>(clock::now() - exec.granted_at).count();
    count([&](auto& c) {
      if (failed) ++c.finished_failed[*failed];
      else ++c.finished_ok;
      if (limit) ++c.limit_hits[*limit];
      c.durations.observe(held);
    });
  }

  void log(const access_record& record) {
    const auto line = protocol::encode_json(record);
    if (options.access_log) options.access_log(line);
    else std::fprintf(stderr, "%s\n", line.c_str());
  }

  void refresh_description() {
    description d = backend->describe();
    std::string json = protocol::encode_json(d);
    std::lock_guard lock(describe_mutex);
    described = std::move(d);
    described_json = std::move(json);
  }

  description current_description() const {
    std::lock_guard lock(describe_mutex);
    return described;
  }

  std::optional<std::string> authenticate(const http::fields& fields) const {
    const std::string_view header = fields[http::field::authorization];
    // The scheme is case-insensitive (RFC 7235); the token is not.
    constexpr std::string_view scheme = "bearer ";
    if (header.size() <= scheme.size() || !beast::iequals(header.substr(0, scheme.size()), scheme))
      return std::nullopt;
    const std::string_view presented = header.substr(scheme.size());
    std::lock_guard lock(tokens_mutex);
    return tokens.match(presented);
  }

  // ---- connections ------------------------------------------------------------------------

  awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {
        // Out of descriptors, most likely: wait a little rather than spin, and go on.
        asio::steady_timer pause(io, std::chrono::milliseconds(50));
        co_await pause.async_wait(use_tuple);
        continue;
      }
      // Accepted while draining too: the executions still running need their results and
      // cancels, which come on connections of their own (execute() refuses new executions).
      if (connections.size() >= options.max_connections) {
        boost::system::error_code ignored;
        socket.close(ignored);
        continue;
      }
      asio::co_spawn(io, serve(std::move(socket)), asio::detached);
    }
  }

  void opened(beast::tcp_stream* connection) {
    connections.insert(connection);
    count([&](auto& c) { c.connections = connections.size(); });
  }
  void closed(beast::tcp_stream* connection) {
    connections.erase(connection);
    count([&](auto& c) { c.connections = connections.size(); });
  }

  awaitable<void> serve(asio::ip::tcp::socket socket) {
    boost::system::error_code ec;
    const auto remote = socket.remote_endpoint(ec);
    const std::string peer = ec ? "?" : fmt::format("{}:{}", remote.address().to_string(), remote.port());
    const bool via_proxy = !ec && std::ranges::find(proxies, remote.address()) != proxies.end();
    beast::tcp_stream tcp(std::move(socket));
    if (!tls) {
      opened(&tcp);
      co_await serve_requests(tcp, peer, via_proxy);
      closed(&tcp);
      tcp.close();
      co_return;
    }
    tls_stream stream(std::move(tcp), *tls);
    auto& lowest_layer = beast::get_lowest_layer(stream);
    opened(&lowest_layer);
    lowest_layer.expires_after(millis(options.request_timeout_seconds));
    auto [handshake_ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, use_tuple);
    if (!handshake_ec) co_await serve_requests(stream, peer, via_proxy);
    closed(&lowest_layer);
    lowest_layer.close();
  }

  template <class Stream>
  awaitable<void> serve_requests(Stream& stream, const std::string& peer, bool via_proxy) {
    beast::flat_buffer buffer;
    bool first = true;
    for (;;) {
      http::request_parser<http::empty_body> header;
      header.header_limit(max_header_bytes);
      // No body limit yet: the route's is applied in handle(). (Beast checks a Content-Length only
      // as it parses the header, against its default of 1 MiB, and never again after the body's
      // parser takes over.)
      header.body_limit(boost::none);
      lowest(stream).expires_after(millis(first ? options.request_timeout_seconds : options.idle_timeout_seconds));
      auto [ec, n] = co_await http::async_read_header(stream, buffer, header, use_tuple);
      if (ec) {
        if (ec == http::error::header_limit) {
          count([](auto& c) { ++c.refused[service_refusal::too_large]; });
          log({.time = utc_now(), .peer = peer, .status = 431, .outcome = "the request header is too large"});
          const auto code = wire_code(service_refusal::too_large);
          co_await respond(stream, 431, json_error(code, "the request header is too large"), false);
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
      const bool keep = co_await handle(stream, buffer, header, record);
      record.duration_ms = std::chrono::duration<double, std::milli>(clock::now() - started).count();
      log(record);
      if (!keep) co_return;
    }
  }

  template <class Stream>
  awaitable<bool> respond(Stream& stream, unsigned status, std::string body, bool keep_alive,
                          std::optional<std::string> retry_after = std::nullopt,
                          std::string_view content_type = "application/json") {
    http::response<http::string_body> response{static_cast<http::status>(status), 11};
    response.set(http::field::content_type, content_type);
    response.set(http::field::cache_control, "no-store");
    if (status == 401) response.set(http::field::www_authenticate, "Bearer");
    if (retry_after) response.set(http::field::retry_after, *retry_after);
    response.keep_alive(keep_alive);
    response.body() = std::move(body);
    response.prepare_payload();
    lowest(stream).expires_after(millis(options.request_timeout_seconds));
    auto [ec, n] = co_await http::async_write(stream, response, use_tuple);
    co_return !ec && keep_alive;
  }

  /// One request whose header has arrived. False: close the connection.
  template <class Stream>
  awaitable<bool> handle(Stream& stream, beast::flat_buffer& buffer, http::request_parser<http::empty_body>& header,
                         access_record& record) {
    const auto& request = header.get();
    const bool keep_alive = request.keep_alive();  // `request` is moved from once a body is read
    const auto answer = [&](unsigned status, std::string body, bool keep = false) {
      record.status = status;
      return respond(stream, status, std::move(body), keep && keep_alive);
    };
    const auto refuse = [&](service_refusal why, unsigned status, std::string_view message, bool keep = false) {
      count([why](auto& c) { ++c.refused[why]; });
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
      auto text = service_metrics_text(counted(), {.max_concurrent = options.max_concurrent,
                                                   .max_queued = options.max_queued,
                                                   .max_connections = options.max_connections});
      record.status = 200;
      co_return co_await respond(stream, 200, std::move(text), keep_alive, std::nullopt, prometheus::content_type);
    }
    const auto client = authenticate(request);
    if (!client) co_return co_await refuse(unauthorized, 401, "unauthorized");
    record.client = *client;
    if (to->what == kind::describe || to->what == kind::describe_fresh) {
      if (method != http::verb::get) co_return co_await refuse(bad_request, 405, "use GET");
      if (request.has_content_length() || request.chunked())
        co_return co_await refuse(bad_request, 400, "describe takes no body");
      // (`this->`: the enum's member of the same name is in scope here.)
      if (this->shutting_down)
        co_return co_await refuse(service_refusal::shutting_down, 503, "the service is shutting down: it runs nothing new");
      if (to->what == kind::describe_fresh) co_await probe_now();  // concurrent ones share one probe
      std::string json;
      {
        std::lock_guard lock(describe_mutex);
        json = described_json;
      }
      co_return co_await answer(200, std::move(json), true);
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
    lowest(stream).expires_after(millis(options.request_timeout_seconds));
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
      if (!cancel(to->execution_id, *client))
        co_return co_await refuse(not_found, 404, "no such execution is running", true);
      co_return co_await answer(200, "{}", true);
    }
    if (to->what == kind::results) {
      const auto delivered = deliver(to->execution_id, *client, body.get().body());
      if (!delivered) {
        const bool missing = delivered.error().kind == error_kind::invalid_argument;
        co_return co_await refuse(missing ? not_found : bad_request, missing ? 404 : 400,
                                  delivered.error().message());
      }
      co_return co_await answer(200, fmt::format(R"({{"delivered":{}}})", delivered.value()), true);
    }
    co_await execute(stream, to->execution_id, *client, body.get().body(), record);
    co_return false;
  }

  // ---- executions -------------------------------------------------------------------------

  awaitable<void> probe_now() {
    auto waiter = std::make_shared<asio::steady_timer>(io, clock::time_point::max());
    probe_waiters.push_back(waiter);
    if (!probing) {
      probing = true;
      if (prober.joinable()) prober.join();  // it posted its end already
      prober = std::thread([this] {
        refresh_description();
        asio::post(io, [this] {
          probing = false;
          for (auto& w : probe_waiters) w->cancel();
          probe_waiters.clear();
        });
      });
    }
    co_await waiter->async_wait(use_tuple);
  }

  /// False when `client` has no such execution: another's is answered as one that does not exist.
  bool cancel(const std::string& id, const std::string& client) {
    const auto found = executions.find(id);
    if (found == executions.end() || found->second->client != client) return false;
    auto& exec = *found->second;
    exec.cancel_requested = true;
    exec.stop.request_stop();
    exec.wake.cancel();
    return true;
  }

  result<std::size_t> deliver(const std::string& id, const std::string& client, std::string_view body) {
    const auto found = executions.find(id);
    if (found == executions.end() || found->second->client != client || !found->second->relay)
      return fail_with(error_kind::invalid_argument, "no such execution is running");
    auto& relay = *found->second->relay;
    protocol::line_reader lines({.max_frame_bytes = std::size_t{24} << 20,
                                 .max_stream_bytes = options.max_results_bytes,
                                 .max_frames = 100'000,
                                 .max_empty_lines = 1'000});
    std::size_t delivered = 0;
    auto fed = lines.feed(body, [&](std::string_view line) -> result<void> {
      auto frame = protocol::decode_frame<protocol::result_frame>(line, {.max_bytes = std::size_t{24} << 20});
      if (!frame) return frame.error();
      if (relay.deliver(std::get<protocol::result_frame>(frame.value()))) ++delivered;
      return success();
    });
    if (!fed) return fail_with(error_kind::frame_out_of_sequence, "the results: " + fed.error().message());
    if (auto finished = lines.finish(); !finished)
      return fail_with(error_kind::truncated_frame, "the results: " + finished.error().message());
    return delivered;
  }

  /// Whether an execution may take a slot now; queued ones are granted in order as slots free.
  void release_slot() {
    --running;
    grant_waiting();
  }
  void grant_waiting() {
    while (running < options.max_concurrent && !waiting.empty()) {
      auto next = waiting.front();
      waiting.pop_front();
      if (next->cancel_requested) {
        next->wake.cancel();
        continue;
      }
      ++running;
      next->state = execution::phase::granted;
      next->wake.cancel();
    }
    count([&](auto& c) {
      c.running = running;
      c.queued = waiting.size();
    });
  }

  void forget(const std::shared_ptr<execution>& exec) {
    executions.erase(exec->id);
    recent_ids.insert(exec->id);
    recent_order.push_back(exec->id);
    while (recent_order.size() > 100'000) {
      recent_ids.erase(recent_order.front());
      recent_order.pop_front();
    }
    if (shutting_down) maybe_drained();
  }

  template <class Stream>
  awaitable<void> execute(Stream& stream, const std::string& id, const std::string& client, std::string_view body,
                          access_record& record) {
    using why = service_refusal;  // (`using enum` would hide the member shutting_down)
    const auto refuse_http = [&](why reason, unsigned status, std::string message,
                                 std::optional<std::string> retry = std::nullopt) -> awaitable<void> {
      count([reason](auto& c) { ++c.refused[reason]; });
      record.status = status;
      record.outcome = name_of(reason);
      co_await respond(stream, status, json_error(wire_code(reason), message), false, std::move(retry));
    };
    auto decoded = protocol::decode_json<remote::execution_request>(body, {.max_bytes = options.max_request_bytes});
    if (!decoded)
      co_return co_await refuse_http(why::bad_request, 400, "the execution request: " + decoded.error().message());
    auto request = std::move(decoded).value();
    record.tenant = request.tenant.substr(0, 100);
    if (request.version != remote::protocol_version)
      co_return co_await refuse_http(why::bad_request, 400,
                                     fmt::format("this service speaks {}", remote::protocol_version));
    if (auto valid = validate_limits(request.terms.limits); !valid)
      co_return co_await refuse_http(why::bad_request, 400, valid.error().message());
    if (executions.contains(id) || recent_ids.contains(id))
      co_return co_await refuse_http(why::duplicate, 409,
                                     "this execution id was already used: an execution never runs twice");
    if (shutting_down)
      co_return co_await refuse_http(why::shutting_down, 503, "the service is shutting down", "5");

    // Refuse before running: terms this backend cannot meet are answered with an error frame.
    if (auto unmet = unmet_terms(current_description(), request.terms)) {
      count([](auto& c) { ++c.refused[why::terms_unmet]; });
      record.outcome = "refused:" + unmet->message.substr(0, 80);
      co_await stream_single(stream, *unmet, record);
      co_return;
    }

    auto exec = std::make_shared<execution>(io);
    exec->id = id;
    exec->client = client;
    exec->tenant = request.tenant;
    if (running < options.max_concurrent) {
      ++running;
      exec->state = execution::phase::granted;
    } else if (waiting.size() < options.max_queued) {
      waiting.push_back(exec);
    } else {
      co_return co_await refuse_http(why::busy, 503, "every execution slot and the queue are full", "1");
    }
    executions.emplace(id, exec);
    count([&](auto& c) {
      c.running = running;
      c.queued = waiting.size();
    });
    while (exec->state == execution::phase::queued && !exec->cancel_requested && !shutting_down) {
      exec->wake.expires_at(clock::time_point::max());
      co_await exec->wake.async_wait(use_tuple);
    }
    if (exec->state == execution::phase::queued) {
      std::erase(waiting, exec);
      forget(exec);
      count([&](auto& c) {
        if (exec->cancel_requested) ++c.cancelled_in_queue;
        else ++c.refused[why::shutting_down];
      });
      const auto code = exec->cancel_requested ? remote::error_code::cancelled : remote::error_code::shutting_down;
      record.outcome = name_of(code);
      co_await stream_single(stream,
                             remote::error_frame{.code = code,
                                                 .message = exec->cancel_requested
                                                                ? "cancelled while queued: nothing ran"
                                                                : "the service is shutting down: nothing ran",
                                                 .refusal = std::nullopt},
                             record);
      co_return;
    }

    // The slot is held: from here every path releases it, once the worker is done.
    exec->granted_at = clock::now();
    count([](auto& c) { ++c.executions_started; });
    co_await stream_execution(stream, exec, std::move(request), record);
    if (!exec->slot_released) release_slot();
    forget(exec);
  }

  template <class Stream>
  awaitable<bool> start_stream(Stream& stream, access_record& record) {
    http::response<http::empty_body> response{http::status::ok, 11};
    response.set(http::field::content_type, ndjson_content_type);
    response.set(http::field::cache_control, "no-store");
    response.keep_alive(false);
    response.chunked(true);
    http::response_serializer<http::empty_body> serializer(response);
    record.status = 200;
    lowest(stream).expires_after(millis(options.request_timeout_seconds));
    auto [ec, n] = co_await http::async_write_header(stream, serializer, use_tuple);
    co_return !ec;
  }

  template <class Stream>
  awaitable<bool> send_line(Stream& stream, const std::string& line) {
    lowest(stream).expires_after(millis(options.request_timeout_seconds));
    auto [ec, n] = co_await asio::async_write(stream, http::make_chunk(asio::buffer(line)), use_tuple);
    co_return !ec;
  }

  template <class Stream>
  awaitable<void> end_stream(Stream& stream) {
    lowest(stream).expires_after(millis(options.request_timeout_seconds));
    co_await asio::async_write(stream, http::make_chunk_last(), use_tuple);
  }

  template <class Stream>
  awaitable<void> stream_single(Stream& stream, const remote::error_frame& frame, access_record& record) {
    const std::string line = protocol::encode_frame(frame);
    if (!co_await start_stream(stream, record)) co_return;
    if (co_await send_line(stream, line)) co_await end_stream(stream);
  }

  template <class Stream>
  awaitable<void> stream_execution(Stream& stream, std::shared_ptr<execution> exec, remote::execution_request request,
                                   access_record& record) {
    // (No co_await inside && or ?: here: g++ 12 destroys the temporaries of such operands wrongly.)
    const std::string accepted = protocol::encode_frame(remote::accepted_frame{
        .version = std::string(remote::protocol_version), .execution_id = exec->id,
        .backend = current_description().backend});
    bool started = co_await start_stream(stream, record);
    if (started) started = co_await send_line(stream, accepted);
    if (!started || exec->cancel_requested) {
      record.outcome = started ? "cancelled" : "the client went away before the program was sent";
      count([](auto& c) { ++c.executions_cancelled; });
      count_finished(*exec, failure_kind::cancelled, std::nullopt);
      if (started) {
        remote::execution_outcome none;
        none.cancelled = true;
        none.failure = sandbox_failure{failure_kind::cancelled, "cancelled before the program was sent"};
        const std::string done = protocol::encode_frame(remote::done_frame{std::move(none)});
        if (co_await send_line(stream, done)) co_await end_stream(stream);
      }
      co_return;
    }

    std::weak_ptr<execution> weak = exec;
    exec->relay = std::make_unique<service_relay>([this, weak](std::string line) {
      asio::post(io, [weak, line = std::move(line)]() mutable {
        if (auto e = weak.lock()) {
          e->outbox.push_back(std::move(line));
          e->wake.cancel();
        }
      });
    });
    run_request run;
    run.program = std::move(request.program);
    run.filename = std::move(request.filename);
    run.terms = request.terms;
    // The client preserves outputs in its own store: here they are only captured and sent back.
    run.terms.output.preserve = output_preservation::when_available;
    for (auto& offered : request.bindings)
      run.bindings.push_back({.name = std::move(offered.name),
                              .description = std::move(offered.description),
                              .deferred = offered.deferred});
    run.relay = exec->relay.get();
    run.tenant = request.tenant;
    exec->worker = std::thread([this, exec, run = std::move(run)] {
      auto result = backend->run(run, exec->stop.get_token());
      asio::post(io, [exec, result = std::move(result)]() mutable {
        exec->result = std::move(result);
        exec->wake.cancel();
      });
    });

    // A client that goes away (or writes anything while its stream runs) ends its execution.
    asio::co_spawn(io, watch_client(lowest(stream).socket(), exec), asio::detached);
    bool writing = true, framed = false;
    for (;;) {
      while (writing && !exec->outbox.empty()) {
        const std::string line = std::move(exec->outbox.front());
        exec->outbox.pop_front();
        if (!co_await send_line(stream, line)) {
          writing = false;
          exec->client_gone = true;
          exec->stop.request_stop();
        }
      }
      if (!writing) exec->outbox.clear();
      if (exec->result && !framed) {
        exec->worker.join();
        exec->slot_released = true;
        release_slot();
        if (exec->relay) exec->relay->end();
        record.outcome = exec->result->failure ? std::string(name_of(exec->result->failure->kind)) : "ok";
        if (exec->result->cancelled || exec->client_gone) count([](auto& c) { ++c.executions_cancelled; });
        count_finished(*exec, exec->result->failure ? std::optional(exec->result->failure->kind) : std::nullopt,
                       exec->result->limit_hit);
        frame_result(*exec->result, exec->outbox);
        framed = true;
        continue;
      }
      if (framed) break;
      exec->wake.expires_at(clock::time_point::max());
      co_await exec->wake.async_wait(use_tuple);
    }
    exec->state = execution::phase::finished;
    boost::system::error_code ignored;
    lowest(stream).socket().cancel(ignored);  // the watcher
    if (writing) co_await end_stream(stream);
    if (exec->client_gone) record.outcome += " (the client went away)";
  }

  awaitable<void> watch_client(asio::ip::tcp::socket& socket, std::shared_ptr<execution> exec) {
    auto [ec] = co_await socket.async_wait(asio::ip::tcp::socket::wait_read, use_tuple);
    if (ec || exec->state == execution::phase::finished) co_return;
    exec->client_gone = true;
    exec->stop.request_stop();
    exec->wake.cancel();
  }

  // ---- shutting down -------------------------------------------------------------------------

  /// Refuses new executions and answers describe 503 (a load balancer's health check takes the
  /// replica out), but keeps accepting: a running execution's results and cancel arrive on
  /// connections of their own, and without them a program that calls a binding while the service
  /// drains could only wait for the deadline. The listener closes once nothing runs.
  void begin_shutdown() {
    shutting_down = true;
    for (auto& queued : waiting) queued->wake.cancel();
    drain_deadline.expires_after(millis(options.drain_seconds));
    drain_deadline.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      for (auto& [id, exec] : executions) {
        exec->cancel_requested = true;
        exec->stop.request_stop();
      }
    });
    maybe_drained();
  }

  void maybe_drained() {
    if (!executions.empty() || drained_set) return;
    drained_set = true;
    drain_deadline.cancel();
    boost::system::error_code ignored;
    acceptor.close(ignored);
    for (auto* connection : connections) connection->close();
    drained.set_value();
  }
};

sandbox_service::sandbox_service(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

result<std::unique_ptr<sandbox_service>> sandbox_service::start(std::unique_ptr<sandbox> backend,
                                                                sandbox_service_options options) {
  if (!backend) return fail_with(error_kind::sandbox_setup, "the service needs a backend");
  if (options.max_concurrent == 0) return fail_with(error_kind::invalid_argument, "max_concurrent must be at least 1");
  auto tokens = token_table::load(options.token_file);
  if (!tokens) return tokens.error();
  const bool tls = options.tls_cert_file || options.tls_key_file;
  if (tls && !(options.tls_cert_file && options.tls_key_file))
    return fail_with(error_kind::sandbox_setup, "TLS needs both a certificate and a key");
  if (!tls && !is_loopback_host(options.listen_host) && !options.allow_insecure_http)
    return fail_with(error_kind::sandbox_setup,
                   fmt::format("plaintext HTTP on {}, which is not loopback, would carry credentials in the clear; "
                               "give a certificate and key, or allow_insecure_http",
                               options.listen_host));
  auto state = std::make_unique<impl>(std::move(backend), std::move(options));
  state->tokens = std::move(tokens).value();
  state->counters.start_time_seconds =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto& o = state->options;
  if (tls) {
    state->tls = tls_context(asio::ssl::context::tls_server);
    auto& context = *state->tls;
    boost::system::error_code ec;
    context.use_certificate_chain_file(*o.tls_cert_file, ec);
    if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the certificate {}: {}", *o.tls_cert_file, ec.message()));
    context.use_private_key_file(*o.tls_key_file, asio::ssl::context::pem, ec);
    if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the key {}: {}", *o.tls_key_file, ec.message()));
  }
  boost::system::error_code ec;
  for (const auto& proxy : o.trusted_proxies) {
    const auto parsed = asio::ip::make_address(proxy, ec);
    if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the trusted proxy {}: not an IP address", proxy));
    state->proxies.push_back(parsed);
  }
  const auto address = asio::ip::make_address(o.listen_host, ec);
  if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the listen address {}: {}", o.listen_host, ec.message()));
  const asio::ip::tcp::endpoint endpoint(address, o.port);
  auto& acceptor = state->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return fail_with(error_kind::sandbox_setup,
                   fmt::format("listening on {}:{}: {}", o.listen_host, o.port, ec.message()));

  state->refresh_description();
  auto* raw = state.get();
  asio::co_spawn(raw->io, raw->accept_loop(), asio::detached);
  raw->io_thread = std::thread([raw] { raw->io.run(); });
  raw->refresher = std::jthread([raw](std::stop_token stop) {
    for (;;) {
      {
        std::unique_lock lock(raw->refresh_mutex);
        if (raw->options.describe_refresh_seconds <= 0) {
          raw->refresh_wake.wait(lock, stop, [] { return false; });
          return;
        }
        if (raw->refresh_wake.wait_for(lock, stop, millis(raw->options.describe_refresh_seconds),
                                       [] { return false; }) ||
            stop.stop_requested())
          return;
      }
      raw->refresh_description();
    }
  });
  return std::unique_ptr<sandbox_service>(new sandbox_service(std::move(state)));
}

sandbox_service::~sandbox_service() { shutdown(); }

std::uint16_t sandbox_service::port() const {
  boost::system::error_code ec;
  const auto endpoint = impl_->acceptor.local_endpoint(ec);
  return ec ? impl_->options.port : endpoint.port();
}

result<void> sandbox_service::reload_tokens() {
  auto tokens = token_table::load(impl_->options.token_file);
  if (!tokens) return tokens.error();
  std::lock_guard lock(impl_->tokens_mutex);
  impl_->tokens = std::move(tokens).value();
  return success();
}

void sandbox_service::shutdown() {
  std::call_once(impl_->shutdown_once, [this] {
    auto drained = impl_->drained.get_future();
    asio::post(impl_->io, [state = impl_.get()] { state->begin_shutdown(); });
    drained.wait();
    impl_->refresher.request_stop();
    impl_->refresh_wake.notify_all();
    if (impl_->refresher.joinable()) impl_->refresher.join();
    impl_->io_thread.join();
    if (impl_->prober.joinable()) impl_->prober.join();
  });
}

sandbox_service_stats sandbox_service::stats() const { return impl_->counted(); }

}  // namespace psych

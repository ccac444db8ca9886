#include "service/execution_stream.hpp"

#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

#include "http/base64.hpp"
#include "http/http_link.hpp"
#include "service/live_output_frames.hpp"
#include "service/service_routes.hpp"

namespace psych::host {

void service_relay::begin(answer_sink answer) {
  std::lock_guard lock(mutex_);
  answer_ = std::move(answer);
}

void service_relay::call(const protocol::call_frame& call) {
  {
    std::lock_guard lock(mutex_);
    if (ended_) return;
    waiting_.insert(call.id);
  }
  send_(protocol::encode_frame(call));
}

void service_relay::cancel_call(std::int64_t id) { send_(protocol::encode_frame(protocol::cancel_call_frame{id})); }

void service_relay::end() {
  std::lock_guard lock(mutex_);
  ended_ = true;
  answer_ = nullptr;
  waiting_.clear();
}

bool service_relay::deliver(const protocol::result_frame& answer) {
  answer_sink sink;
  {
    std::lock_guard lock(mutex_);
    if (ended_ || !waiting_.erase(answer.id)) return false;
    sink = answer_;
  }
  if (sink) sink(answer);
  return true;
}

namespace {

using clock = std::chrono::steady_clock;
using remote::ndjson_content_type;
/// Raw bytes per output frame: 64 KiB of base64.
constexpr std::size_t output_chunk = 48 * 1024;

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
    return remote::error_frame{.code = remote::error_code::terms_unmet, .message = refused->message, .refusal = refused->reason};
  if (auto beyond = beyond_ceiling(terms.limits, d.limit_ceiling); !beyond.empty())
    return remote::error_frame{.code = remote::error_code::terms_unmet, .message = beyond, .refusal = std::nullopt};
  return std::nullopt;
}

/// The result as the stream carries it: the bytes in chunks, then `done`.
void frame_result(sandbox_result& r, std::deque<outbox_line>& out) {
  const auto chunks = [&](std::string_view bytes, std::string_view stream, std::uint64_t index) {
    for (std::size_t at = 0; at < bytes.size(); at += output_chunk)
      out.push_back({protocol::encode_frame(remote::output_frame{
          .stream = std::string(stream), .index = index, .data = base64_encode(bytes.substr(at, output_chunk))})});
  };
  chunks(r.stdout_data, "stdout", 0);
  chunks(r.stderr_data, "stderr", 0);
  remote::execution_outcome o;
  remote::for_each_carried_member([&](auto carried, auto from) { o.*carried = std::move(r.*from); });
  for (std::size_t i = 0; i < r.artifacts.size(); ++i) {
    chunks(r.artifacts[i].data, "artifact", i);
    o.artifacts.push_back({.path = r.artifacts[i].path, .size_bytes = r.artifacts[i].data.size()});
  }
  out.push_back({protocol::encode_frame(remote::done_frame{std::move(o)})});
}

/// A client that goes away (or writes anything while its stream runs) ends its execution.
awaitable<void> watch_client(asio::ip::tcp::socket& socket, std::shared_ptr<service_execution> exec) {
  auto [ec] = co_await socket.async_wait(asio::ip::tcp::socket::wait_read, use_tuple);
  if (ec || exec->state == service_execution::phase::finished) co_return;
  exec->client_gone = true;
  exec->stop.request_stop();
  exec->wake.cancel();
}

/// A started execution's end, counted: its outcome, the cap that ended it, how long it held its slot.
void count_finished(service_counters& counters, const service_execution& exec, std::optional<failure_kind> failed,
                    std::optional<limit_name> limit) {
  counters.count_finished(std::chrono::duration<double>(clock::now() - exec.granted_at).count(), failed, limit);
}

}  // namespace

bool execution_streams::cancel(const std::string& id, const std::string& client) {
  auto* exec = admitted_.find(id, client);
  if (!exec) return false;
  exec->cancel_requested = true;
  exec->stop.request_stop();
  exec->wake.cancel();
  return true;
}

result<std::size_t> execution_streams::deliver(const std::string& id, const std::string& client,
                                               std::string_view body) {
  auto* exec = admitted_.find(id, client);
  if (!exec || !exec->relay) return fail_with(error_kind::invalid_argument, "no such execution is running");
  auto& relay = *exec->relay;
  protocol::line_reader lines({.max_frame_bytes = std::size_t{24} << 20,
                               .max_stream_bytes = options_.max_results_bytes,
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

template <class Stream>
awaitable<void> execution_streams::execute(Stream& stream, const std::string& id, const std::string& client,
                                           std::string_view body, access_record& record) {
  using why = service_refusal;
  const auto refuse_http = [&](why reason, unsigned status, std::string message,
                               std::optional<std::string> retry = std::nullopt) -> awaitable<void> {
    counters_.count([reason](auto& c) { ++c.refused[reason]; });
    record.status = status;
    record.outcome = name_of(reason);
    co_await respond(stream, options_.request_timeout_seconds, status, json_error(wire_code(reason), message), false,
                     std::move(retry));
  };
  auto decoded = protocol::decode_json<remote::execution_request>(body, {.max_bytes = options_.max_request_bytes});
  if (!decoded)
    co_return co_await refuse_http(why::bad_request, 400, "the execution request: " + decoded.error().message());
  auto request = std::move(decoded).value();
  record.tenant = request.tenant.substr(0, 100);
  if (request.version != remote::protocol_version && request.version != remote::protocol_version_live)
    co_return co_await refuse_http(
        why::bad_request, 400,
        fmt::format("this service speaks {} and {}", remote::protocol_version, remote::protocol_version_live));
  if (auto valid = validate_limits(request.terms.limits); !valid)
    co_return co_await refuse_http(why::bad_request, 400, valid.error().message());
  if (admitted_.used(id))
    co_return co_await refuse_http(why::duplicate, 409,
                                   "this execution id was already used: an execution never runs twice");
  if (admitted_.shutting_down())
    co_return co_await refuse_http(why::shutting_down, 503, "the service is shutting down", "5");

  // Refuse before running: terms this backend cannot meet are answered with an error frame.
  if (auto unmet = unmet_terms(description_.current(), request.terms)) {
    counters_.count([](auto& c) { ++c.refused[why::terms_unmet]; });
    record.outcome = "refused:" + unmet->message.substr(0, 80);
    co_await stream_single(stream, *unmet, record);
    co_return;
  }

  auto exec = std::make_shared<service_execution>(io_);
  exec->id = id;
  exec->client = client;
  exec->tenant = request.tenant;
  if (!admitted_.admit(exec))
    co_return co_await refuse_http(why::busy, 503, "every execution slot and the queue are full", "1");
  if (!co_await admitted_.wait_for_slot(exec)) {
    counters_.count([&](auto& c) {
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
  counters_.count([](auto& c) { ++c.executions_started; });
  co_await stream_execution(stream, exec, std::move(request), record);
  if (!exec->slot_released) admitted_.release_slot();
  admitted_.forget(exec);
}

template <class Stream>
awaitable<bool> execution_streams::start_stream(Stream& stream, access_record& record) {
  http::response<http::empty_body> response{http::status::ok, 11};
  response.set(http::field::content_type, ndjson_content_type);
  response.set(http::field::cache_control, "no-store");
  response.keep_alive(false);
  response.chunked(true);
  http::response_serializer<http::empty_body> serializer(response);
  record.status = 200;
  beast::get_lowest_layer(stream).expires_after(millis(options_.request_timeout_seconds));
  auto [ec, n] = co_await http::async_write_header(stream, serializer, use_tuple);
  co_return !ec;
}

template <class Stream>
awaitable<bool> execution_streams::send_line(Stream& stream, const std::string& line) {
  beast::get_lowest_layer(stream).expires_after(millis(options_.request_timeout_seconds));
  auto [ec, n] = co_await asio::async_write(stream, http::make_chunk(asio::buffer(line)), use_tuple);
  co_return !ec;
}

template <class Stream>
awaitable<void> execution_streams::end_stream(Stream& stream) {
  beast::get_lowest_layer(stream).expires_after(millis(options_.request_timeout_seconds));
  co_await asio::async_write(stream, http::make_chunk_last(), use_tuple);
}

template <class Stream>
awaitable<void> execution_streams::stream_single(Stream& stream, const remote::error_frame& frame,
                                                 access_record& record) {
  const std::string line = protocol::encode_frame(frame);
  if (!co_await start_stream(stream, record)) co_return;
  if (co_await send_line(stream, line)) co_await end_stream(stream);
}

template <class Stream>
awaitable<void> execution_streams::stream_execution(Stream& stream, std::shared_ptr<service_execution> exec,
                                                    remote::execution_request request, access_record& record) {
  // (No co_await inside && or ?: here: g++ 12 destroys the temporaries of such operands wrongly.)
  const std::string accepted = protocol::encode_frame(remote::accepted_frame{
      .version = request.version, .execution_id = exec->id,
      .backend = description_.current().backend});
  bool started = co_await start_stream(stream, record);
  if (started) started = co_await send_line(stream, accepted);
  if (!started || exec->cancel_requested) {
    record.outcome = started ? "cancelled" : "the client went away before the program was sent";
    counters_.count([](auto& c) { ++c.executions_cancelled; });
    count_finished(counters_, *exec, failure_kind::cancelled, std::nullopt);
    if (started) {
      remote::execution_outcome none;
      none.cancelled = true;
      none.failure = sandbox_failure{failure_kind::cancelled, "cancelled before the program was sent"};
      const std::string done = protocol::encode_frame(remote::done_frame{std::move(none)});
      if (co_await send_line(stream, done)) co_await end_stream(stream);
    }
    co_return;
  }

  std::weak_ptr<service_execution> weak = exec;
  exec->relay = std::make_unique<service_relay>([this, weak](std::string line) {
    asio::post(io_, [weak, line = std::move(line)]() mutable {
      if (auto e = weak.lock()) {
        e->outbox.push_back({std::move(line)});
        e->wake.cancel();
      }
    });
  });
  if (request.version == remote::protocol_version_live)
    exec->live = std::make_unique<live_output_frames>([this, weak](std::string line, std::uint64_t bytes) {
      asio::post(io_, [weak, line = std::move(line), bytes]() mutable {
        if (auto e = weak.lock()) {
          e->outbox.push_back({std::move(line), bytes});
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
  run.live_output = exec->live.get();
  run.tenant = request.tenant;
  exec->worker = std::thread([this, exec, run = std::move(run)] {
    auto result = backend_.run(run, exec->stop.get_token());
    asio::post(io_, [exec, result = std::move(result)]() mutable {
      exec->result = std::move(result);
      exec->wake.cancel();
    });
  });

  asio::co_spawn(io_, watch_client(beast::get_lowest_layer(stream).socket(), exec), asio::detached);
  bool writing = true, framed = false;
  for (;;) {
    while (writing && !exec->outbox.empty()) {
      const outbox_line line = std::move(exec->outbox.front());
      exec->outbox.pop_front();
      const bool written = co_await send_line(stream, line.text);
      if (exec->live) exec->live->sent(line.live_bytes);
      if (!written) {
        writing = false;
        exec->client_gone = true;
        exec->stop.request_stop();
      }
    }
    if (!writing) {
      for (const auto& dropped : exec->outbox)
        if (exec->live) exec->live->sent(dropped.live_bytes);
      exec->outbox.clear();
    }
    if (exec->result && !framed) {
      exec->worker.join();
      exec->slot_released = true;
      admitted_.release_slot();
      if (exec->relay) exec->relay->end();
      record.outcome = exec->result->failure ? std::string(name_of(exec->result->failure->kind)) : "ok";
      if (exec->result->cancelled || exec->client_gone) counters_.count([](auto& c) { ++c.executions_cancelled; });
      count_finished(counters_, *exec,
                     exec->result->failure ? std::optional(exec->result->failure->kind) : std::nullopt,
                     exec->result->limit_hit);
      frame_result(*exec->result, exec->outbox);
      framed = true;
      continue;
    }
    if (framed) break;
    exec->wake.expires_at(clock::time_point::max());
    co_await exec->wake.async_wait(use_tuple);
  }
  exec->state = service_execution::phase::finished;
  boost::system::error_code ignored;
  beast::get_lowest_layer(stream).socket().cancel(ignored);  // the watcher
  if (writing) co_await end_stream(stream);
  if (exec->client_gone) record.outcome += " (the client went away)";
}

template awaitable<void> execution_streams::execute(beast::tcp_stream&, const std::string&, const std::string&,
                                                    std::string_view, access_record&);
template awaitable<void> execution_streams::execute(tls_stream&, const std::string&, const std::string&,
                                                    std::string_view, access_record&);

}  // namespace psych::host

#include "mcp/json_rpc_peer.hpp"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "mcp/json_rpc_streams.hpp"
#include "mcp/json_rpc_wire.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"

namespace psych::host {
namespace {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

auto fail(mcp_error_kind kind, std::string detail, std::int64_t code = 0) {
  return boost::outcome_v2::failure(mcp_error{kind, std::move(detail), code});
}

/// Messages may nest deeper than the launcher contract's frames (tool schemas, tool results).
protocol::json_bounds message_bounds(std::size_t max_line_bytes) {
  return {.max_bytes = max_line_bytes, .max_depth = 256};
}

}  // namespace

struct json_rpc_peer::state {
  options opts;
  handlers on;
  /// The streams and the threads' waits (json_rpc_streams.hpp); none when they could not be set up.
  std::unique_ptr<peer_streams> streams;
  std::thread reader;
  std::thread writer;
  std::mutex closing;  ///< one close_output at a time

  struct pending_request {
    std::string method;
    std::optional<mcp_result<std::string>> answer;  ///< the raw `result`, or why there is none
    bool taken = false;                             ///< the writer has begun writing its line
    bool written = false;                           ///< ...and has written it whole
  };
  struct queued_line {
    std::string line;
    std::optional<std::int64_t> request;  ///< a request of ours; its waiter may withdraw it
    steady::time_point deadline;          ///< not begun by then: dropped
  };

  mutable std::mutex mutex;  ///< guards everything below
  std::condition_variable_any answered;  ///< a pending request's answer, or broken
  std::condition_variable work;          ///< the queue, or writer_stop, or broken
  std::map<std::int64_t, pending_request> pending;  ///< stable nodes: a waiter keeps a reference
  std::deque<queued_line> queue;
  std::size_t queued_bytes = 0;  ///< of the lines that are not requests of ours
  std::int64_t next_id = 1;
  bool writer_stop = false;
  std::optional<mcp_error> broken;  ///< set once, forever

  [[nodiscard]] std::string who() const { return "the server " + opts.server_name; }
  std::string epitaph() const { return on.epitaph ? on.epitaph() : std::string{"gone"}; }

  void break_with(mcp_error_kind kind, std::string detail) {
    {
      std::lock_guard lock{mutex};
      if (broken) return;
      broken = mcp_error{kind, std::move(detail)};
    }
    answered.notify_all();
    work.notify_all();
    if (streams) streams->wake_writer();  // a writer waiting for room has nothing more to write
  }

  std::optional<mcp_error> broken_error() const {
    std::lock_guard lock{mutex};
    return broken;
  }

  // ---- the queue ----

  /// Queues a line that is not a request of ours; false (and the peer broken) past the bound.
  bool enqueue(std::string line) {
    std::size_t now_queued = 0;
    {
      std::lock_guard lock{mutex};
      if (broken) return false;
      queued_bytes += line.size();
      now_queued = queued_bytes;
      if (now_queued <= opts.max_queued_bytes)
        queue.push_back({std::move(line), std::nullopt, steady::now() + opts.write_limit});
    }
    if (now_queued > opts.max_queued_bytes) {
      break_with(mcp_error_kind::protocol_violation,
                 fmt::format("{} sends requests but does not read the answers: over {} bytes wait to be written",
                             who(), opts.max_queued_bytes));
      return false;
    }
    work.notify_one();
    return true;
  }

  // ---- requests ----

  mcp_result<std::string> request(std::string_view method, std::string params_json, std::chrono::milliseconds timeout,
                                  std::stop_token stop, bool cancellable) {
    const auto deadline = steady::now() + timeout;
    std::unique_lock lock{mutex};
    if (broken)
      return fail(mcp_error_kind::unusable, fmt::format("{} broke earlier: {}", who(), broken->message()));
    if (writer_stop) return fail(mcp_error_kind::unusable, fmt::format("the session with {} is closing", who()));
    const std::int64_t id = next_id++;
    pending_request& slot = pending.try_emplace(id).first->second;
    slot.method = method;
    queue.push_back({protocol::encode_json(json_rpc_wire::request_out{
                         .id = id, .method = std::string(method), .params = json_text{std::move(params_json)}}) +
                         '\n',
                     id, deadline});
    work.notify_one();

    answered.wait_until(lock, stop, deadline, [&] { return slot.answer.has_value() || broken.has_value(); });
    if (slot.answer) {
      mcp_result<std::string> answer = std::move(*slot.answer);
      pending.erase(id);
      return answer;
    }
    const bool sent = slot.taken;
    const bool half_written = slot.taken && !slot.written;
    pending.erase(id);
    if (!sent) {
      const auto queued = std::find_if(queue.begin(), queue.end(), [&](const queued_line& q) { return q.request == id; });
      if (queued != queue.end()) queue.erase(queued);
    }
    if (broken) return boost::outcome_v2::failure(*broken);
    lock.unlock();

    // Out of time with the line half written: nothing can follow it, so the session is over. (A
    // caller's stop leaves the writer to finish it within its time limit.)
    if (half_written && !stop.stop_requested()) {
      break_with(mcp_error_kind::protocol_violation, fmt::format("{} stopped reading in the middle of a message", who()));
      return boost::outcome_v2::failure(*this->broken_error());
    }

    // Abandoned: a timeout or the caller's stop. A request the server has seen is cancelled.
    const bool stopped = stop.stop_requested();
    if (sent && cancellable)
      notify("notifications/cancelled",
             protocol::encode_json(json_rpc_wire::cancelled_params{
                 .requestId = id, .reason = stopped ? "cancelled by the caller" : "timed out"}));
    if (stopped) return fail(mcp_error_kind::cancelled, fmt::format("{} on {} was cancelled", method, opts.server_name));
    return fail(mcp_error_kind::timeout,
                fmt::format("{} on {}: no answer within {} ms", method, opts.server_name, timeout.count()));
  }

  void notify(std::string_view method, std::string params_json) {
    (void)enqueue(protocol::encode_json(json_rpc_wire::notification_out{.method = std::string(method),
                                                                        .params = json_text{std::move(params_json)}}) +
                  '\n');
  }

  // ---- writing ----

  /// The writer: the queue's lines in order, each begun before its deadline and finished by it.
  void write_loop() {
    peer_streams::prepare_writer_thread();  // a server that closed its stdin is an error here, not the host's end

    while (true) {
      queued_line next;
      {
        std::unique_lock lock{mutex};
        work.wait(lock, [&] { return writer_stop || broken || !queue.empty(); });
        if (writer_stop || broken) return;
        next = std::move(queue.front());
        queue.pop_front();
        if (!next.request) queued_bytes -= next.line.size();
        if (steady::now() >= next.deadline) continue;  // its waiter has given up, or no one reads
      }
      if (!write_line(next)) return;
    }
  }

  /// One write, without waiting, of what is left of `item`; nullopt when it is a request withdrawn
  /// before a byte of it was begun. A request's bytes are begun under the lock, so that the
  /// waiter's view is exact: never begun (withdrawn, nothing to cancel), begun (`taken`: cancelled
  /// when abandoned, and the session over if it cannot be finished), or `written` whole. (On
  /// Windows a write is begun before its bytes are counted: in flight, it counts as taken.)
  std::optional<peer_streams::write_attempt> write_some(const queued_line& item, std::size_t written) {
    const std::string_view rest = std::string_view{item.line}.substr(written);
    if (!item.request) return streams->try_write(rest, item.deadline);
    std::lock_guard lock{mutex};
    const auto found = pending.find(*item.request);
    if (found == pending.end() && written == 0 && !streams->write_in_flight()) return std::nullopt;
    auto attempt = streams->try_write(rest, item.deadline);
    if ((attempt.bytes > 0 || attempt.in_flight) && found != pending.end()) {
      found->second.taken = true;
      found->second.written = attempt.bytes == rest.size();
    }
    return attempt;
  }

  /// False when the writer must stop: told to, or the peer broke.
  bool write_line(const queued_line& item) {
    const std::string_view line = item.line;
    const steady::time_point deadline = item.deadline;
    std::size_t written = 0;
    while (written < line.size()) {
      const auto wrote = write_some(item, written);
      if (!wrote) return true;
      if (wrote->bytes > 0) {
        written += wrote->bytes;
        continue;
      }
      if (wrote->failed) {
        break_with(mcp_error_kind::server_exited,
                   fmt::format("{} closed its input (write: {}; {})", who(), *wrote->failed, epitaph()));
        return false;
      }
      // No room, or (Windows) a write still in flight, which the wait collects or cancels.
      if (!wrote->in_flight && steady::now() >= deadline) {
        if (written == 0) return true;  // not begun: dropped, and its waiter times out
        break_with(mcp_error_kind::protocol_violation,
                   fmt::format("{} stopped reading in the middle of a message", who()));
        return false;
      }
      if (!streams->wait_writable(deadline)) return false;  // closing
    }
    return true;
  }

  // ---- reading ----

  /// One line from the other side; a failure breaks the peer.
  mcp_result<void> handle_line(std::string_view line) {
    auto message = protocol::decode_json<json_rpc_wire::incoming>(line, message_bounds(opts.max_line_bytes));
    if (!message)
      return fail(mcp_error_kind::protocol_violation,
                  fmt::format("{} wrote a line that is not JSON-RPC ({}): {}", who(), message.error().message(),
                              protocol::detail::excerpt(line, 200)));
    json_rpc_wire::incoming& m = message.value();
    if (m.method) {
      if (m.id && echoes_our_request(*m.id, *m.method))
        return fail(mcp_error_kind::protocol_violation,
                    fmt::format("{} answered our {} request with a request, not a response: it sends back what it "
                                "reads (an echo such as /bin/cat), so it is not an MCP server",
                                who(), *m.method));
      if (m.id) answer_request(*m.id, *m.method);
      else if (on.notification) on.notification(*m.method);
      return boost::outcome_v2::success();
    }
    if (!m.id) {
      if (m.error)  // the other side could not even read a request's id: it is not reading our lines
        return fail(mcp_error_kind::protocol_violation,
                    fmt::format("{} could not read a request: {} {}", who(), m.error->code, m.error->message));
      return fail(mcp_error_kind::protocol_violation, fmt::format("{} wrote a message with neither id nor method: {}",
                                                                  who(), protocol::detail::excerpt(line, 200)));
    }
    std::int64_t id = 0;
    const std::string& id_text = m.id->text;
    const auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    if (ec != std::errc{} || end != id_text.data() + id_text.size()) return boost::outcome_v2::success();  // not ours

    std::optional<mcp_result<std::string>> answer;
    if (m.error)
      answer.emplace(fail(mcp_error_kind::rpc_error, std::move(m.error->message), m.error->code));
    else if (m.result)
      answer.emplace(std::move(m.result->text));
    else
      answer.emplace(fail(mcp_error_kind::protocol_violation,
                          fmt::format("{} answered request {} with neither result nor error", who(), id)));
    {
      std::lock_guard lock{mutex};
      const auto found = pending.find(id);
      if (found == pending.end()) return boost::outcome_v2::success();  // abandoned: dropped
      found->second.answer = std::move(answer);
    }
    answered.notify_all();
    return boost::outcome_v2::success();
  }

  /// A request of the other side's with the id and method of one of ours still waiting: our own
  /// line come back. A server's own requests (ping, sampling) never carry a client's methods.
  bool echoes_our_request(const json_text& id, const std::string& method) const {
    std::int64_t ours = 0;
    const auto [end, ec] = std::from_chars(id.text.data(), id.text.data() + id.text.size(), ours);
    if (ec != std::errc{} || end != id.text.data() + id.text.size()) return false;
    std::lock_guard lock{mutex};
    const auto found = pending.find(ours);
    return found != pending.end() && found->second.method == method;
  }

  /// Queued, never written here: the reader must go on reading whatever the other side does.
  void answer_request(const json_text& id, const std::string& method) {
    std::optional<std::string> result = on.request ? on.request(method) : std::nullopt;
    (void)enqueue(
        (result ? protocol::encode_json(json_rpc_wire::reply_result_out{.id = id, .result = json_text{std::move(*result)}})
                : protocol::encode_json(json_rpc_wire::reply_error_out{
                      .id = id, .error = {.code = -32601, .message = "Method not found: " + method}})) +
        '\n');
  }

  void read_loop() {
    protocol::line_reader lines{protocol::stream_bounds{.max_frame_bytes = opts.max_line_bytes,
                                                        .max_stream_bytes = std::numeric_limits<std::uint64_t>::max(),
                                                        .max_frames = std::numeric_limits<std::uint64_t>::max(),
                                                        .max_empty_lines = std::numeric_limits<std::uint64_t>::max()}};
    std::optional<mcp_error> violation;  ///< the first; later lines are not looked at
    // Sinks made once, not at every read: a drain takes them as std::function.
    const peer_streams::sink feed_input = [&](std::string_view bytes) {
      auto fed = lines.feed(bytes, [&](std::string_view line) -> result<void> {
        if (violation) return psych::success();
        if (auto handled = handle_line(line); !handled) violation = std::move(handled).error();
        return psych::success();
      });
      if (!fed && !violation)
        violation = mcp_error{mcp_error_kind::protocol_violation,
                              fmt::format("{} broke the framing: {}", who(), fed.error().message())};
      if (violation) return false;
      std::lock_guard lock{mutex};
      return !broken.has_value();  // broken meanwhile (the queue's bound, the writer): stop reading
    };
    const peer_streams::sink feed_side = [&](std::string_view bytes) {
      if (on.side_bytes) on.side_bytes(bytes);
      return true;
    };
    // After the end, what is left is read, but not for ever: a grandchild of the server's may
    // still hold the pipes open and write on.
    constexpr int rounds_after_end = 32;
    using drained = peer_streams::drained;
    const auto ended = [&](std::string_view what) {
      for (int round = 0; round < rounds_after_end && streams->drain_side(feed_side) == drained::more; ++round) {
      }
      break_with(mcp_error_kind::server_exited, fmt::format("{} {} ({})", who(), what, epitaph()));
    };

    while (true) {
      auto waited = streams->wait();
      if (!waited) {
        break_with(mcp_error_kind::server_exited, waited.error().detail);
        return;
      }
      const peer_streams::ready& ready = waited.value();
      if (ready.woken) return;  // closing
      if (ready.side && streams->drain_side(feed_side) == drained::ended) streams->forget_side();
      if (ready.input && streams->drain_input(feed_input) == drained::ended) {
        if (violation) break_with(violation->kind, std::move(violation->detail));
        else ended("closed its output");
        return;
      }
      if (ready.gone) {  // gone; what it wrote before is in the pipe
        for (int round = 0; round < rounds_after_end && streams->drain_input(feed_input) == drained::more; ++round) {
        }
        if (violation) break_with(violation->kind, std::move(violation->detail));
        else ended("exited");
        return;
      }
      {
        std::lock_guard lock{mutex};
        if (broken) return;  // broken by the writer or the queue's bound: nothing more is read
      }
    }
  }

  void close_output() {
    std::lock_guard serial{closing};
    {
      std::lock_guard lock{mutex};
      writer_stop = true;
    }
    work.notify_all();
    if (writer.joinable()) {
      streams->wake_writer();
      writer.join();
    }
    if (streams) streams->close_output();
  }
};

json_rpc_peer::json_rpc_peer(options opts, handlers on, os_handle input, os_handle output, os_handle side,
                             os_handle gone)
    : state_{std::make_unique<state>()} {
  state& s = *state_;
  s.opts = std::move(opts);
  s.on = std::move(on);
  auto streams = peer_streams::open(input, output, side, gone);
  if (!streams) {
    s.break_with(mcp_error_kind::spawn_failed, std::move(streams).error().detail);
    return;
  }
  s.streams = std::move(streams).value();
  s.reader = std::thread{[&s] { s.read_loop(); }};
  s.writer = std::thread{[&s] { s.write_loop(); }};
}

json_rpc_peer::~json_rpc_peer() {
  state_->close_output();
  state_->break_with(mcp_error_kind::unusable, fmt::format("the session with {} was closed", state_->who()));
  if (state_->reader.joinable()) {
    state_->streams->wake_reader();
    state_->reader.join();
  }
}

mcp_result<std::string> json_rpc_peer::request(std::string_view method, std::string params_json,
                                               std::chrono::milliseconds timeout, std::stop_token stop,
                                               bool cancellable) {
  return state_->request(method, std::move(params_json), timeout, std::move(stop), cancellable);
}

void json_rpc_peer::notify(std::string_view method, std::string params_json) {
  state_->notify(method, std::move(params_json));
}

bool json_rpc_peer::usable() const {
  std::lock_guard lock{state_->mutex};
  return !state_->broken;
}

std::optional<mcp_error> json_rpc_peer::broken() const { return state_->broken_error(); }

void json_rpc_peer::break_with(mcp_error_kind kind, std::string detail) { state_->break_with(kind, std::move(detail)); }

void json_rpc_peer::close_output() { state_->close_output(); }

}  // namespace psych::host

#include "json_rpc_peer.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "json_rpc_wire.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"

namespace psych::host {

/// A flag a thread's poll() wakes on, and stays readable once raised (nobody reads it): an eventfd
/// on Linux, a pipe elsewhere (macOS has no eventfd).
struct peer_wake_flag {
  int poll_fd = -1;   ///< what poll() watches
  int raise_fd = -1;  ///< what wake() writes to; the same eventfd on Linux

  bool open() noexcept {
#ifdef __linux__
    poll_fd = raise_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return poll_fd >= 0;
#else
    int ends[2];
    if (::pipe(ends) != 0) return false;
    poll_fd = ends[0];
    raise_fd = ends[1];
    for (const int fd : ends)
      if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || ::fcntl(fd, F_SETFL, O_NONBLOCK) != 0) return false;
    return true;
#endif
  }
  void close() noexcept {
    if (raise_fd >= 0 && raise_fd != poll_fd) ::close(raise_fd);
    if (poll_fd >= 0) ::close(poll_fd);
    poll_fd = raise_fd = -1;
  }
};

namespace {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

auto fail(mcp_error_kind kind, std::string detail, std::int64_t code = 0) {
  return boost::outcome_v2::failure(mcp_error{kind, std::move(detail), code});
}

int poll_ms(steady::duration left) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(ms, 0, 60'000));
}

bool set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void wake(const peer_wake_flag& flag) noexcept {
  const std::uint64_t one = 1;
  (void)!::write(flag.raise_fd, &one, sizeof one);
}

/// Messages may nest deeper than the launcher contract's frames (tool schemas, tool results).
protocol::json_bounds message_bounds(std::size_t max_line_bytes) {
  return {.max_bytes = max_line_bytes, .max_depth = 256};
}

}  // namespace

struct json_rpc_peer::state {
  options opts;
  handlers on;
  int input = -1;   ///< the reader's
  int output = -1;  ///< the writer's; closed by close_output
  int side = -1;    ///< the reader's
  int gone = -1;    ///< not owned
  peer_wake_flag wake_reader;
  peer_wake_flag wake_writer;
  std::thread reader;
  std::thread writer;
  std::mutex closing;  ///< one close_output at a time

  struct pending_request {
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

  ~state() {
    close_fd(input);
    close_fd(output);
    close_fd(side);
    wake_reader.close();
    wake_writer.close();
  }

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
    if (wake_writer.raise_fd >= 0) wake(wake_writer);  // a writer waiting for room has nothing more to write
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
    // A server that closed its stdin is EPIPE here, not the death of the host. The signal is
    // directed at this thread, and one left pending goes with it.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe, nullptr);

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

  /// One non-blocking write of what is left of `item`; nullopt when it is a request withdrawn
  /// before a byte of it was written. A request's bytes are written under the lock, so that the
  /// waiter's view is exact: never begun (withdrawn, nothing to cancel), begun (`taken`: cancelled
  /// when abandoned, and the session over if it cannot be finished), or `written` whole.
  std::optional<ssize_t> write_some(const queued_line& item, std::size_t written, int& error) {
    const std::string_view rest = std::string_view{item.line}.substr(written);
    if (!item.request) {
      const ssize_t n = ::write(output, rest.data(), rest.size());
      error = errno;
      return n;
    }
    std::lock_guard lock{mutex};
    const auto found = pending.find(*item.request);
    if (found == pending.end()) {
      if (written == 0) return std::nullopt;
    }
    const ssize_t n = ::write(output, rest.data(), rest.size());
    error = errno;
    if (n > 0 && found != pending.end()) {
      found->second.taken = true;
      found->second.written = static_cast<std::size_t>(n) == rest.size();
    }
    return n;
  }

  /// False when the writer must stop: told to, or the peer broke.
  bool write_line(const queued_line& item) {
    const std::string_view line = item.line;
    const steady::time_point deadline = item.deadline;
    std::size_t written = 0;
    while (written < line.size()) {
      int error = 0;
      const std::optional<ssize_t> wrote = write_some(item, written, error);
      if (!wrote) return true;
      const ssize_t n = *wrote;
      if (n > 0) {
        written += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && error == EINTR) continue;
      if (n < 0 && error == EAGAIN) {
        const auto left = deadline - steady::now();
        if (left <= steady::duration::zero()) {
          if (written == 0) return true;  // not begun: dropped, and its waiter times out
          break_with(mcp_error_kind::protocol_violation,
                     fmt::format("{} stopped reading in the middle of a message", who()));
          return false;
        }
        pollfd fds[2] = {{output, POLLOUT, 0}, {wake_writer.poll_fd, POLLIN, 0}};
        if (::poll(fds, 2, poll_ms(left)) > 0 && fds[1].revents != 0) return false;  // closing
        continue;
      }
      break_with(mcp_error_kind::server_exited,
                 fmt::format("{} closed its input (write: {}; {})", who(), std::strerror(error), epitaph()));
      return false;
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

  /// Queued, never written here: the reader must go on reading whatever the other side does.
  void answer_request(const json_text& id, const std::string& method) {
    std::optional<std::string> result = on.request ? on.request(method) : std::nullopt;
    (void)enqueue(
        (result ? protocol::encode_json(json_rpc_wire::reply_result_out{.id = id, .result = json_text{std::move(*result)}})
                : protocol::encode_json(json_rpc_wire::reply_error_out{
                      .id = id, .error = {.code = -32601, .message = "Method not found: " + method}})) +
        '\n');
  }

  enum class drained { empty, more, ended };

  /// Reads what the descriptor has now, without waiting, and at most 16 buffers of it (`more`),
  /// so that a stream that never pauses cannot starve the others. `ended` at end of file, on an
  /// error, or when the sink says stop.
  template <class Sink>
  static drained drain(int fd, std::string& buffer, Sink&& sink) {
    for (int round = 0; round < 16;) {
      const ssize_t n = ::read(fd, buffer.data(), buffer.size());
      if (n > 0) {
        if (!sink(std::string_view{buffer.data(), static_cast<std::size_t>(n)})) return drained::ended;
        ++round;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return n < 0 && errno == EAGAIN ? drained::empty : drained::ended;
    }
    return drained::more;
  }

  void read_loop() {
    protocol::line_reader lines{protocol::stream_bounds{.max_frame_bytes = opts.max_line_bytes,
                                                        .max_stream_bytes = std::numeric_limits<std::uint64_t>::max(),
                                                        .max_frames = std::numeric_limits<std::uint64_t>::max(),
                                                        .max_empty_lines = std::numeric_limits<std::uint64_t>::max()}};
    std::string buffer(std::size_t{64} << 10, '\0');
    std::optional<mcp_error> violation;  ///< the first; later lines are not looked at
    const auto feed_input = [&](std::string_view bytes) {
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
    const auto feed_side = [&](std::string_view bytes) {
      if (on.side_bytes) on.side_bytes(bytes);
      return true;
    };
    // After the end, what is left is read, but not for ever: a grandchild of the server's may
    // still hold the pipes open and write on.
    constexpr int rounds_after_end = 32;
    const auto ended = [&](std::string_view what) {
      if (side >= 0)
        for (int round = 0; round < rounds_after_end && drain(side, buffer, feed_side) == drained::more; ++round) {
        }
      break_with(mcp_error_kind::server_exited, fmt::format("{} {} ({})", who(), what, epitaph()));
    };

    pollfd fds[4] = {{input, POLLIN, 0}, {side, POLLIN, 0}, {wake_reader.poll_fd, POLLIN, 0}, {gone, POLLIN, 0}};
    while (true) {
      if (::poll(fds, 4, -1) < 0) {
        if (errno == EINTR) continue;
        break_with(mcp_error_kind::server_exited, fmt::format("poll: {}", std::strerror(errno)));
        return;
      }
      if (fds[2].revents != 0) return;  // closing
      if (fds[1].revents != 0 && drain(side, buffer, feed_side) == drained::ended) fds[1].fd = -1;  // stop polling it
      if (fds[0].revents != 0 && drain(input, buffer, feed_input) == drained::ended) {
        if (violation) break_with(violation->kind, std::move(violation->detail));
        else ended("closed its output");
        return;
      }
      if (fds[3].revents != 0) {  // gone; what it wrote before is in the pipe
        for (int round = 0; round < rounds_after_end && drain(input, buffer, feed_input) == drained::more; ++round) {
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
      wake(wake_writer);
      writer.join();
    }
    close_fd(output);
  }
};

json_rpc_peer::json_rpc_peer(options opts, handlers on, int input, int output, int side, int gone)
    : state_{std::make_unique<state>()} {
  state& s = *state_;
  s.opts = std::move(opts);
  s.on = std::move(on);
  s.input = input;
  s.output = output;
  s.side = side;
  s.gone = gone;
  if (!s.wake_reader.open() || !s.wake_writer.open()) {
    s.break_with(mcp_error_kind::spawn_failed, fmt::format("eventfd: {}", std::strerror(errno)));
    return;
  }
  for (int fd : {s.input, s.output, s.side})
    if (fd >= 0 && !set_nonblocking(fd)) {
      s.break_with(mcp_error_kind::spawn_failed, fmt::format("fcntl(O_NONBLOCK): {}", std::strerror(errno)));
      return;
    }
  s.reader = std::thread{[&s] { s.read_loop(); }};
  s.writer = std::thread{[&s] { s.write_loop(); }};
}

json_rpc_peer::~json_rpc_peer() {
  state_->close_output();
  state_->break_with(mcp_error_kind::unusable, fmt::format("the session with {} was closed", state_->who()));
  if (state_->reader.joinable()) {
    wake(state_->wake_reader);
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

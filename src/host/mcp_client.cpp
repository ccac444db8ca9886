// The MCP client over stdio and the binding source on top of it (include/psych/host/mcp.hpp).
//
// One reader thread per server polls its stdout, its stderr, its pidfd and a wake pipe. Each line
// of stdout is one JSON-RPC message: a response goes to the request that waits for it (by id; an
// abandoned request's late answer is dropped), a request of the server's is answered, a
// notification is noted (tools/list_changed) or ignored. Anything else breaks the client for good:
// every waiting request and every later one fails at once, so nothing can hang on a dead server.
#include "psych/host/mcp.hpp"

#include "spawn_attributes.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>

#include "psych/host/blocking_invoker.hpp"
#include "psych/json_text.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"

extern char** environ;

namespace psych::mcp_wire {

// ---- the JSON-RPC messages, as the codec's Hana structs (members named as on the wire) ----

struct rpc_error_body {
  std::int64_t code = 0;
  std::string message;
};

/// Any message from the server: a response (id + result or error), a request (id + method) or a
/// notification (method).
struct incoming {
  std::optional<json_text> id;
  std::optional<std::string> method;
  std::optional<json_text> result;
  std::optional<rpc_error_body> error;
};

struct request_out {
  std::string jsonrpc{"2.0"};
  std::int64_t id = 0;
  std::string method;
  json_text params;
};

struct notification_out {
  std::string jsonrpc{"2.0"};
  std::string method;
  json_text params;
};

struct reply_result_out {
  std::string jsonrpc{"2.0"};
  json_text id;
  json_text result;
};

struct reply_error_out {
  std::string jsonrpc{"2.0"};
  json_text id;
  rpc_error_body error;
};

struct client_info {
  std::string name;
  std::string version;
};

struct initialize_params {
  std::string protocolVersion;
  std::map<std::string, json_text> capabilities;
  client_info clientInfo;
};

struct initialize_result {
  std::string protocolVersion;
  static constexpr std::array<std::string_view, 1> required_members{"protocolVersion"};
};

struct list_params {
  std::string cursor;
};

struct wire_tool {
  std::string name;
  std::optional<std::string> description;
  std::optional<json_text> inputSchema;
  static constexpr std::array<std::string_view, 1> required_members{"name"};
};

struct list_result {
  std::vector<wire_tool> tools;
  std::optional<std::string> nextCursor;
  static constexpr std::array<std::string_view, 1> required_members{"tools"};
};

struct call_params {
  std::string name;
  json_text arguments;
};

struct content_item {
  std::string type;
  std::optional<std::string> text;
};

struct call_result_view {
  std::optional<bool> isError;
  std::vector<content_item> content;
};

struct cancelled_params {
  std::int64_t requestId = 0;
  std::string reason;
};

}  // namespace psych::mcp_wire

BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::rpc_error_body, code, message);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::incoming, id, method, result, error);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::request_out, jsonrpc, id, method, params);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::notification_out, jsonrpc, method, params);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::reply_result_out, jsonrpc, id, result);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::reply_error_out, jsonrpc, id, error);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::client_info, name, version);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::initialize_params, protocolVersion, capabilities, clientInfo);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::initialize_result, protocolVersion);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::list_params, cursor);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::wire_tool, name, description, inputSchema);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::list_result, tools, nextCursor);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::call_params, name, arguments);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::content_item, type, text);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::call_result_view, isError, content);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::cancelled_params, requestId, reason);

namespace psych {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr std::string_view protocol_version_asked = "2025-06-18";
constexpr std::size_t max_pages = 100;
constexpr std::size_t max_tools = 10'000;
constexpr std::size_t max_line_bytes = std::size_t{16} << 20;
constexpr std::size_t stderr_tail_bytes = 4096;
constexpr auto exit_grace = 1000ms;  // after stdin closes, then again after SIGTERM
constexpr auto cancel_write_limit = 1000ms;

/// Messages may nest deeper than the launcher contract's frames (tool schemas, tool results).
constexpr protocol::json_bounds message_bounds{.max_bytes = max_line_bytes, .max_depth = 256};

/// The variables a server inherits from the host, as the MCP SDKs' default environment.
constexpr std::array<const char*, 7> inherited_variables{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG"};

auto fail(mcp_error_kind kind, std::string detail, std::int64_t code = 0) {
  return boost::outcome_v2::failure(mcp_error{kind, std::move(detail), code});
}

std::string errno_text(const char* call, int saved) { return fmt::format("{}: {}", call, std::strerror(saved)); }

/// A descriptor at 3 or above, so that the child's dup2 onto 0..2 cannot clobber another source.
int above_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

bool set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int poll_ms(steady::duration left) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(ms, 0, 60'000));
}

/// SIGPIPE blocked in this thread while it writes, so a server that closed its stdin is EPIPE
/// here, not the death of the host. A SIGPIPE raised meanwhile is consumed before unblocking.
class sigpipe_guard {
 public:
  sigpipe_guard() noexcept {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~sigpipe_guard() {
    if (!was_pending_) {
      const timespec zero{};
      while (::sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

template <class T>
std::string encode(const T& value) {
  return protocol::encode_json(value);
}

}  // namespace

// ---- the session ----------------------------------------------------------------------------

struct mcp_client::state {
  mcp_server_config config;
  pid_t pid = -1;
  int pidfd = -1;
  int stdin_fd = -1;   ///< guarded by write_mutex; -1 once closed
  int stdout_fd = -1;  ///< the reader's
  int stderr_fd = -1;  ///< the reader's
  int wake_read = -1;
  int wake_write = -1;
  std::thread reader;
  std::string protocol_version;
  std::atomic<bool> tools_changed{true};

  std::mutex write_mutex;  ///< one line at a time on the server's stdin

  struct pending_request {
    std::optional<mcp_result<std::string>> answer;  ///< the raw `result`, or why there is none
  };
  std::mutex mutex;  ///< guards everything below
  std::condition_variable_any answered;
  std::map<std::int64_t, pending_request> pending;  ///< stable nodes: a waiter keeps a reference
  std::int64_t next_id = 1;
  std::optional<mcp_error> broken;  ///< set once, forever
  std::string stderr_tail;

  ~state() {
    close_fd(pidfd);
    close_fd(stdin_fd);
    close_fd(stdout_fd);
    close_fd(stderr_fd);
    close_fd(wake_read);
    close_fd(wake_write);
  }

  // ---- breaking ----

  void break_with(mcp_error_kind kind, std::string detail) {
    {
      std::lock_guard lock{mutex};
      if (!broken) broken = mcp_error{kind, std::move(detail)};
    }
    answered.notify_all();
  }

  [[nodiscard]] mcp_error unusable_error() const {
    return mcp_error{mcp_error_kind::unusable, fmt::format("the server {} broke earlier: {}", config.name,
                                                           broken->message())};
  }

  /// "exited with status 3", "killed by signal 9", or "still running".
  std::string exit_status(steady::duration wait) const {
    pollfd p{pidfd, POLLIN, 0};
    ::poll(&p, 1, poll_ms(wait));
    siginfo_t info{};
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid == 0)
      return "still running";
    if (info.si_code == CLD_EXITED) return fmt::format("exited with status {}", info.si_status);
    return fmt::format("killed by signal {}", info.si_status);
  }

  std::string stderr_excerpt() {
    std::lock_guard lock{mutex};
    std::string_view tail = stderr_tail;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r' || tail.back() == ' ')) tail.remove_suffix(1);
    if (tail.empty()) return "";
    if (tail.size() > 1000) tail = tail.substr(tail.size() - 1000);
    return fmt::format("; its stderr ends: {}", tail);
  }

  // ---- writing ----

  /// One whole line onto the server's stdin by `deadline`. Nothing written by then is a timeout
  /// and the client stays usable; part of a line written breaks the client.
  mcp_result<void> write_line(std::string_view line, steady::time_point deadline) {
    std::lock_guard lock{write_mutex};
    if (stdin_fd < 0) return fail(mcp_error_kind::unusable, fmt::format("the client of {} is closing", config.name));
    sigpipe_guard guard;
    std::size_t written = 0;
    while (written < line.size()) {
      const ssize_t n = ::write(stdin_fd, line.data() + written, line.size() - written);
      if (n > 0) {
        written += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        const auto left = deadline - steady::now();
        if (left <= steady::duration::zero()) {
          const auto detail = fmt::format("the server {} did not read its input within the time limit", config.name);
          if (written > 0)
            break_with(mcp_error_kind::protocol_violation,
                       fmt::format("the server {} stopped reading in the middle of a request", config.name));
          return fail(mcp_error_kind::timeout, detail);
        }
        pollfd p{stdin_fd, POLLOUT, 0};
        ::poll(&p, 1, poll_ms(left));
        continue;
      }
      const int saved = errno;
      auto detail = fmt::format("the server {} closed its input ({}; {}){}", config.name,
                                errno_text("write", saved), exit_status(200ms), stderr_excerpt());
      break_with(mcp_error_kind::server_exited, detail);
      return fail(mcp_error_kind::server_exited, std::move(detail));
    }
    return boost::outcome_v2::success();
  }

  void notify(std::string_view method, std::string params_json, steady::time_point deadline) {
    const std::string line =
        encode(mcp_wire::notification_out{.method = std::string(method), .params = json_text{std::move(params_json)}}) +
        '\n';
    (void)write_line(line, deadline);  // best effort: a broken client has said why already
  }

  // ---- requests ----

  /// Sends one request and waits for its answer: the raw `result` text.
  mcp_result<std::string> request(std::string_view method, std::string params_json, std::chrono::milliseconds timeout,
                                  std::stop_token stop, bool cancellable = true) {
    const auto deadline = steady::now() + timeout;
    std::int64_t id = 0;
    {
      std::lock_guard lock{mutex};
      if (broken) return boost::outcome_v2::failure(unusable_error());
      id = next_id++;
      pending.try_emplace(id);
    }
    const std::string line = encode(mcp_wire::request_out{.id = id, .method = std::string(method),
                                                          .params = json_text{std::move(params_json)}}) +
                             '\n';
    if (auto sent = write_line(line, deadline); !sent) {
      std::lock_guard lock{mutex};
      pending.erase(id);
      return boost::outcome_v2::failure(std::move(sent).error());
    }

    std::unique_lock lock{mutex};
    pending_request& slot = pending.find(id)->second;
    answered.wait_until(lock, stop, deadline, [&] { return slot.answer.has_value() || broken.has_value(); });
    if (slot.answer) {
      mcp_result<std::string> answer = std::move(*slot.answer);
      pending.erase(id);
      return answer;
    }
    pending.erase(id);
    if (broken) return boost::outcome_v2::failure(*broken);
    lock.unlock();

    // Abandoned: a timeout or the caller's stop. The server is told; its late answer is dropped.
    const bool stopped = stop.stop_requested();
    if (cancellable)
      notify("notifications/cancelled",
             encode(mcp_wire::cancelled_params{.requestId = id,
                                               .reason = stopped ? "cancelled by the caller" : "timed out"}),
             steady::now() + cancel_write_limit);
    if (stopped) return fail(mcp_error_kind::cancelled, fmt::format("{} on {} was cancelled", method, config.name));
    return fail(mcp_error_kind::timeout,
                fmt::format("{} on {}: no answer within {} ms", method, config.name, timeout.count()));
  }

  // ---- reading ----

  /// One line from the server. A failure breaks the client.
  mcp_result<void> handle_line(std::string_view line) {
    auto message = protocol::decode_json<mcp_wire::incoming>(line, message_bounds);
    if (!message)
      return fail(mcp_error_kind::protocol_violation,
                  fmt::format("the server {} wrote a line that is not JSON-RPC ({}): {}", config.name,
                              message.error().message(), protocol::detail::excerpt(line, 200)));
    mcp_wire::incoming& m = message.value();
    if (m.method) {
      if (m.id) answer_server_request(*m.id, *m.method);
      else if (*m.method == "notifications/tools/list_changed") tools_changed = true;
      return boost::outcome_v2::success();
    }
    if (!m.id) {
      if (m.error)  // the server could not even read a request's id: it is not reading our lines
        return fail(mcp_error_kind::protocol_violation,
                    fmt::format("the server {} could not read a request: {} {}", config.name, m.error->code,
                                m.error->message));
      return fail(mcp_error_kind::protocol_violation,
                  fmt::format("the server {} wrote a message with neither id nor method: {}", config.name,
                              protocol::detail::excerpt(line, 200)));
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
                          fmt::format("the server {} answered request {} with neither result nor error", config.name,
                                      id)));
    {
      std::lock_guard lock{mutex};
      const auto found = pending.find(id);
      if (found == pending.end()) return boost::outcome_v2::success();  // abandoned: dropped
      found->second.answer = std::move(answer);
    }
    answered.notify_all();
    return boost::outcome_v2::success();
  }

  /// The server's own requests: `ping` is answered, anything else is "method not found" (this
  /// client offers no roots, sampling or elicitation).
  void answer_server_request(const json_text& id, const std::string& method) {
    const std::string line =
        (method == "ping"
             ? encode(mcp_wire::reply_result_out{.id = id, .result = json_text{"{}"}})
             : encode(mcp_wire::reply_error_out{
                   .id = id, .error = {.code = -32601, .message = "Method not found: " + method}})) +
        '\n';
    (void)write_line(line, steady::now() + config.timeout);
  }

  void keep_stderr(std::string_view bytes) {
    std::lock_guard lock{mutex};
    stderr_tail.append(bytes);
    if (stderr_tail.size() > stderr_tail_bytes) stderr_tail.erase(0, stderr_tail.size() - stderr_tail_bytes);
  }

  /// Reads what the descriptor has now, without waiting. False at end of file or on an error.
  template <class Sink>
  bool drain(int fd, std::string& buffer, Sink&& sink) {
    while (true) {
      const ssize_t n = ::read(fd, buffer.data(), buffer.size());
      if (n > 0) {
        if (!sink(std::string_view{buffer.data(), static_cast<std::size_t>(n)})) return false;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return n < 0 && errno == EAGAIN;
    }
  }

  void read_loop() {
    protocol::line_reader lines{protocol::stream_bounds{.max_frame_bytes = max_line_bytes,
                                                        .max_stream_bytes = std::numeric_limits<std::uint64_t>::max(),
                                                        .max_frames = std::numeric_limits<std::uint64_t>::max(),
                                                        .max_empty_lines = std::numeric_limits<std::uint64_t>::max()}};
    std::string buffer(std::size_t{64} << 10, '\0');
    std::optional<mcp_error> violation;
    const auto feed_stdout = [&](std::string_view bytes) {
      auto fed = lines.feed(bytes, [&](std::string_view line) -> result<void> {
        if (auto handled = handle_line(line); !handled) {
          violation = std::move(handled).error();
          return psych::failure(error_kind::frame_out_of_sequence, "stop");
        }
        return psych::success();
      });
      if (fed) return true;
      if (!violation)
        violation = mcp_error{mcp_error_kind::protocol_violation,
                              fmt::format("the server {} broke the framing: {}", config.name, fed.error().message())};
      return false;
    };
    const auto feed_stderr = [&](std::string_view bytes) {
      keep_stderr(bytes);
      return true;
    };
    const auto exited = [&](std::string_view what) {
      drain(stderr_fd, buffer, feed_stderr);
      break_with(mcp_error_kind::server_exited,
                 fmt::format("the server {} {} ({}){}", config.name, what, exit_status(200ms), stderr_excerpt()));
    };

    pollfd fds[4] = {{stdout_fd, POLLIN, 0}, {stderr_fd, POLLIN, 0}, {wake_read, POLLIN, 0}, {pidfd, POLLIN, 0}};
    while (true) {
      if (::poll(fds, 4, -1) < 0) {
        if (errno == EINTR) continue;
        break_with(mcp_error_kind::server_exited, errno_text("poll", errno));
        return;
      }
      if (fds[2].revents != 0) return;  // the client is closing
      if (fds[1].revents != 0 && !drain(stderr_fd, buffer, feed_stderr)) fds[1].fd = -1;  // stderr ended: stop polling it
      if (fds[0].revents != 0 && !drain(stdout_fd, buffer, feed_stdout)) {
        if (violation) break_with(violation->kind, std::move(violation->detail));
        else exited("closed its output");
        return;
      }
      if (fds[3].revents != 0) {  // the server exited; what it wrote before is in the pipe
        if (!drain(stdout_fd, buffer, feed_stdout) && violation) break_with(violation->kind, std::move(violation->detail));
        else exited("exited");
        return;
      }
    }
  }

  // ---- closing ----

  bool wait_exit(steady::duration limit) const {
    pollfd p{pidfd, POLLIN, 0};
    const auto deadline = steady::now() + limit;
    while (true) {
      const int ready = ::poll(&p, 1, poll_ms(deadline - steady::now()));
      if (ready > 0) return true;
      if (ready == 0 || errno != EINTR) return false;
    }
  }

  void shut_down() {
    {
      std::lock_guard lock{write_mutex};
      close_fd(stdin_fd);
    }
    if (pid > 0) {
      if (!wait_exit(exit_grace)) {
        ::killpg(pid, SIGTERM);
        if (!wait_exit(exit_grace)) ::killpg(pid, SIGKILL);
      }
      // Whatever the leader left in its group goes too. The leader is not reaped yet, so the
      // group's id cannot have been reused.
      ::killpg(pid, SIGKILL);
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      pid = -1;
    }
    break_with(mcp_error_kind::unusable, fmt::format("the client of {} was closed", config.name));
    if (reader.joinable()) {
      const char byte = 1;
      (void)!::write(wake_write, &byte, 1);
      reader.join();
    }
  }
};

// ---- mcp_client -------------------------------------------------------------------------------

mcp_client::mcp_client(std::unique_ptr<state> s) : state_(std::move(s)) {}

mcp_client::~mcp_client() {
  if (state_) state_->shut_down();
}

const std::string& mcp_client::name() const noexcept { return state_->config.name; }
const std::string& mcp_client::protocol_version() const noexcept { return state_->protocol_version; }
pid_t mcp_client::pid() const noexcept { return state_->pid; }
bool mcp_client::take_tools_changed() noexcept { return state_->tools_changed.exchange(false); }

bool mcp_client::usable() const {
  std::lock_guard lock{state_->mutex};
  return !state_->broken;
}

mcp_result<std::unique_ptr<mcp_client>> mcp_client::start(const mcp_server_config& config) {
  if (config.command.empty() || config.command.front().empty())
    return fail(mcp_error_kind::invalid_config, fmt::format("the server {} has no command", config.name));
  if (config.timeout <= std::chrono::milliseconds::zero())
    return fail(mcp_error_kind::invalid_config, fmt::format("the server {} has a timeout that is not positive",
                                                            config.name));

  auto s = std::make_unique<state>();
  s->config = config;

  // The pipes: the child's ends are dup2'd onto 0..2; every descriptor is close-on-exec.
  int in[2], out[2], err[2], wake[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return fail(mcp_error_kind::spawn_failed, errno_text("pipe2", errno));
  s->stdin_fd = in[1];
  int child_in = above_stdio(in[0]);
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(child_in);
    return fail(mcp_error_kind::spawn_failed, errno_text("pipe2", errno));
  }
  s->stdout_fd = out[0];
  int child_out = above_stdio(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(child_in);
    ::close(child_out);
    return fail(mcp_error_kind::spawn_failed, errno_text("pipe2", errno));
  }
  s->stderr_fd = err[0];
  int child_err = above_stdio(err[1]);
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(child_in);
    ::close(child_out);
    ::close(child_err);
    return fail(mcp_error_kind::spawn_failed, errno_text("pipe2", errno));
  }
  s->wake_read = wake[0];
  s->wake_write = wake[1];

  // The environment: the few inherited variables, then the configuration's.
  std::map<std::string, std::string> variables;
  for (const char* name : inherited_variables)
    if (const char* value = std::getenv(name)) variables[name] = value;
  for (const auto& [name, value] : config.environment) variables[name] = value;
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : variables) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = config.command;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_in, 0);
  posix_spawn_file_actions_adddup2(&actions, child_out, 1);
  posix_spawn_file_actions_adddup2(&actions, child_err, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  const host::own_group_attributes attributes;  // so it can be ended whole
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0], &actions, attributes.get(), argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(child_in);
  ::close(child_out);
  ::close(child_err);
  if (rc != 0)
    return fail(mcp_error_kind::spawn_failed,
                fmt::format("posix_spawnp({}) for the server {}: {}", config.command.front(), config.name,
                            std::strerror(rc)));
  s->pid = pid;
  s->pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (s->pidfd < 0) {
    const int saved = errno;
    ::killpg(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    s->pid = -1;
    return fail(mcp_error_kind::spawn_failed, errno_text("pidfd_open", saved));
  }
  if (!set_nonblocking(s->stdin_fd) || !set_nonblocking(s->stdout_fd) || !set_nonblocking(s->stderr_fd)) {
    const int saved = errno;
    s->shut_down();
    return fail(mcp_error_kind::spawn_failed, errno_text("fcntl(O_NONBLOCK)", saved));
  }

  state* raw = s.get();
  s->reader = std::thread{[raw] { raw->read_loop(); }};
  std::unique_ptr<mcp_client> client{new mcp_client{std::move(s)}};

  // The handshake. initialize may not be cancelled (the MCP lifecycle), so none is sent.
  const std::string params = encode(mcp_wire::initialize_params{
      .protocolVersion = std::string(protocol_version_asked),
      .capabilities = {},
      .clientInfo = {.name = "psych", .version = "0.1.0"}});
  auto answer = raw->request("initialize", params, config.timeout, {}, /*cancellable=*/false);
  if (!answer) {
    mcp_error e = std::move(answer).error();
    e.detail = "initialize: " + e.detail;
    return boost::outcome_v2::failure(std::move(e));
  }
  auto initialized = protocol::decode_json<mcp_wire::initialize_result>(answer.value(), message_bounds);
  if (!initialized)
    return fail(mcp_error_kind::protocol_violation,
                fmt::format("initialize: the server {} answered {}", config.name, initialized.error().message()));
  raw->protocol_version = std::move(initialized.value().protocolVersion);
  raw->notify("notifications/initialized", "{}", steady::now() + config.timeout);
  {
    std::lock_guard lock{raw->mutex};
    if (raw->broken) return boost::outcome_v2::failure(*raw->broken);
  }
  return client;
}

mcp_result<std::vector<mcp_tool>> mcp_client::list_tools() {
  std::vector<mcp_tool> tools;
  std::optional<std::string> cursor;
  for (std::size_t page = 0; page < max_pages; ++page) {
    std::string params = cursor ? encode(mcp_wire::list_params{*cursor}) : std::string{"{}"};
    BOOST_OUTCOME_TRY(auto raw, state_->request("tools/list", std::move(params), state_->config.timeout, {}));
    auto listed = protocol::decode_json<mcp_wire::list_result>(raw, message_bounds);
    if (!listed)
      return fail(mcp_error_kind::protocol_violation,
                  fmt::format("tools/list: the server {} answered {}", name(), listed.error().message()));
    for (mcp_wire::wire_tool& t : listed.value().tools) {
      if (tools.size() == max_tools)
        return fail(mcp_error_kind::protocol_violation,
                    fmt::format("tools/list: the server {} lists more than {} tools", name(), max_tools));
      tools.push_back({std::move(t.name), t.description.value_or(""),
                       t.inputSchema ? std::move(t.inputSchema->text) : std::string{"{}"}});
    }
    cursor = std::move(listed.value().nextCursor);
    if (!cursor || cursor->empty()) return tools;
  }
  return fail(mcp_error_kind::protocol_violation,
              fmt::format("tools/list: the server {} pages past {} pages", name(), max_pages));
}

mcp_result<mcp_call_result> mcp_client::call_tool(std::string_view name, std::string_view arguments_json,
                                                  std::stop_token stop) {
  return call_tool(name, arguments_json, std::move(stop), state_->config.timeout);
}

mcp_result<mcp_call_result> mcp_client::call_tool(std::string_view tool, std::string_view arguments_json,
                                                  std::stop_token stop, std::chrono::milliseconds timeout) {
  auto arguments = protocol::decode_json<json_text>(arguments_json, message_bounds);
  if (!arguments || arguments.value().text.front() != '{')
    return fail(mcp_error_kind::invalid_arguments,
                arguments ? std::string{"the arguments are not a JSON object"} : arguments.error().message());
  std::string params = encode(mcp_wire::call_params{.name = std::string(tool), .arguments = std::move(arguments).value()});
  BOOST_OUTCOME_TRY(auto raw, state_->request("tools/call", std::move(params), timeout, std::move(stop)));
  auto view = protocol::decode_json<mcp_wire::call_result_view>(raw, message_bounds);
  if (!view)
    return fail(mcp_error_kind::protocol_violation,
                fmt::format("tools/call {}: the server {} answered {}", tool, name(), view.error().message()));
  if (view.value().isError.value_or(false)) {
    std::string text;
    for (const mcp_wire::content_item& item : view.value().content) {
      if (!item.text) continue;
      if (!text.empty()) text += '\n';
      text += *item.text;
      if (text.size() > stderr_tail_bytes) break;
    }
    if (text.empty()) text = protocol::detail::excerpt(raw, 1000);
    return fail(mcp_error_kind::tool_failed, protocol::detail::excerpt(text, stderr_tail_bytes));
  }
  return mcp_call_result{std::move(raw)};
}

// ---- mcp_binding_source -----------------------------------------------------------------------

namespace {

tool_outcome outcome_of(const mcp_error& e) {
  switch (e.kind) {
    case mcp_error_kind::tool_failed: return tool_outcome::error(tool_error_kind::tool_failed, e.detail);
    case mcp_error_kind::rpc_error:
      return tool_outcome::error(tool_error_kind::tool_failed, fmt::format("JSON-RPC error {}: {}", e.rpc_code, e.detail));
    case mcp_error_kind::timeout: return tool_outcome::error(tool_error_kind::timeout, e.message());
    case mcp_error_kind::cancelled: return tool_outcome::error(tool_error_kind::cancelled, e.message());
    case mcp_error_kind::invalid_arguments: return tool_outcome::error(tool_error_kind::malformed_call, e.message());
    case mcp_error_kind::unusable: return tool_outcome::error(tool_error_kind::unavailable_binding, e.message());
    case mcp_error_kind::server_exited:
    case mcp_error_kind::protocol_violation: return tool_outcome::error(tool_error_kind::unknown_outcome, e.message());
    case mcp_error_kind::invalid_config:
    case mcp_error_kind::spawn_failed: break;
  }
  return tool_outcome::error(tool_error_kind::tool_failed, e.message());
}

}  // namespace

struct mcp_binding_source::impl {
  std::vector<std::unique_ptr<mcp_client>> clients;
  std::mutex cache_mutex;
  std::vector<std::optional<std::vector<binding>>> cache;  ///< per client; nullopt: to be listed
  std::unique_ptr<blocking_invoker> invoker;               ///< reset first: its pool calls the clients

  [[nodiscard]] std::optional<target> resolve(std::string_view binding_name) const {
    const std::size_t split = binding_name.find("__");
    if (split == std::string_view::npos) return std::nullopt;
    const std::string_view server = binding_name.substr(0, split);
    for (const auto& client : clients)
      if (client->name() == server) return target{client.get(), std::string(binding_name.substr(split + 2))};
    return std::nullopt;
  }

  tool_outcome call(const owned_tool_call& call, std::stop_token stop) const {
    const auto found = resolve(call.tool);
    if (!found) return tool_outcome::error(tool_error_kind::unknown_tool, fmt::format("no MCP server offers {}", call.tool));
    auto answer = found->client->call_tool(found->tool, call.arguments_json, std::move(stop));
    if (!answer) return outcome_of(answer.error());
    return tool_outcome::value(std::move(answer).value().json);
  }
};

mcp_binding_source::mcp_binding_source(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

mcp_binding_source::~mcp_binding_source() { impl_->invoker.reset(); }

mcp_result<std::unique_ptr<mcp_binding_source>> mcp_binding_source::create(
    std::vector<std::unique_ptr<mcp_client>> clients, std::size_t threads) {
  std::set<std::string_view> names;
  for (const auto& client : clients) {
    if (!client) return fail(mcp_error_kind::invalid_config, "a null client");
    const std::string& name = client->name();
    if (name.empty()) return fail(mcp_error_kind::invalid_config, "a server with an empty name");
    if (name.find("__") != std::string::npos)
      return fail(mcp_error_kind::invalid_config,
                  fmt::format("the server name {} contains \"__\", which separates it from its tools", name));
    if (!names.insert(name).second)
      return fail(mcp_error_kind::invalid_config, fmt::format("two servers are named {}", name));
  }
  auto i = std::make_unique<impl>();
  i->cache.resize(clients.size());
  i->clients = std::move(clients);
  impl* raw = i.get();
  i->invoker = std::make_unique<blocking_invoker>(
      [](const tool_call&) { return call_permission::allow(); },
      [raw](const owned_tool_call& call, std::stop_token stop) { return raw->call(call, std::move(stop)); }, threads);
  return std::unique_ptr<mcp_binding_source>{new mcp_binding_source{std::move(i)}};
}

std::vector<binding> mcp_binding_source::offered_now() {
  std::lock_guard lock{impl_->cache_mutex};
  std::vector<binding> offered;
  for (std::size_t i = 0; i < impl_->clients.size(); ++i) {
    mcp_client& client = *impl_->clients[i];
    auto& cached = impl_->cache[i];
    if (!client.usable()) {
      cached.reset();
      continue;
    }
    if (client.take_tools_changed()) cached.reset();
    if (!cached) {
      auto tools = client.list_tools();
      if (!tools) continue;  // offers nothing now; listed again at the next read
      std::vector<binding> bindings;
      std::set<std::string> seen;
      for (mcp_tool& t : tools.value()) {
        if (t.name.empty() || !seen.insert(t.name).second) continue;
        bindings.push_back({.name = client.name() + "__" + t.name, .description = std::move(t.description),
                            .input_schema_json = std::move(t.input_schema_json), .deferred = false,
                            .origin = binding_origin::mcp});
      }
      cached = std::move(bindings);
    }
    offered.insert(offered.end(), cached->begin(), cached->end());
  }
  return offered;
}

void mcp_binding_source::invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) {
  impl_->invoker->invoke(call, std::move(stop), std::move(done));
}

std::optional<mcp_binding_source::target> mcp_binding_source::resolve(std::string_view binding_name) const {
  return impl_->resolve(binding_name);
}

}  // namespace psych

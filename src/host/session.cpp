#include "session.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "artifact_walk.hpp"
#include "attachments.hpp"
#include "binding_gateway.hpp"
#include "execution_dirs.hpp"
#include "launcher_process.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"

namespace psych::host {

std::string random_token() {
  std::random_device entropy;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", entropy(), entropy(), entropy(), entropy());
}

namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using namespace asio::experimental::awaitable_operators;
using local_socket = asio::local::stream_protocol::socket;
using clock = std::chrono::steady_clock;

/// How long the host lets the launcher overrun the wall clock before it
/// cancels on its own, and then before it kills the launcher outright.
constexpr auto backstop_grace = std::chrono::seconds(2);
constexpr auto kill_grace = std::chrono::seconds(3);
/// How long output may keep flowing after the launcher is gone (it kills the
/// tree before it exits, so normally nothing is left holding a pipe).
constexpr auto drain_grace = std::chrono::seconds(2);

/// How long the calls still in flight when an execution ends get to finish after being asked to
/// stop. A tool that ignores the request is left behind (its log record stays "started": UNKNOWN).
constexpr auto call_stop_grace = std::chrono::seconds(2);

/// Where an invoker's completion lands, from whatever thread it calls back on. It outlives the
/// session, so a tool finishing after the session ended finds it closed and nothing else.
class completion_sink {
 public:
  explicit completion_sink(asio::io_context& io) : io_(&io) {}
  template <class Handler>
  void post(Handler handler) {
    std::lock_guard lock(mutex_);
    if (io_) asio::post(*io_, std::move(handler));
  }
  void close() {
    std::lock_guard lock(mutex_);
    io_ = nullptr;
  }

 private:
  std::mutex mutex_;
  asio::io_context* io_;
};

/// Frames from one socket, bounded as the bytes arrive.
class frame_stream {
 public:
  frame_stream(local_socket& socket, protocol::stream_bounds bounds) : socket_(socket), reader_(bounds) {}

  /// The next frame of one of the given types; nullopt at a clean end of stream.
  template <class... Frames>
  awaitable<result<std::optional<std::variant<Frames...>>>> next() {
    using frame = std::variant<Frames...>;
    while (pending_.empty()) {
      if (ended_) co_return std::optional<frame>{};
      boost::system::error_code ec;
      const auto n = co_await socket_.async_read_some(asio::buffer(buffer_), asio::redirect_error(use_awaitable, ec));
      if (ec) {
        ended_ = true;
        if (auto finished = reader_.finish(); !finished) co_return finished.error();
        continue;
      }
      auto fed = reader_.feed(std::string_view(buffer_.data(), n),
                              [this](std::string_view line) { pending_.emplace_back(line); });
      if (!fed) co_return fed.error();
    }
    const std::string line = std::move(pending_.front());
    pending_.pop_front();
    auto decoded = protocol::decode_frame<Frames...>(line);
    if (!decoded) co_return decoded.error();
    co_return std::optional<frame>(std::move(decoded).value());
  }

 private:
  local_socket& socket_;
  protocol::line_reader reader_;
  std::deque<std::string> pending_;
  std::array<char, 64 * 1024> buffer_{};
  bool ended_ = false;
};

class session {
 public:
  session(const session_plan& plan, const execution_dirs& dirs)
      : plan_(plan), dirs_(dirs), control_(io_), channel_(io_), stdout_(io_), stderr_(io_), pidfd_(io_),
        listen_v4_(io_), listen_v6_(io_), backstop_(io_), drain_deadline_(io_), calls_settled_(io_),
        out_(plan.terms.output.max_bytes), err_(plan.terms.output.max_bytes), environment_(plan.environment),
        gateway_(plan.bindings), sink_(std::make_shared<completion_sink>(io_)) {
    // The two variables that name this execution's own directories.
    environment_["HOME"] = dirs.workspace;
    environment_["TMPDIR"] = dirs.tmp;
  }

  ~session() { sink_->close(); }

  session_outcome run(std::stop_token stop) {
    started_at_ = clock::now();
    if (auto launched = launch(); !launched) {
      outcome_.result.failure = sandbox_failure{failure_kind::launch_failed, launched.error().message()};
      return finish();
    }
    asio::co_spawn(io_, main(), asio::detached);
    asio::co_spawn(io_, watch_clock(), asio::detached);
    std::stop_callback on_stop(stop, [this] {
      asio::post(io_, [this] {
        cancelled_ = true;
        send_cancel("cancelled");
      });
    });
    io_.run();
    return finish();
  }

 private:
  // ---- setting up -----------------------------------------------------------

  result<void> launch() {
    open_listeners();
    int control_pair[2], channel_pair[2], out_pipe[2], err_pipe[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, control_pair) != 0 ||
        ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel_pair) != 0 ||
        ::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
      return failure(error_kind::system_call_failed, fmt::format("socketpair/pipe2: {}", std::strerror(errno)));
    control_.assign(asio::local::stream_protocol(), control_pair[0]);
    channel_.assign(asio::local::stream_protocol(), channel_pair[0]);
    stdout_.assign(out_pipe[0]);
    stderr_.assign(err_pipe[0]);

    auto spawned = spawn_launcher(plan_.launcher_path, {.stdout_write = out_pipe[1],
                                                        .stderr_write = err_pipe[1],
                                                        .control = control_pair[1],
                                                        .channel = channel_pair[1]});
    for (int fd : {control_pair[1], channel_pair[1], out_pipe[1], err_pipe[1]}) ::close(fd);
    if (!spawned) return spawned.error();
    launcher_ = spawned.value();
    pidfd_.assign(launcher_.pidfd);

    token_ = random_token();
    const auto frame = protocol::encode_frame(launch_frame());
    boost::system::error_code ec;
    asio::write(control_, asio::buffer(frame), ec);
    if (ec) {
      // The launcher died before reading its orders; make sure, then reap it.
      ::syscall(SYS_pidfd_send_signal, launcher_.pidfd, SIGKILL, nullptr, 0);
      reap_launcher(launcher_);
      return failure(error_kind::system_call_failed, "writing the launch frame: " + ec.message());
    }
    return success();
  }

  protocol::launch_frame launch_frame() const {
    protocol::launch_frame frame;
    frame.token = token_;
    frame.isolation = plan_.attempt;
    frame.limits = plan_.terms.limits;
    frame.network = plan_.terms.network;
    frame.environment = environment_;
    frame.interpreter = plan_.interpreter;
    frame.workspace = dirs_.workspace;
    frame.tmp_dir = dirs_.tmp;
    frame.canary = dirs_.canary;
    frame.probe = {.ipv4_port = port_of(listen_v4_), .ipv6_port = port_of(listen_v6_)};
    frame.run_as = plan_.run_as;
    frame.allow_same_uid = plan_.allow_same_uid;
    return frame;
  }

  /// The network probe's target: listeners on this machine's loopback only.
  /// A connection that arrives here while network is denied is exposure,
  /// whatever the child says.
  void open_listeners() {
    const auto open = [this](asio::ip::tcp::acceptor& acceptor, const asio::ip::address& loopback) {
      boost::system::error_code ec;
      acceptor.open(loopback.is_v4() ? asio::ip::tcp::v4() : asio::ip::tcp::v6(), ec);
      if (!ec) acceptor.bind({loopback, 0}, ec);
      if (!ec) acceptor.listen(16, ec);
      if (ec) acceptor.close(ec);
      else asio::co_spawn(io_, accept_loop(acceptor), asio::detached);
    };
    open(listen_v4_, asio::ip::address_v4::loopback());
    open(listen_v6_, asio::ip::address_v6::loopback());
  }

  static std::int64_t port_of(const asio::ip::tcp::acceptor& acceptor) {
    boost::system::error_code ec;
    return acceptor.is_open() ? acceptor.local_endpoint(ec).port() : 0;
  }

  awaitable<void> accept_loop(asio::ip::tcp::acceptor& acceptor) {
    for (;;) {
      boost::system::error_code ec;
      auto peer = co_await acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      ++loopback_connections_;
      peer.close(ec);
    }
  }

  // ---- the conversation -----------------------------------------------------

  awaitable<void> main() {
    co_await (converse() && drain(stdout_, out_) && drain(stderr_, err_) && wait_launcher());
    backstop_.cancel();
    drain_deadline_.cancel();
    boost::system::error_code ec;
    listen_v4_.close(ec);
    listen_v6_.close(ec);
  }

  awaitable<void> converse() {
    frame_stream control(control_, {.max_frame_bytes = 1u << 20});
    frame_stream channel(channel_, {});

    auto first = co_await control.next<protocol::started_frame, protocol::launch_error_frame>();
    if (!first || !first.value()) {
      launch_failure_ = first ? "the launcher ended without reporting a start"
                              : "the launcher broke the contract: " + first.error().message();
      send_cancel("cancelled");
      co_return;
    }
    if (auto* error = std::get_if<protocol::launch_error_frame>(&*first.value())) {
      launch_failure_ = fmt::format("{}: {}({}): {}", error->stage, error->syscall,
                                    error->error_number ? std::strerror(static_cast<int>(error->error_number)) : "-",
                                    error->message);
      co_return;
    }
    outcome_.mechanisms = std::get<protocol::started_frame>(*first.value()).mechanisms;

    if (co_await hello_and_decide(channel)) co_await program(channel);
    co_await read_exit(control);
  }

  /// Reads the child's containment report, grades it, and answers run or
  /// abort. True when the program was sent.
  awaitable<bool> hello_and_decide(frame_stream& channel) {
    auto hello = co_await channel.next<protocol::hello_frame>();
    if (!hello) {
      violation(hello.error().message());
      co_return false;
    }
    if (!hello.value()) co_return false;  // the interpreter died first; the exit report says how
    const auto& frame = std::get<protocol::hello_frame>(*hello.value());
    if (frame.token != token_) {
      violation("frame_out_of_sequence: the hello frame does not carry this execution's token");
      co_return false;
    }
    grade_ = grade_containment(expectation(), *outcome_.mechanisms, frame.report);
    if (loopback_connections_ > 0) note_loopback_exposure();

    if (plan_.probe_only) {
      const protocol::abort_frame abort{"probe only: describe() never runs a program"};
      co_await send(channel_, abort);
      co_return false;
    }
    if (!grade_->reaches(plan_.terms.isolation)) {
      std::string why = fmt::format("requested isolation={}, the child's containment reached {}",
                                    name_of(plan_.terms.isolation),
                                    grade_->achieved ? name_of(*grade_->achieved) : "less than process");
      for (const auto& problem : grade_->problems) why.append("; ").append(problem);
      isolation_failure_ = why;
      const protocol::abort_frame abort{"isolation_unavailable: " + why};
      co_await send(channel_, abort);
      co_return false;
    }
    outcome_.program_started = true;
    const protocol::run_frame run{.program = plan_.program,
                                  .filename = plan_.filename,
                                  .bindings = gateway_.bindings_for_run(),
                                  .excluded = binding_gateway::excluded_for_run()};
    co_await send(channel_, run);
    co_return true;
  }

  /// The program's calls until its `done`. Each call is dispatched as it arrives and answered
  /// when its tool finishes, so calls the program gathered run together and the host keeps reading.
  awaitable<void> program(frame_stream& channel) {
    for (;;) {
      auto frame = co_await channel.next<protocol::done_frame, protocol::call_frame, protocol::cancel_call_frame>();
      if (!frame) {
        violation(frame.error().message());
        break;
      }
      if (!frame.value()) break;  // the child went away; the exit report says how
      if (const auto* call = std::get_if<protocol::call_frame>(&*frame.value())) {
        dispatch(*call);
        continue;
      }
      if (const auto* cancel = std::get_if<protocol::cancel_call_frame>(&*frame.value())) {
        if (const auto found = in_flight_.find(cancel->id); found != in_flight_.end()) {
          found->second.given_up = true;
          found->second.stop.request_stop();
        }
        continue;
      }
      done_ = std::get<protocol::done_frame>(*frame.value());
      break;
    }
    co_await end_calls();
  }

  /// A call in flight: the invoker has it, and its stop source.
  struct flight {
    admitted_call call;
    std::stop_source stop;
    bool given_up = false;  ///< the program sent cancel_call
  };

  void dispatch(const protocol::call_frame& call) {
    if (in_flight_.contains(call.id)) {
      queue_answer({.id = call.id, .ok = false, .value = std::nullopt,
                    .error = protocol::call_error{.kind = tool_error_kind::malformed_call, .tool = call.tool,
                                                  .message = "a call with this id is already in flight"}});
      return;
    }
    auto admission = gateway_.admit(call);
    if (auto* answer = std::get_if<protocol::result_frame>(&admission)) {
      queue_answer(*answer);
      return;
    }
    auto& slot = in_flight_[call.id];
    slot.call = std::get<admitted_call>(std::move(admission));
    *invoking_ = call.id;
    const tool_call asked{slot.call.call_id, plan_.bindings.run.execution_id, slot.call.tool, slot.call.arguments_json};
    // A tool that answers at once, on this thread, is answered without a trip through the queue;
    // any other completion is posted here from wherever it came.
    const auto own_thread = std::this_thread::get_id();
    std::optional<tool_outcome> at_once;
    gateway_.invoker()->invoke(
        asked, slot.stop.get_token(),
        [sink = sink_, this, id = call.id, own_thread, at_once = &at_once, invoking = invoking_](tool_outcome outcome) {
          // Only this very call's completion, inside its own invoke(): an invoker that completes an
          // earlier call from within a later invoke() goes through the queue like any other.
          if (std::this_thread::get_id() == own_thread && *invoking == id) {
            *at_once = std::move(outcome);
            return;
          }
          sink->post([this, id, outcome = std::move(outcome)] { on_call_done(id, outcome); });
        });
    *invoking_ = not_invoking;
    if (at_once) on_call_done(call.id, *at_once);
  }

  void on_call_done(std::int64_t id, const tool_outcome& outcome) {
    const auto found = in_flight_.find(id);
    if (found == in_flight_.end()) return;  // an invoker that called back twice
    const auto& slot = found->second;
    if (slot.given_up || program_over_) {
      gateway_.abandon(slot.call, outcome);
      if (!program_over_)
        queue_answer({.id = id, .ok = false, .value = std::nullopt,
                      .error = protocol::call_error{.kind = tool_error_kind::cancelled, .tool = slot.call.tool,
                                                    .message = "the program gave up on this call"}});
    } else {
      queue_answer(gateway_.complete(slot.call, outcome));
    }
    in_flight_.erase(found);
    if (in_flight_.empty()) calls_settled_.cancel();
  }

  /// The execution is over for its calls: each one still in flight is asked to stop, and gets a
  /// grace period to say how it ended, which the run log records.
  awaitable<void> end_calls() {
    program_over_ = true;
    if (in_flight_.empty()) co_return;
    for (auto& [id, slot] : in_flight_) slot.stop.request_stop();
    calls_settled_.expires_after(call_stop_grace);
    boost::system::error_code ec;
    co_await calls_settled_.async_wait(asio::redirect_error(use_awaitable, ec));
    for (const auto& [id, slot] : in_flight_)
      outcome_.result.problems.push_back(fmt::format(
          "bindings: {} ({}) did not end within {} s of being asked to stop; its outcome is unknown",
          slot.call.tool, slot.call.call_id, call_stop_grace.count()));
  }

  /// Answers go out in the order they are ready, one write at a time, while reading goes on.
  void queue_answer(const protocol::result_frame& answer) {
    if (program_over_) return;
    outbox_.push_back(protocol::encode_frame(answer));
    if (outbox_.size() == 1) write_next();
  }

  void write_next() {
    asio::async_write(channel_, asio::buffer(outbox_.front()), [this](boost::system::error_code ec, std::size_t) {
      outbox_.pop_front();
      if (ec) outbox_.clear();  // the child is gone; its exit report says how
      if (!outbox_.empty()) write_next();
    });
  }

  awaitable<void> read_exit(frame_stream& control) {
    auto frame = co_await control.next<protocol::exit_frame>();
    if (frame && frame.value()) exit_ = std::get<protocol::exit_frame>(*frame.value());
    else if (!frame) launcher_problem_ = "the launcher's exit report broke the contract: " + frame.error().message();
    else launcher_problem_ = "the launcher ended without an exit report";
  }

  // Frames are passed as named objects: GCC 12 destroys temporaries bound
  // inside a co_await expression twice.
  template <class Frame>
  awaitable<void> send(local_socket& socket, const Frame& frame) {
    const auto text = protocol::encode_frame(frame);
    boost::system::error_code ec;  // a child that died meanwhile is reported by the exit frame
    co_await asio::async_write(socket, asio::buffer(text), asio::redirect_error(use_awaitable, ec));
  }

  void violation(std::string what) {
    if (!violation_) violation_ = std::move(what);
    send_cancel("cancelled");
  }

  void send_cancel(const char* reason) {
    if (cancel_sent_ || !control_.is_open()) return;
    cancel_sent_ = true;
    const auto text = protocol::encode_frame(protocol::cancel_frame{reason});
    boost::system::error_code ec;
    asio::write(control_, asio::buffer(text), ec);
  }

  // ---- output, the launcher's lifetime, the clock ---------------------------

  static awaitable<void> drain(asio::posix::stream_descriptor& pipe, stream_capture& capture) {
    std::array<char, 64 * 1024> buffer{};
    for (;;) {
      boost::system::error_code ec;
      const auto n = co_await pipe.async_read_some(asio::buffer(buffer), asio::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      capture.append(std::string_view(buffer.data(), n));
    }
  }

  awaitable<void> wait_launcher() {
    boost::system::error_code ec;
    co_await pidfd_.async_wait(asio::posix::descriptor_base::wait_read, asio::redirect_error(use_awaitable, ec));
    launcher_status_ = reap_launcher(launcher_);
    launcher_reaped_ = true;
    // Whatever still holds a pipe or a socket now is not the launcher's tree
    // any more (it killed that); stop waiting for it after a grace period.
    drain_deadline_.expires_after(drain_grace);
    asio::co_spawn(io_, close_streams_after_deadline(), asio::detached);
  }

  awaitable<void> close_streams_after_deadline() {
    boost::system::error_code ec;
    co_await drain_deadline_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;  // everything ended on its own
    stdout_.close(ec);
    stderr_.close(ec);
    channel_.close(ec);
    control_.close(ec);
  }

  /// The launcher holds the wall clock; this is the backstop for a launcher
  /// that does not.
  awaitable<void> watch_clock() {
    const auto wall = std::chrono::duration<double>(plan_.terms.limits.wall_seconds.value);
    backstop_.expires_after(std::chrono::duration_cast<clock::duration>(wall) + backstop_grace);
    boost::system::error_code ec;
    co_await backstop_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
    backstop_fired_ = true;
    send_cancel("timeout");
    backstop_.expires_after(kill_grace);
    co_await backstop_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || launcher_reaped_) co_return;
    ::syscall(SYS_pidfd_send_signal, launcher_.pidfd, SIGKILL, nullptr, 0);
    launcher_problem_ = "the launcher did not end the execution at its wall clock and was killed";
  }

  // ---- grading and the result ----------------------------------------------

  /// This process's namespace ids, as the child reports its own: "mnt" -> "mnt:[4026531841]".
  static std::map<std::string, std::string> own_namespace_ids() {
    std::map<std::string, std::string> ids;
    for (const char* kind : {"mnt", "pid", "net", "user", "ipc", "uts", "cgroup"}) {
      char target[128];
      const auto path = fmt::format("/proc/self/ns/{}", kind);
      const ssize_t n = ::readlink(path.c_str(), target, sizeof target);
      if (n > 0) ids.emplace(kind, std::string(target, static_cast<std::size_t>(n)));
    }
    return ids;
  }

  grading_expectation expectation() const {
    grading_expectation e;
    e.requested = plan_.terms.isolation;
    e.limits = plan_.terms.limits;
    e.network = plan_.terms.network;
    if (plan_.run_as) e.run_as_uid = plan_.run_as->uid, e.run_as_gid = plan_.run_as->gid;
    e.worker_uid = ::getuid();
    for (const auto& entry : environment_) e.environment_keys.push_back(entry.first);
    e.host_namespace_ids = own_namespace_ids();
    return e;
  }

  void note_loopback_exposure() {
    if (!grade_ || plan_.terms.network != network_access::none) return;
    grade_->grades.network = enforcement::unavailable;
    grade_->network_denied = false;
    grade_->problems.push_back(
        fmt::format("network: {} connection(s) reached the host's loopback listener", loopback_connections_));
  }

  session_outcome finish() {
    auto& r = outcome_.result;
    if (grade_) {
      if (loopback_connections_ > 0) note_loopback_exposure();
      if (exit_) grade_exit(*grade_, exit_->survivors);
      r.isolation = grade_->achieved;
      r.guarantees = grade_->grades;
      r.network_denied = grade_->network_denied;
      r.problems = grade_->problems;
    }
    if (launcher_status_ != 0 && !exit_ && launcher_problem_.empty())
      launcher_problem_ = fmt::format("the launcher exited with status {}", launcher_status_);
    if (!launcher_problem_.empty()) r.problems.push_back(launcher_problem_);
    r.cancelled = cancelled_;
    r.bindings_spent = gateway_.spent();
    r.problems.insert(r.problems.end(), gateway_.problems().begin(), gateway_.problems().end());
    // The whole execution, interpreter start included: the span the wall clock limits.
    r.duration_seconds = std::chrono::duration<double>(clock::now() - started_at_).count();
    // The clock is graded by what happened, too: an execution that outlived its
    // wall clock and both graces was not held to it.
    const double held_to = plan_.terms.limits.wall_seconds.value +
                           std::chrono::duration<double>(backstop_grace + kill_grace + drain_grace).count();
    if (r.duration_seconds > held_to) {
      r.guarantees.wall_clock = enforcement::unavailable;
      r.problems.push_back(fmt::format("wall_clock: the execution took {:.1f} s against a limit of {} s",
                                       r.duration_seconds, plan_.terms.limits.wall_seconds.value));
    }

    const auto& policy = plan_.terms.output;
    r.stdout_size = out_.produced();
    r.stderr_size = err_.produced();
    r.stdout_data = out_.take();
    r.stderr_data = err_.take();
    r.stdout_preview = make_preview(r.stdout_data, r.stdout_size, policy.preview_bytes);
    r.stderr_preview = make_preview(r.stderr_data, r.stderr_size, policy.preview_bytes);

    if (!r.failure) decide_failure(r);
    return std::move(outcome_);
  }

  /// One failure, by precedence: what stopped the execution from starting,
  /// then what ended it from outside, then what the program itself reported.
  void decide_failure(sandbox_result& r) {
    const auto limit_hit = exit_ ? parse_enum<limit_name>(exit_->limit_hit) : std::nullopt;
    if (!launch_failure_.empty()) {
      r.failure = sandbox_failure{failure_kind::launch_failed, launch_failure_};
    } else if (!isolation_failure_.empty()) {
      r.failure = sandbox_failure{failure_kind::isolation_unavailable, isolation_failure_};
    } else if (violation_) {
      r.failure = sandbox_failure{failure_kind::protocol_violation, *violation_};
    } else if (plan_.probe_only) {
      return;
    } else if (cancelled_) {
      r.failure = sandbox_failure{failure_kind::cancelled, "the caller cancelled the execution"};
    } else if (limit_hit == limit_name::wall_seconds || backstop_fired_) {
      r.limit_hit = limit_name::wall_seconds;
      r.failure = sandbox_failure{failure_kind::timeout,
                                  fmt::format("the wall clock of {} s ran out", plan_.terms.limits.wall_seconds.value)};
    } else if (done_ && done_->ok) {
      if (done_->value && done_->value->text != "null") r.value = done_->value;
    } else if (done_ && done_->error) {
      const auto& e = *done_->error;
      const auto kind = e.kind == protocol::program_error_kind::syntax_error ? failure_kind::syntax_error
                        : e.kind == protocol::program_error_kind::value_not_serializable
                            ? failure_kind::value_not_serializable
                            : failure_kind::exception;
      const auto message = e.type.empty() ? e.message : e.message.empty() ? e.type : e.type + ": " + e.message;
      r.failure = sandbox_failure{kind, message, e.traceback, e.line};
      r.limit_hit = parse_enum<limit_name>(e.limit_hint);
    } else if (limit_hit) {
      r.limit_hit = limit_hit;
      r.failure = sandbox_failure{failure_kind::limit_exceeded,
                                  fmt::format("the {} limit ended the interpreter{}", name_of(*limit_hit),
                                              exit_ && !exit_->signal.empty() ? " (" + exit_->signal + ")" : "")};
    } else {
      std::string how = !exit_                   ? "the launcher did not report how"
                        : !exit_->signal.empty() ? "killed by " + exit_->signal
                                                 : fmt::format("exit status {}", exit_->exit_code);
      r.failure = sandbox_failure{failure_kind::crashed,
                                  "the interpreter ended without reporting a result (" + how + ")"};
    }
  }

  const session_plan& plan_;
  const execution_dirs& dirs_;
  asio::io_context io_;
  local_socket control_, channel_;
  asio::posix::stream_descriptor stdout_, stderr_, pidfd_;
  asio::ip::tcp::acceptor listen_v4_, listen_v6_;
  asio::steady_timer backstop_, drain_deadline_, calls_settled_;
  stream_capture out_, err_;
  std::map<std::string, std::string> environment_;
  binding_gateway gateway_;
  std::shared_ptr<completion_sink> sink_;
  std::map<std::int64_t, flight> in_flight_;
  /// The id of the call whose invoke() this thread is inside, if any: its completion is then at once.
  static constexpr std::int64_t not_invoking = std::numeric_limits<std::int64_t>::min();
  std::shared_ptr<std::int64_t> invoking_ = std::make_shared<std::int64_t>(not_invoking);
  std::deque<std::string> outbox_;
  bool program_over_ = false;

  launcher_process launcher_;
  std::string token_;
  clock::time_point started_at_;
  session_outcome outcome_;
  std::optional<containment_grade> grade_;
  std::optional<protocol::done_frame> done_;
  std::optional<protocol::exit_frame> exit_;
  std::optional<std::string> violation_;
  std::string launch_failure_, isolation_failure_, launcher_problem_;
  int launcher_status_ = 0;
  std::uint64_t loopback_connections_ = 0;
  bool cancelled_ = false, cancel_sent_ = false, backstop_fired_ = false, launcher_reaped_ = false;
};

void collect_into(sandbox_result& result, const std::string& workspace, const artifact_policy& policy) {
  auto harvested = collect_artifacts(workspace, policy);
  if (!harvested) {
    result.problems.push_back("artifacts: " + harvested.error().message());
    return;
  }
  for (auto& file : harvested.value().files) {
    const auto size = file.bytes.size();
    result.artifacts.push_back({.path = std::move(file.path), .size_bytes = size, .data = std::move(file.bytes)});
  }
  result.artifacts_omitted = harvested.value().omitted_total();
  for (const auto& [reason, count] : harvested.value().omitted)
    result.artifacts_omitted_by_reason[std::string(name_of(reason))] = count;
}

}  // namespace

session_outcome run_session(const session_plan& plan, std::stop_token stop) {
  auto dirs = make_execution_dirs(plan.temp_root);
  if (!dirs) {
    session_outcome outcome;
    outcome.result.failure = sandbox_failure{failure_kind::launch_failed, dirs.error().message()};
    return outcome;
  }
  session_outcome outcome;
  {
    session s(plan, dirs.value());
    outcome = s.run(std::move(stop));
  }
  // The tree is gone: nothing races the walk but what the kernel already holds.
  if (outcome.program_started && plan.terms.artifacts.collection == artifact_collection::collect)
    collect_into(outcome.result, dirs.value().workspace, plan.terms.artifacts);
  attach_items(outcome.result, plan.terms.output, plan.blobs, plan.tenant, {plan.bindings.budget, plan.bindings.run});
  if (!remove_execution_dirs(dirs.value()))
    outcome.result.problems.push_back(
        fmt::format("workspace: the host could not remove everything under {}", dirs.value().base));
  // ISOLATED: the program saw no shared temp directory of the host (its /tmp is its own tmpfs,
  // its message queues its own ipc namespace's), so there is nothing of it to sweep.
  if (plan.run_as && plan.attempt != isolation_level::isolated) sweep_shared_temp(plan.run_as->uid);
  return outcome;
}

}  // namespace psych::host

#include "execution/session.hpp"

#ifndef _WIN32
#include <unistd.h>  // getuid, readlink
#endif

#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/system_error.hpp>
#include <fmt/format.h>

#include "execution/artifact_walk.hpp"
#include "execution/attachments.hpp"
#include "bindings/binding_gateway.hpp"
#include "bindings/call_dispatcher.hpp"
#include "bindings/completion_sink.hpp"
#include "execution/execution_dirs.hpp"
#include "execution/frame_transport.hpp"
#include "os/child_process.hpp"
#include "os/child_streams.hpp"
#include "execution/launcher_process.hpp"
#include "execution/loopback_attach.hpp"
#include "execution/loopback_probe.hpp"
#include "os/os_handle.hpp"
#include "psych/failure_decision.hpp"
#include "os/random_hex.hpp"
#include "os/signal_name.hpp"

namespace psych::host {

std::string random_token() { return random_hex(16); }

namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using namespace asio::experimental::awaitable_operators;
/// Control and the channel: a Unix socket handed over as fd 3 or 4, or the loopback TCP connection
/// a launcher attached with (loopback_attach.hpp).
using stream_socket = asio::generic::stream_protocol::socket;
using clock = std::chrono::steady_clock;

/// How long the host lets the launcher overrun the wall clock before it
/// cancels on its own, and then before it kills the launcher outright.
constexpr auto backstop_grace = std::chrono::seconds(2);
constexpr auto kill_grace = std::chrono::seconds(3);
/// How long output may keep flowing after the launcher is gone (it kills the
/// tree before it exits, so normally nothing is left holding a pipe).
constexpr auto drain_grace = std::chrono::seconds(2);
/// How long the host waits, once the channel ended before `done`, for the launcher's exit report
/// before it cancels. An interpreter that dies of a signal closes its channel a moment before it
/// is reaped: at ISOLATED by the sandbox's init, which reports how it died and only then exits.
/// A cancel in that moment would have init killed first, and the signal lost with its report.
/// A program that closed its channel and lives on is cancelled after this wait.
constexpr auto exit_report_grace = std::chrono::seconds(1);
/// How long, after `started`, a launcher that attaches over loopback has to have its channel
/// proven. It connected before it created the child, so the connection is already waiting; the
/// patience is the proof's, and one more connection's ahead of it.
constexpr auto channel_attach_patience = attach_listener::proof_patience * 2;

/// The number a POSIX launcher reports for SIGKILL in its exit frame (the same on every POSIX system
/// psych runs on). A Windows launcher reports no signals.
constexpr long long sigkill_number = 9;

/// The program's own report, as the failure decision reads it.
program_report report_of(const protocol::done_frame& done) {
  program_report report{.ok = done.ok, .value = done.value};
  if (done.error) {
    const auto& e = *done.error;
    const auto kind = e.kind == protocol::program_error_kind::syntax_error ? failure_kind::syntax_error
                      : e.kind == protocol::program_error_kind::value_not_serializable
                          ? failure_kind::value_not_serializable
                          : failure_kind::exception;
    report.error = program_failure{.kind = kind,
                                   .type = e.type,
                                   .message = e.message,
                                   .traceback = e.traceback,
                                   .line = e.line,
                                   .limit_hint = parse_enum<limit_name>(e.limit_hint)};
  }
  return report;
}

/// The launcher's exit report, as the failure decision reads it: the signal by name, and
/// whether it was the launcher's kill on the host's request rather than one of the interpreter's own.
interpreter_exit exit_of(const protocol::exit_frame& exit) {
  return {.exit_code = exit.exit_code,
          .signal = exit.signal ? std::optional(signal_name(*exit.signal)) : std::nullopt,
          .limit_hit = exit.limit_hit,
          .killed_on_request = exit.cancelled && exit.signal == sigkill_number};
}

/// The rest of a result once the tree is gone: its artifacts and its attachments.
void complete_result(const session_plan& plan, const execution_dirs& dirs, session_outcome& outcome);

/// One execution: the launcher, the conversation of the contract over control and channel, the
/// program's output, the clock and the outcome. The transport, the calls and the network probe
/// are each their own part; this is what ties them together.
class session {
 public:
  session(const session_plan& plan, const execution_dirs& dirs)
      : plan_(&plan), hand_over_(plan.hand_over), claim_(plan.claim), dirs_(dirs), local_launcher_(plan.launcher_path),
        starter_(plan.starter ? *plan.starter : local_launcher_), control_(io_), channel_(io_), stdout_(io_), stderr_(io_), pidfd_(io_),
        control_out_(control_), channel_out_(channel_), probe_(io_), backstop_(io_), drain_deadline_(io_),
        exit_report_wait_(io_), claim_wait_(io_), listener_(io_), loopback_(starter_.attaches_over_loopback()),
        out_(plan.terms.output.max_bytes), err_(plan.terms.output.max_bytes), environment_(plan.environment) {
    // The two variables that name this execution's own directories.
    environment_["HOME"] = dirs.workspace;
    environment_["TMPDIR"] = dirs.tmp;
    if (!claim_) take_calls();
  }
  ~session() { relay_answers_->close(); }
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  /// The plan that ran: the one given, or a prepared session's claim.
  const session_plan& plan() const { return *plan_; }

  session_outcome run(std::stop_token stop) {
    started_at_ = clock::now();
    if (auto launched = launch(); !launched) {
      launch_failure_ = launched.error().message();
      return finish();
    }
    asio::co_spawn(io_, main(), asio::detached);
    // A prepared session is held to the ceiling's clock until it is ready, then to the claim's.
    asio::co_spawn(io_, watch_clock(), asio::detached);
    std::stop_callback on_stop(stop, [this] {
      asio::post(io_, [this] {
        cancelled_ = true;
        // A launcher that has not attached yet has been told nothing: it is ended instead.
        if (loopback_ && !control_.is_open() && !launcher_reaped_) kill_launcher();
        send_cancel(protocol::cancel_reason::cancelled);
      });
    });
    io_.run();
    if (handed_over_) return {.handed_over = true};
    return finish();
  }

 private:
  // ---- setting up -----------------------------------------------------------

  /// The streams, the launcher, and its orders. Every descriptor is owned from the moment the
  /// kernel hands it out, so a step that fails leaves nothing open behind it.
  result<void> launch() {
    probe_.open();
    PSYCH_TRY(auto out, output_pipe());
    PSYCH_TRY(auto err, output_pipe());
    PSYCH_TRY(adopt(stdout_, out.first));
    PSYCH_TRY(adopt(stderr_, err.first));
    token_ = random_token();
    launcher_fds fds{.stdout_write = out.second.get(), .stderr_write = err.second.get()};
    launcher_sockets sockets;  // none for a launcher that attaches over loopback
    if (loopback_) {
      PSYCH_TRY(listener_.open());
      fds.attach = loopback_attach_address{listener_.port(), listener_.secret()};
    } else {
      PSYCH_TRY(sockets, socket_pairs(fds));
    }
    PSYCH_TRY(launcher_, starter_.start(fds, dirs_));
    // The launcher's ends are the launcher's now: holding them here would hide its end of file.
    sockets = {};
    out.second.reset();
    err.second.reset();
    unique_os_handle pidfd{launcher_.pidfd};
    if (auto adopted = adopt(pidfd_, pidfd); !adopted) {
      end_launcher();
      return adopted;
    }
    // One that attaches over loopback gets its orders once its control is proven: attach_then_launch().
    if (loopback_) return success();
    const auto frame = protocol::encode_frame(launch_frame());
    boost::system::error_code ec;
    asio::write(control_, asio::buffer(frame), ec);
    if (ec) {
      end_launcher();
      return fail_with(error_kind::launcher_unavailable,
                     "the launcher ended before it read its orders (writing the launch frame: " + ec.message() + ")");
    }
    return success();
  }

#ifdef _WIN32
  struct launcher_sockets {};
  static result<launcher_sockets> socket_pairs(launcher_fds&) {
    return fail_with(error_kind::launcher_unavailable,
                   "on Windows a launcher attaches over loopback: its starter must say attaches_over_loopback()");
  }
#else
  /// The launcher's ends of control and the channel, its fds 3 and 4.
  struct launcher_sockets {
    unique_fd control, channel;
  };
  /// Unix socket pairs for control and the channel: the host's ends to the session's streams, the
  /// launcher's into `fds`.
  result<launcher_sockets> socket_pairs(launcher_fds& fds) {
    PSYCH_TRY(auto control, unix_socket_pair());
    PSYCH_TRY(auto channel, unix_socket_pair());
    const asio::generic::stream_protocol unix_stream(AF_UNIX, 0);
    PSYCH_TRY(adopt(control_, control.first, unix_stream));
    PSYCH_TRY(adopt(channel_, channel.first, unix_stream));
    fds.control = control.second.get();
    fds.channel = channel.second.get();
    return launcher_sockets{std::move(control.second), std::move(channel.second)};
  }
#endif

  /// A launcher that attaches over loopback: its control connection, proven, then its orders.
  /// The wait ends with the launcher (wait_launcher closes the listener) or at the backstop.
  awaitable<bool> attach_then_launch() {
    auto control = co_await listener_.accept(protocol::attached_stream::control);
    if (!control) {
      launch_failure_ = "the launcher never attached: " + control.error().message();
      co_return false;
    }
    control_ = std::move(control).value();
    control_out_.send(launch_frame());
    if (cancelled_) send_cancel(protocol::cancel_reason::cancelled);  // asked for while there was no control to say it on
    co_return true;
  }

  /// The channel, which the launcher connects before it starts the child: after `started` it is
  /// waiting to be accepted. Then the listener closes: no later connection is ever taken.
  awaitable<bool> attach_channel() {
    asio::steady_timer patience(io_, channel_attach_patience);
    patience.async_wait([this](boost::system::error_code ec) {
      if (!ec) listener_.close();
    });
    auto channel = co_await listener_.accept(protocol::attached_stream::channel);
    patience.cancel();
    listener_.close();
    if (!channel) {
      violation("the launcher reported a start without attaching the channel: " + channel.error().message());
      co_return false;
    }
    channel_ = std::move(channel).value();
    co_return true;
  }

  /// A launcher that cannot be given its orders: made sure of, then reaped.
  void end_launcher() {
    kill_launcher();
    reap_launcher(launcher_);
  }

  /// SIGKILL to the launcher, wherever it runs.
  void kill_launcher() {
    child_process::signal_held(launcher_.pid, launcher_.pidfd, ending::kill);
    starter_.kill(launcher_);
  }

  /// What the launcher is told. The environment it names is what grading expects the child to see.
  protocol::launch_frame launch_frame() {
    protocol::launch_frame frame;
    frame.token = token_;
    frame.isolation = plan_->attempt;
    frame.limits = plan_->terms.limits;
    frame.network = plan_->terms.network;
    frame.environment = environment_;
    frame.interpreter = plan_->interpreter;
    frame.workspace = dirs_.workspace;
    frame.tmp_dir = dirs_.tmp;
    frame.canary = dirs_.canary;
    frame.probe = probe_.ports();
    frame.run_as = starter_.sets_identity() ? std::nullopt : plan_->run_as;
    frame.allow_same_uid = plan_->allow_same_uid || starter_.sets_identity();
    frame.prepared = claim_ != nullptr;
    starter_.adapt_launch(frame);
    launched_environment_keys_.clear();
    for (const auto& entry : frame.environment) launched_environment_keys_.push_back(entry.first);
    return frame;
  }

  // ---- the conversation -----------------------------------------------------

  awaitable<void> main() {
    co_await (whole_result() && wait_launcher());
    backstop_.cancel();
    drain_deadline_.cancel();
    exit_report_wait_.cancel();
    claim_wait_.cancel();
    probe_.close();
  }

  /// The conversation and the output to end of file; then a plan that takes its outcome early
  /// gets it now if the launcher reported the tree gone, with nothing of it left.
  awaitable<void> whole_result() {
    co_await (converse() && drain(stdout_, out_) && drain(stderr_, err_));
    if (!hand_over_ || !exit_ || exit_->survivors != 0) co_return;
    auto outcome = finish();
    complete_result(*plan_, dirs_, outcome);
    handed_over_ = true;
    hand_over_(std::move(outcome));
  }

  awaitable<void> converse() {
    if (loopback_ && !co_await attach_then_launch()) co_return;
    frame_reader<stream_socket> control(control_, {.max_frame_bytes = 1u << 20});
    frame_reader<stream_socket> channel(channel_, {});

    auto first = co_await control.next<protocol::started_frame, protocol::launch_error_frame>();
    if (!first || !first.value()) {
      launch_failure_ = first ? "the launcher ended without reporting a start"
                              : "the launcher broke the contract: " + first.error().message();
      send_cancel(protocol::cancel_reason::cancelled);
      co_return;
    }
    if (auto* error = std::get_if<protocol::launch_error_frame>(&*first.value())) {
      launch_failure_ = fmt::format("{}: {}({}): {}", error->stage.spelling(), error->syscall,
                                    error->error_number ? std::strerror(static_cast<int>(error->error_number)) : "-",
                                    error->message);
      co_return;
    }
    outcome_.mechanisms = std::get<protocol::started_frame>(*first.value()).mechanisms;
    starter_.add_mechanisms(*outcome_.mechanisms);
    if (loopback_ && !co_await attach_channel()) {
      co_await read_exit(control);
      co_return;
    }

    if (co_await hello_and_decide(control, channel)) co_await program(channel);
    if (!exit_) co_await read_exit(control);
  }

  /// Reads the child's containment report, grades it, and answers run or
  /// abort. True when the program was sent.
  awaitable<bool> hello_and_decide(frame_reader<stream_socket>& control, frame_reader<stream_socket>& channel) {
    auto hello = co_await channel.next<protocol::hello_frame>();
    if (!hello) {
      violation(hello.error().message());
      co_return false;
    }
    if (!hello.value()) {
      channel_ended();
      co_return false;
    }
    const auto& frame = std::get<protocol::hello_frame>(*hello.value());
    if (frame.token != token_) {
      violation("frame_out_of_sequence: the hello frame does not carry this execution's token");
      co_return false;
    }
    hello_report_ = frame.report;
    grade_ = grade_containment(expectation(), *outcome_.mechanisms, hello_report_);
    note_loopback_exposure(*grade_, plan_->terms.network, probe_.connections());

    if (plan_->probe_only) {
      // describe() runs nothing, but says when a program would be refused, and why: the grade, not
      // a guess that the child never reported.
      if (auto shortfall = isolation_shortfall()) isolation_failure_ = std::move(*shortfall);
      channel_out_.send(protocol::abort_frame{"probe only: describe() never runs a program"});
      co_return false;
    }
    if (!isolation_reached()) co_return false;
    if (claim_) {
      // Prepared: graded against the ceiling; now the wait, then the claim's own limits, observed
      // and graded again before anything of its program is sent.
      if (!co_await claimed()) co_return false;
      if (!co_await narrowed(control, channel)) co_return false;
      if (!isolation_reached()) co_return false;
    }
    outcome_.program_started = true;
    if (plan_->relay)
      plan_->relay->begin([sink = relay_answers_, this](const protocol::result_frame& answer) {
        sink->post([this, answer] {
          if (!relay_ended_) channel_out_.send(answer);
        });
      });
    channel_out_.send(protocol::run_frame{.program = plan_->program,
                                          .filename = plan_->filename,
                                          .bindings = gateway_->bindings_for_run(),
                                          .excluded = binding_gateway::excluded_for_run()});
    co_return true;
  }

  /// Why the grade does not reach the isolation the plan asks for; nullopt when it does.
  std::optional<std::string> isolation_shortfall() const {
    if (grade_->reaches(plan_->terms.isolation)) return std::nullopt;
    std::string why = fmt::format("requested isolation={}, the child's containment reached {}",
                                  name_of(plan_->terms.isolation),
                                  grade_->achieved ? name_of(*grade_->achieved) : "less than process");
    for (const auto& problem : grade_->problems) why.append("; ").append(problem);
    return why;
  }

  /// Whether the grade reaches the isolation the plan asks for; if not, the child is aborted.
  bool isolation_reached() {
    auto shortfall = isolation_shortfall();
    if (!shortfall) return true;
    isolation_failure_ = std::move(*shortfall);
    channel_out_.send(protocol::abort_frame{"isolation_unavailable: " + isolation_failure_});
    return false;
  }

  // ---- a prepared session -----------------------------------------------------

  /// Waits (at most the pool's maximum age) for the request that claims this sandbox, and takes
  /// its plan. False: retired or expired unclaimed, and the child is aborted.
  awaitable<bool> claimed() {
    backstop_.cancel();  // waiting is not running: the clock starts again with the claim
    claim_wait_.expires_after(claim_->max_age());
    claim_->ready([this] { asio::post(io_, [this] { claim_wait_.cancel(); }); });
    boost::system::error_code ec;
    co_await claim_wait_.async_wait(asio::redirect_error(use_awaitable, ec));
    const session_plan* request = claim_->take();
    if (!request) {
      channel_out_.send(protocol::abort_frame{"retired: the prepared sandbox was never claimed"});
      co_return false;
    }
    plan_ = request;
    out_ = stream_capture(request->terms.output.max_bytes);
    err_ = stream_capture(request->terms.output.max_bytes);
    take_calls();
    started_at_ = clock::now();  // the span the wall clock limits starts with the claim
    asio::co_spawn(io_, watch_clock(), asio::detached);
    co_return true;
  }

  /// The claim's limits: the launcher narrows the cgroup and restarts its clock, the child lowers
  /// its rlimits and reports what it then observes, and the grade is made again from that.
  /// A sandbox that ended while it waited is `prepared_lost`: nothing of the program reached it.
  awaitable<bool> narrowed(frame_reader<stream_socket>& control, frame_reader<stream_socket>& channel) {
    control_out_.send(protocol::narrow_frame{plan_->terms.limits});
    auto answer = co_await control.next<protocol::narrowed_frame, protocol::launch_error_frame, protocol::exit_frame>();
    if (!answer || !answer.value()) {
      launch_failure_ = answer ? "the prepared sandbox's launcher ended before it was narrowed"
                               : "the launcher broke the contract: " + answer.error().message();
      outcome_.prepared_lost = answer.has_value();
      send_cancel(protocol::cancel_reason::cancelled);
      co_return false;
    }
    if (auto* error = std::get_if<protocol::launch_error_frame>(&*answer.value())) {
      launch_failure_ = fmt::format("narrowing the prepared sandbox: {}: {}", error->stage.spelling(), error->message);
      co_return false;
    }
    if (auto* exit = std::get_if<protocol::exit_frame>(&*answer.value())) {
      exit_ = *exit;
      launch_failure_ = "the prepared sandbox ended before it was claimed";
      outcome_.prepared_lost = true;
      co_return false;
    }
    const auto& rlimits = std::get<protocol::narrowed_frame>(*answer.value()).rlimits;
    outcome_.mechanisms->rlimits = rlimits;
    channel_out_.send(protocol::lower_limits_frame{rlimits});
    auto lowered = co_await channel.next<protocol::lowered_frame>();
    if (!lowered) {
      violation(lowered.error().message());
      co_return false;
    }
    if (!lowered.value()) {
      launch_failure_ = "the prepared child ended instead of lowering its limits";
      outcome_.prepared_lost = true;
      channel_ended();
      co_return false;
    }
    const auto& observed = std::get<protocol::lowered_frame>(*lowered.value());
    hello_report_.rlimits = observed.rlimits;
    hello_report_.cgroup_memory_limit = observed.cgroup_memory_limit;
    hello_report_.cgroup_pids_limit = observed.cgroup_pids_limit;
    grade_ = grade_containment(expectation(), *outcome_.mechanisms, hello_report_);
    note_loopback_exposure(*grade_, plan_->terms.network, probe_.connections());
    co_return true;
  }

  /// The calls' gateway and dispatcher, for the plan that runs: at once, or when claimed.
  void take_calls() {
    gateway_.emplace(plan_->bindings);
    calls_.emplace(io_, *gateway_, plan_->bindings.run.execution_id,
                   [this](const protocol::result_frame& answer) { channel_out_.send(answer); });
  }

  /// The program's frames until its `done`: calls go to the dispatcher as they arrive.
  awaitable<void> program(frame_reader<stream_socket>& channel) {
    for (;;) {
      auto frame = co_await channel.next<protocol::done_frame, protocol::call_frame, protocol::cancel_call_frame>();
      if (!frame) {
        violation(frame.error().message());
        break;
      }
      if (!frame.value()) {
        channel_ended();
        break;
      }
      if (const auto* call = std::get_if<protocol::call_frame>(&*frame.value())) {
        if (plan_->relay) plan_->relay->call(*call);
        else calls_->dispatch(*call);
      } else if (const auto* cancel = std::get_if<protocol::cancel_call_frame>(&*frame.value())) {
        if (plan_->relay) plan_->relay->cancel_call(cancel->id);
        else calls_->give_up(cancel->id);
      } else {
        done_ = std::get<protocol::done_frame>(*frame.value());
        break;
      }
    }
    if (plan_->relay) {
      // The client's gateway ends its own calls and records them; nothing here waits for them.
      relay_ended_ = true;
      plan_->relay->end();
      co_return;
    }
    const auto problems = co_await calls_->end_calls();
    outcome_.result.problems.insert(outcome_.result.problems.end(), problems.begin(), problems.end());
  }

  awaitable<void> read_exit(frame_reader<stream_socket>& control) {
    auto frame = co_await control.next<protocol::exit_frame>();
    exit_report_wait_.cancel();  // the launcher has said how it ended, or never will: nothing to cancel
    if (frame && frame.value()) exit_ = std::get<protocol::exit_frame>(*frame.value());
    else if (!frame) launcher_problem_ = "the launcher's exit report broke the contract: " + frame.error().message();
    else launcher_problem_ = "the launcher ended without an exit report";
  }

  /// End of file on the channel before `done`: no result can arrive any more, so the tree is
  /// ended now rather than at the wall clock — once the launcher has had exit_report_grace to
  /// report an interpreter that is already dead, so that the report says how it died.
  void channel_ended() {
    channel_closed_ = true;
    exit_report_wait_.expires_after(exit_report_grace);
    exit_report_wait_.async_wait([this](boost::system::error_code ec) {
      if (!ec) send_cancel(protocol::cancel_reason::cancelled);
    });
  }

  void violation(std::string what) {
    if (!violation_) violation_ = std::move(what);
    send_cancel(protocol::cancel_reason::cancelled);
  }

  void send_cancel(protocol::cancel_reason reason) {
    if (cancel_sent_ || !control_.is_open()) return;
    cancel_sent_ = true;
    control_out_.send(protocol::cancel_frame{reason});
  }

  // ---- output, the launcher's lifetime, the clock ---------------------------

  static awaitable<void> drain(pipe_stream& pipe, stream_capture& capture) {
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
    co_await async_wait_exit(pidfd_, asio::redirect_error(use_awaitable, ec));
    launcher_status_ = reap_launcher(launcher_);
    starter_.reaped(launcher_status_);
    launcher_reaped_ = true;
    listener_.close();  // a launcher that has ended attaches nothing more
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
    const auto wall = std::chrono::duration<double>(plan_->terms.limits.wall_seconds.value);
    backstop_.expires_after(std::chrono::duration_cast<clock::duration>(wall) + backstop_grace);
    boost::system::error_code ec;
    co_await backstop_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
    backstop_fired_ = true;
    send_cancel(protocol::cancel_reason::timeout);
    backstop_.expires_after(kill_grace);
    co_await backstop_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || launcher_reaped_) co_return;
    kill_launcher();
    launcher_problem_ = "the launcher did not end the execution at its wall clock and was killed";
  }

  // ---- grading and the result ----------------------------------------------

  /// This process's namespace ids, as the child reports its own: "mnt" -> "mnt:[4026531841]".
  static std::map<std::string, std::string> own_namespace_ids() {
    std::map<std::string, std::string> ids;
#ifndef _WIN32  // Windows has no namespaces to compare the child's with (Linux's /proc only, in fact)
    for (const char* kind : {"mnt", "pid", "net", "user", "ipc", "uts", "cgroup"}) {
      char target[128];
      const auto path = fmt::format("/proc/self/ns/{}", kind);
      const ssize_t n = ::readlink(path.c_str(), target, sizeof target);
      if (n > 0) ids.emplace(kind, std::string(target, static_cast<std::size_t>(n)));
    }
#endif
    return ids;
  }

  grading_expectation expectation() const {
    grading_expectation e;
    e.requested = plan_->terms.isolation;
    e.limits = plan_->terms.limits;
    e.network = plan_->terms.network;
    if (plan_->run_as) e.run_as_uid = plan_->run_as->uid, e.run_as_gid = plan_->run_as->gid;
#ifdef _WIN32
    e.worker_uid = -1;  // Windows has no uids: its launcher runs the child as the worker's own account
#else
    e.worker_uid = ::getuid();
#endif
    // As the launch named them: a starter may name the execution's directories otherwise.
    e.environment_keys = launched_environment_keys_;
    e.host_namespace_ids = own_namespace_ids();
    return e;
  }

  /// What happened, for the failure decision.
  execution_facts facts() const {
    execution_facts f;
    f.launch_failure = launch_failure_;
    f.isolation_failure = isolation_failure_;
    f.violation = violation_;
    f.probe_only = plan_->probe_only;
    f.cancelled = cancelled_;
    f.backstop_fired = backstop_fired_;
    f.wall_seconds = plan_->terms.limits.wall_seconds.value;
    if (done_) f.done = report_of(*done_);
    f.channel_closed = channel_closed_;
    if (exit_) f.exit = exit_of(*exit_);
    return f;
  }

  session_outcome finish() {
    auto& r = outcome_.result;
    if (grade_) {
      note_loopback_exposure(*grade_, plan_->terms.network, probe_.connections());
      if (exit_) grade_exit(*grade_, exit_->survivors);
      r.isolation = grade_->achieved;
      r.guarantees = grade_->grades;
      r.network_denied = grade_->network_denied;
      r.problems.insert(r.problems.begin(), grade_->problems.begin(), grade_->problems.end());
    }
    if (launcher_status_ != 0 && !exit_ && launcher_problem_.empty())
      launcher_problem_ = fmt::format("the launcher exited with status {}", launcher_status_);
    if (!launcher_problem_.empty()) r.problems.push_back(launcher_problem_);
    r.cancelled = cancelled_;
    if (gateway_) {
      r.bindings_spent = gateway_->spent();
      r.problems.insert(r.problems.end(), gateway_->problems().begin(), gateway_->problems().end());
    }
    // The whole execution, interpreter start included: the span the wall clock limits.
    r.duration_seconds = std::chrono::duration<double>(clock::now() - started_at_).count();
    // The clock is graded by what happened, too: an execution that outlived its
    // wall clock and both graces was not held to it.
    const double held_to = plan_->terms.limits.wall_seconds.value +
                           std::chrono::duration<double>(backstop_grace + kill_grace + drain_grace).count();
    if (r.duration_seconds > held_to) {
      r.guarantees.wall_clock = enforcement::unavailable;
      r.problems.push_back(fmt::format("wall_clock: the execution took {:.1f} s against a limit of {} s",
                                       r.duration_seconds, plan_->terms.limits.wall_seconds.value));
    }

    const auto& policy = plan_->terms.output;
    r.stdout_size = out_.produced();
    r.stderr_size = err_.produced();
    r.stdout_data = out_.take();
    r.stderr_data = err_.take();
    r.stdout_preview = make_preview(r.stdout_data, r.stdout_size, policy.preview_bytes);
    r.stderr_preview = make_preview(r.stderr_data, r.stderr_size, policy.preview_bytes);

    auto decided = decide_failure(facts());
    r.failure = std::move(decided.failure);
    r.limit_hit = decided.limit_hit;
    r.value = std::move(decided.value);
    return std::move(outcome_);
  }

  const session_plan* plan_;  ///< a prepared session's becomes the claim's
  const std::function<void(session_outcome&&)> hand_over_;  ///< the given plan's: the claim's caller
  bool handed_over_ = false;
  claim_point* claim_;
  const execution_dirs& dirs_;
  local_launcher local_launcher_;  ///< used when the plan names no starter of its own
  launcher_starter& starter_;
  asio::io_context io_;
  stream_socket control_, channel_;
  pipe_stream stdout_, stderr_;
  exit_watch pidfd_;
  frame_writer<stream_socket> control_out_, channel_out_;
  loopback_probe probe_;
  asio::steady_timer backstop_, drain_deadline_, exit_report_wait_, claim_wait_;
  attach_listener listener_;  ///< where a launcher that attaches over loopback connects
  const bool loopback_;
  stream_capture out_, err_;
  std::map<std::string, std::string> environment_;
  std::vector<std::string> launched_environment_keys_;  ///< set by launch_frame()
  std::optional<binding_gateway> gateway_;  ///< made with the plan that runs (take_calls)
  std::optional<call_dispatcher> calls_;
  std::shared_ptr<completion_sink> relay_answers_ = std::make_shared<completion_sink>(io_);
  bool relay_ended_ = false;

  launcher_process launcher_;
  std::string token_;
  clock::time_point started_at_;
  session_outcome outcome_;
  std::optional<containment_grade> grade_;
  child_report hello_report_;  ///< what the child observed; a prepared one's limits as lowered
  std::optional<protocol::done_frame> done_;
  std::optional<protocol::exit_frame> exit_;
  std::optional<std::string> violation_;
  std::string launch_failure_, isolation_failure_, launcher_problem_;
  int launcher_status_ = 0;
  bool cancelled_ = false, cancel_sent_ = false, backstop_fired_ = false, launcher_reaped_ = false;
  bool channel_closed_ = false;
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
    result.artifacts_omitted_by_reason[reason] = count;
}

void complete_result(const session_plan& plan, const execution_dirs& dirs, session_outcome& outcome) {
  // The tree is gone: nothing races the walk but what the kernel already holds.
  if (outcome.program_started && plan.terms.artifacts.collection == artifact_collection::collect)
    collect_into(outcome.result, dirs.workspace, plan.terms.artifacts);
  attach_items(outcome.result, plan.terms.output, plan.blobs, plan.tenant, {plan.bindings.budget, plan.bindings.run});
}

/// The execution's directories removed and, below ISOLATED, what it left in the shared temp
/// directories swept; a problem doing so goes into `outcome`.
void sweep_after(const session_plan& plan, const execution_dirs& dirs, session_outcome& outcome) {
  if (!remove_execution_dirs(dirs))
    outcome.result.problems.push_back(
        fmt::format("workspace: the host could not remove everything under {}", dirs.base));
  // ISOLATED: the program saw no shared temp directory of the host (its /tmp is its own tmpfs,
  // its message queues its own ipc namespace's), so there is nothing of it to sweep.
  if (plan.run_as && plan.attempt != isolation_level::isolated) sweep_shared_temp(plan.run_as->uid);
}

}  // namespace

bool claim_point::wait_ready() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return state_ != state::preparing; });
  return state_ == state::ready;
}

bool claim_point::claim(const session_plan& request) {
  std::unique_lock lock(mutex_);
  if (state_ != state::ready) return false;
  state_ = state::claimed;
  request_ = &request;
  auto wake = std::move(wake_);
  lock.unlock();
  wake();
  return true;
}

void claim_point::retire() {
  std::unique_lock lock(mutex_);
  const bool waiting = state_ == state::ready;
  if (state_ == state::preparing || waiting) state_ = state::retired;
  auto wake = waiting ? std::move(wake_) : std::function<void()>{};
  lock.unlock();
  if (wake) wake();
}

bool claim_point::waiting() const {
  std::lock_guard lock(mutex_);
  return state_ == state::ready;
}

std::string claim_point::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void claim_point::ready(std::function<void()> wake) {
  std::unique_lock lock(mutex_);
  if (state_ != state::preparing) {  // retired while it was being prepared: end at once
    lock.unlock();
    wake();
    return;
  }
  state_ = state::ready;
  wake_ = std::move(wake);
  changed_.notify_all();
}

const session_plan* claim_point::take() {
  std::lock_guard lock(mutex_);
  if (state_ == state::claimed) return request_;
  state_ = state::retired;
  wake_ = nullptr;
  return nullptr;
}

void claim_point::ended(std::string why) {
  std::lock_guard lock(mutex_);
  if (state_ == state::preparing) failure_ = why.empty() ? "the prepared sandbox ended before it was ready" : std::move(why);
  if (state_ != state::claimed) state_ = state::ended;
  wake_ = nullptr;
  changed_.notify_all();
}

session_outcome run_session(const session_plan& plan, std::stop_token stop) {
  const auto handed = [&plan](session_outcome outcome) {
    if (!plan.hand_over) return outcome;
    plan.hand_over(std::move(outcome));
    return session_outcome{.handed_over = true};
  };
  auto dirs = make_execution_dirs(plan.temp_root);
  if (!dirs) {
    session_outcome outcome;
    outcome.result.failure = sandbox_failure{failure_kind::launch_failed, dirs.error().message()};
    if (plan.claim) plan.claim->ended(outcome.result.failure->message);
    return handed(std::move(outcome));
  }
  session_outcome outcome;
  // What the clean-up reads: a prepared session's claim's plan, until its outcome was handed over
  // (the claimant may have returned and taken its plan with it); then the prepared plan, which
  // launched the same identity into the same root.
  const session_plan* ran = &plan;
  try {
    session s(plan, dirs.value());
    outcome = s.run(std::move(stop));
    if (!outcome.handed_over) ran = &s.plan();
  } catch (const boost::system::system_error& error) {
    // Asio's event loop refuses to exist only when the process is out of descriptors or memory:
    // nothing was started, and that is this execution's failure, not the caller's exception.
    outcome.result.failure = sandbox_failure{failure_kind::launch_failed, fmt::format("the event loop: {}", error.what())};
  }
  if (plan.claim)
    plan.claim->ended(outcome.result.failure ? outcome.result.failure->message
                                             : std::string("the prepared sandbox ended before it was ready"));
  if (outcome.handed_over) {  // the caller has its result: the sweep is this thread's alone
    sweep_after(*ran, dirs.value(), outcome);
    return outcome;
  }
  complete_result(*ran, dirs.value(), outcome);
  sweep_after(*ran, dirs.value(), outcome);
  return handed(std::move(outcome));
}

}  // namespace psych::host

#include "supervise.hpp"

#include <cerrno>
#include <csignal>
#include <variant>

#include <poll.h>
#include <sys/wait.h>

#include "signals.hpp"

namespace psych::launcher {

namespace {

using clock = std::chrono::steady_clock;

constexpr long long cpu_check_ms = 100;

double seconds(const timeval& value) {
  return static_cast<double>(value.tv_sec) + static_cast<double>(value.tv_usec) / 1e6;
}

/// Why the launcher ended the execution itself, if it did.
struct verdict {
  bool ended = false;
  bool cancelled = false;
  bool host_gone = false;
  std::optional<limit_name> limit_hit;
};

/// The clock and the CPU allowance the launcher holds the execution to. A prepared launch has
/// no clock until it is narrowed.
struct clock_state {
  clock::time_point started;
  std::optional<clock::time_point> deadline;
  double cpu_seconds = 0;
  bool awaiting_narrow = false;
};

clock::time_point deadline_after(clock::time_point from, double seconds) {
  return from + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
}

/// `narrow` on a prepared launch: the narrowing, the restarted clock and the `narrowed` answer.
/// A narrowing that fails ends the execution before the program could have been sent.
void narrow_once(control_channel& control, const watch& what, const protocol::narrow_frame& frame,
                 clock_state& timing, verdict& why) {
  auto narrowed = what.narrow(frame.limits);
  if (!narrowed) {
    (void)control.write(narrowed.error());
    why = verdict{.ended = true, .cancelled = true};
    return;
  }
  timing.awaiting_narrow = false;
  timing.started = clock::now();
  timing.deadline = deadline_after(timing.started, frame.limits.wall_seconds.value);
  timing.cpu_seconds = frame.limits.cpu_seconds.value;
  if (!control.write(protocol::narrowed_frame{narrowed.value()})) why = verdict{.ended = true, .cancelled = true};
}

/// Acts on the next whole frame the host sent, if any: `cancel`, or on a prepared launch one
/// `narrow`. Anything else on control is the host breaking the contract, and a host that does
/// that cannot be trusted to cancel later, so the execution ends as if cancelled.
void handle_next_frame(control_channel& control, const watch& what, clock_state& timing, verdict& why) {
  const auto line = control.next_line();
  if (!line) return;
  const auto frame =
      protocol::decode_frame<protocol::launch_frame, protocol::cancel_frame, protocol::narrow_frame>(*line);
  if (frame && timing.awaiting_narrow) {
    if (const auto* narrow = std::get_if<protocol::narrow_frame>(&frame.value())) {
      narrow_once(control, what, *narrow, timing, why);
      return;
    }
  }
  const auto* cancel = frame ? std::get_if<protocol::cancel_frame>(&frame.value()) : nullptr;
  const bool timeout = cancel != nullptr && cancel->reason == protocol::cancel_reason::timeout;
  why = verdict{.ended = true,
                .cancelled = true,
                .limit_hit = timeout ? std::optional(limit_name::wall_seconds) : std::nullopt};
}

/// One read from control, then its lines. EOF means the host is gone.
void read_control(control_channel& control, const watch& what, clock_state& timing, verdict& why) {
  auto more = control.receive();
  if (more && !more.value()) {
    why = verdict{.ended = true, .cancelled = true, .host_gone = true};
    return;
  }
  while (!why.ended && control.has_line()) handle_next_frame(control, what, timing, why);
  if (!more && !why.ended) why = verdict{.ended = true, .cancelled = true};  // an unbounded or broken stream
}

}  // namespace

supervision supervise(control_channel& control, const watch& what) {
  clock_state timing{.started = what.started, .deadline = std::nullopt, .cpu_seconds = what.cpu_seconds,
                     .awaiting_narrow = static_cast<bool>(what.narrow)};
  if (!timing.awaiting_narrow) timing.deadline = deadline_after(what.started, what.wall_seconds);
  child_exit ended;
  verdict why;
  // A cancel (or a narrow) may have arrived in the same read as the launch.
  while (!why.ended && control.has_line()) handle_next_frame(control, what, timing, why);
  while (!ended.reaped && !why.ended) {
    constexpr long long unbounded_ms = 1 << 30;
    const auto left = timing.deadline
                          ? std::chrono::ceil<std::chrono::milliseconds>(*timing.deadline - clock::now()).count()
                          : unbounded_ms;
    if (left <= 0) {
      why = verdict{.ended = true, .limit_hit = limit_name::wall_seconds};
      break;
    }
    if (what.tree_cpu_seconds) {
      if (const auto used = what.tree_cpu_seconds(); used && *used >= timing.cpu_seconds) {
        why = verdict{.ended = true, .limit_hit = limit_name::cpu_seconds};
        break;
      }
    }
    // With a tree-wide CPU budget, wake often enough to end it within a tenth of a second.
    const long long wait = what.tree_cpu_seconds ? std::min<long long>(left, cpu_check_ms) : left;
    pollfd watched[2] = {{control.fd(), POLLIN, 0}, {what.signals.fd, POLLIN, 0}};
    const int ready = ::poll(watched, 2, static_cast<int>(wait));
    if (ready < 0) {
      if (errno == EINTR) continue;
      why = verdict{.ended = true, .cancelled = true};  // cannot watch any more: do not leave it running
      break;
    }
    if (watched[1].revents != 0) {
      if (what.signals.drain().termination) why = verdict{.ended = true, .cancelled = true};
      reap_ended(what.interpreter, ended);
    }
    if (watched[0].revents != 0 && !why.ended) read_control(control, what, timing, why);
  }

  const sweep_result sweep = kill_tree(what.interpreter, ended, what.signals, *what.tree);
  std::int64_t left_in_namespace = 0;
  if (what.init_reported && ended.reaped) {
    // Init outlived the interpreter only to say how it ended; its own status says nothing.
    if (const auto report = what.init_reported()) {
      ended.status = report->status;
      ended.usage = report->usage;
      left_in_namespace = report->leftovers;
    }
  }

  protocol::exit_frame exit;
  exit.cancelled = why.cancelled;
  exit.limit_hit = why.limit_hit;
  exit.killed = sweep.killed + left_in_namespace;
  exit.survivors = sweep.survivors;
  if (ended.reaped) {
    if (WIFEXITED(ended.status)) exit.exit_code = WEXITSTATUS(ended.status);
    if (WIFSIGNALED(ended.status)) exit.signal = WTERMSIG(ended.status);
    exit.user_seconds = seconds(ended.usage.ru_utime);
    exit.system_seconds = seconds(ended.usage.ru_stime);
#ifdef __APPLE__
    exit.max_rss_bytes = static_cast<std::int64_t>(ended.usage.ru_maxrss);  // bytes on macOS
#else
    exit.max_rss_bytes = static_cast<std::int64_t>(ended.usage.ru_maxrss) * 1024;  // KiB on Linux
#endif
    exit.wall_seconds = std::chrono::duration<double>(ended.at - timing.started).count();
    // RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one for a child that caught it.
    // Judged by the status even when a cancel ended the watch: the host cancels as soon as the
    // channel closes, which an interpreter dying of its limit does just before it is reaped.
    if (!why.limit_hit && WIFSIGNALED(ended.status)) {
      const int signal = WTERMSIG(ended.status);
      if (signal == SIGXCPU ||
          (signal == SIGKILL && exit.user_seconds + exit.system_seconds >= timing.cpu_seconds))
        exit.limit_hit = limit_name::cpu_seconds;
    }
  } else {
    exit.wall_seconds = std::chrono::duration<double>(clock::now() - timing.started).count();
  }
  return supervision{std::move(exit), why.host_gone};
}

}  // namespace psych::launcher

#include "supervise.hpp"

#include <cerrno>
#include <csignal>
#include <variant>

#include <poll.h>
#include <sys/wait.h>

#include "isolated.hpp"
#include "signals.hpp"
#include "tree.hpp"

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

/// Acts on the next whole frame the host sent, if any. Only `cancel` is meaningful here;
/// anything else on control is the host breaking the contract, and a host that does that cannot
/// be trusted to cancel later, so the execution ends as if cancelled.
void handle_next_frame(control_channel& control, verdict& why) {
  const auto line = control.next_line();
  if (!line) return;
  const auto frame = protocol::decode_frame<protocol::launch_frame, protocol::cancel_frame>(*line);
  const auto* cancel = frame ? std::get_if<protocol::cancel_frame>(&frame.value()) : nullptr;
  const bool timeout = cancel != nullptr && cancel->reason == "timeout";
  why = verdict{.ended = true,
                .cancelled = true,
                .limit_hit = timeout ? std::optional(limit_name::wall_seconds) : std::nullopt};
}

/// One read from control, then its lines. EOF means the host is gone.
void read_control(control_channel& control, verdict& why) {
  auto more = control.receive();
  if (more && !more.value()) {
    why = verdict{.ended = true, .cancelled = true, .host_gone = true};
    return;
  }
  handle_next_frame(control, why);
  if (!more && !why.ended) why = verdict{.ended = true, .cancelled = true};  // an unbounded or broken stream
}

}  // namespace

supervision supervise(control_channel& control, const watch& what) {
  const auto deadline =
      what.started + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(what.wall_seconds));
  child_exit ended;
  verdict why;
  handle_next_frame(control, why);  // a cancel may have arrived in the same read as the launch
  while (!ended.reaped && !why.ended) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) {
      why = verdict{.ended = true, .limit_hit = limit_name::wall_seconds};
      break;
    }
    if (what.tree_cpu_seconds) {
      if (const auto used = what.tree_cpu_seconds(); used && *used >= what.cpu_seconds) {
        why = verdict{.ended = true, .limit_hit = limit_name::cpu_seconds};
        break;
      }
    }
    // With a tree-wide CPU budget, wake often enough to end it within a tenth of a second.
    const long long wait = what.tree_cpu_seconds ? std::min<long long>(left, cpu_check_ms) : std::min<long long>(left, 1 << 30);
    pollfd watched[2] = {{control.fd(), POLLIN, 0}, {what.signal_fd, POLLIN, 0}};
    const int ready = ::poll(watched, 2, static_cast<int>(wait));
    if (ready < 0) {
      if (errno == EINTR) continue;
      why = verdict{.ended = true, .cancelled = true};  // cannot watch any more: do not leave it running
      break;
    }
    if (watched[1].revents != 0) {
      if (drain_signal_fd(what.signal_fd).termination) why = verdict{.ended = true, .cancelled = true};
      reap_ended(what.interpreter, ended);
    }
    if (watched[0].revents != 0 && !why.ended) read_control(control, why);
  }

  const sweep_result sweep = kill_tree(what.interpreter, ended, what.signal_fd);
  std::int64_t left_in_namespace = 0;
  if (what.init_report_fd >= 0 && ended.reaped) {
    // Init outlived the interpreter only to say how it ended; its own status says nothing.
    if (const auto report = read_init_report(what.init_report_fd)) {
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
    exit.max_rss_bytes = static_cast<std::int64_t>(ended.usage.ru_maxrss) * 1024;  // KiB on Linux
    exit.wall_seconds = std::chrono::duration<double>(ended.at - what.started).count();
    // RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one for a child that caught it.
    // Judged by the status even when a cancel ended the watch: the host cancels as soon as the
    // channel closes, which an interpreter dying of its limit does just before it is reaped.
    if (!why.limit_hit && WIFSIGNALED(ended.status)) {
      const int signal = WTERMSIG(ended.status);
      if (signal == SIGXCPU ||
          (signal == SIGKILL && exit.user_seconds + exit.system_seconds >= what.cpu_seconds))
        exit.limit_hit = limit_name::cpu_seconds;
    }
  } else {
    exit.wall_seconds = std::chrono::duration<double>(clock::now() - what.started).count();
  }
  return supervision{std::move(exit), why.host_gone};
}

}  // namespace psych::launcher

#include "supervise.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <variant>

#include <psapi.h>

namespace psych::windows {

namespace {

using clock_type = std::chrono::steady_clock;

/// How long the launcher waits for the job's accounting to count no process after ending it.
constexpr DWORD empty_tree_patience_ms = 5000;

/// Why supervision stopped waiting.
enum class ending { child_exited, wall_clock, cancelled, cancelled_for_timeout, host_gone };

/// The control frames that arrived: a `cancel` names its reason; anything else is a host breaking
/// the contract, which ends the execution as a cancel too.
ending ending_for(const std::string& line) {
  auto frame = protocol::decode_frame<protocol::cancel_frame>(line, {.max_bytes = control_frame_bytes});
  if (frame && std::get<protocol::cancel_frame>(frame.value()).reason == protocol::cancel_reason::timeout)
    return ending::cancelled_for_timeout;
  return ending::cancelled;
}

/// Waits until the child exits, the wall clock runs out, or control says something.
setup_result<ending> wait_for_ending(control_channel& control, HANDLE process, clock_type::time_point deadline) {
  const HANDLE readable = ::WSACreateEvent();
  if (readable == WSA_INVALID_EVENT)
    return fail(system_failure(launch_stage::supervise, "WSACreateEvent", static_cast<DWORD>(::WSAGetLastError())));
  struct event_closer {
    HANDLE event;
    ~event_closer() { ::WSACloseEvent(event); }
  } closer{readable};
  if (::WSAEventSelect(control.socket(), readable, FD_READ | FD_CLOSE) != 0)
    return fail(system_failure(launch_stage::supervise, "WSAEventSelect", static_cast<DWORD>(::WSAGetLastError()), "control"));
  const HANDLE waited[] = {process, readable};
  // A frame that came in the same read as `launch` is queued already; no event will announce it.
  if (auto line = control.next_line()) return ending_for(*line);
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now()).count();
    const DWORD result = ::WaitForMultipleObjects(2, waited, FALSE, static_cast<DWORD>(std::max<long long>(left, 0)));
    if (result == WAIT_OBJECT_0) return ending::child_exited;
    if (result == WAIT_TIMEOUT) return ending::wall_clock;
    if (result != WAIT_OBJECT_0 + 1) return fail(last_error(launch_stage::supervise, "WaitForMultipleObjects"));
    ::WSAResetEvent(readable);
    PSYCH_TRY(const bool open, control.receive());
    if (auto line = control.next_line()) return ending_for(*line);
    if (!open) return ending::host_gone;
  }
}

double seconds_between(clock_type::time_point from, clock_type::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

/// The child's own user CPU time reached the per-process limit the job read back.
bool process_cpu_limit_reached(HANDLE process, std::int64_t limit_seconds) {
  FILETIME created, exited, kernel, user;
  if (limit_seconds <= 0 || !::GetProcessTimes(process, &created, &exited, &kernel, &user)) return false;
  const auto ticks = (static_cast<std::uint64_t>(user.dwHighDateTime) << 32) | user.dwLowDateTime;
  return static_cast<double>(ticks) / 1e7 >= static_cast<double>(limit_seconds);
}

}  // namespace

setup_result<supervision_outcome> supervise(control_channel& control, const started_child& child,
                                            const execution_job& job, double wall_seconds) {
  const auto start = clock_type::now();
  const auto deadline = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(wall_seconds));
  PSYCH_TRY(const auto why, wait_for_ending(control, child.process.get(), deadline));
  const auto ended = clock_type::now();

  PSYCH_TRY(const auto descendants, job.descendants_of(child.pid));
  const std::int64_t survivors = job.kill_and_verify_empty(empty_tree_patience_ms);
  ::WaitForSingleObject(child.process.get(), empty_tree_patience_ms);
  PSYCH_TRY(const auto after, job.accounting());

  supervision_outcome outcome;
  outcome.host_gone = why == ending::host_gone;
  auto& exit = outcome.exit;
  DWORD code = 0;
  exit.exit_code = ::GetExitCodeProcess(child.process.get(), &code) ? static_cast<std::int64_t>(code) : -1;
  exit.user_seconds = after.user_seconds;
  exit.system_seconds = after.kernel_seconds;
  PROCESS_MEMORY_COUNTERS memory{};
  if (::K32GetProcessMemoryInfo(child.process.get(), &memory, sizeof memory))
    exit.max_rss_bytes = static_cast<std::int64_t>(memory.PeakWorkingSetSize);
  exit.wall_seconds = seconds_between(start, ended);
  exit.cancelled = why == ending::cancelled || why == ending::cancelled_for_timeout;
  exit.killed = descendants;
  exit.survivors = survivors;
  // The CPU limit wins over a cancel that arrived as the job ended the tree for it.
  if (job.cpu_limit_reached(after) ||
      process_cpu_limit_reached(child.process.get(), job.read_back().per_process.cpu_seconds))
    exit.limit_hit = limit_name::cpu_seconds;
  else if (why == ending::wall_clock || why == ending::cancelled_for_timeout)
    exit.limit_hit = limit_name::wall_seconds;
  return outcome;
}

}  // namespace psych::windows

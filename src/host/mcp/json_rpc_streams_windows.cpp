// json_rpc_streams.hpp on Windows: overlapped pipe ends, one read in flight per stream and one
// write, each with its own manual-reset event, and WaitForMultipleObjects in place of poll().
//
// Reading: a stream is ready when its read has completed (or the stream ended); draining takes that
// read's bytes and starts the next, and goes on while reads complete at once. Writing: a write is
// begun whole and counted when it completes; at its deadline, or when the writer is woken, it is
// cancelled, and what it had written by then is counted (a pipe write can end part way).
#include "mcp/json_rpc_streams.hpp"

#include <windows.h>

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "platform/windows/text.hpp"  // error_text

namespace psych::host {
namespace {

using steady = std::chrono::steady_clock;

windows::unique_handle manual_reset_event() { return windows::unique_handle{::CreateEventW(nullptr, TRUE, FALSE, nullptr)}; }

bool signalled(HANDLE event) { return ::WaitForSingleObject(event, 0) == WAIT_OBJECT_0; }

DWORD wait_ms(steady::time_point deadline) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - steady::now()).count();
  return static_cast<DWORD>(std::clamp<std::chrono::milliseconds::rep>(ms, 0, 60'000));
}

}  // namespace

/// One stream read with one ReadFile in flight at a time. (Not in the anonymous namespace: the
/// streams' state, which has external linkage, holds two.)
struct overlapped_reader {
  unique_os_handle handle;
  windows::unique_handle event = manual_reset_event();
  OVERLAPPED overlapped{};
  std::string buffer = std::string(std::size_t{64} << 10, '\0');
  bool in_flight = false;
  std::optional<DWORD> completed;  ///< bytes of a read done and not yet taken
  bool ended = false;              ///< end of file, or an error: nothing more comes

  [[nodiscard]] bool valid() const { return handle.valid(); }

  /// Starts a read unless one is in flight, done and untaken, or the stream ended.
  void start() {
    if (!valid() || in_flight || completed || ended) return;
    ::ResetEvent(event.get());
    overlapped = OVERLAPPED{};
    overlapped.hEvent = event.get();
    if (::ReadFile(handle.get(), buffer.data(), static_cast<DWORD>(buffer.size()), nullptr, &overlapped) ||
        ::GetLastError() == ERROR_IO_PENDING) {
      in_flight = true;
      collect();
      return;
    }
    ended = true;  // ERROR_BROKEN_PIPE: every writer is gone
  }

  /// Takes the read in flight if it is done, without waiting.
  void collect() {
    if (!in_flight) return;
    DWORD got = 0;
    if (::GetOverlappedResult(handle.get(), &overlapped, &got, FALSE)) {
      in_flight = false;
      completed = got;
    } else if (::GetLastError() != ERROR_IO_INCOMPLETE) {
      in_flight = false;
      ended = true;
    }
  }

  /// Ready for drain: a read done, or the end.
  bool ready() {
    start();
    collect();
    return completed.has_value() || ended;
  }

  peer_streams::drained drain(const peer_streams::sink& to) {
    for (int round = 0; round < 16;) {
      start();
      collect();
      if (completed) {
        const DWORD got = *completed;
        completed.reset();
        ++round;
        if (got > 0 && !to(std::string_view{buffer.data(), got})) return peer_streams::drained::ended;
        continue;
      }
      return ended ? peer_streams::drained::ended : peer_streams::drained::empty;
    }
    return peer_streams::drained::more;
  }

  /// A read still in flight is cancelled and waited for: its buffer and OVERLAPPED are ours.
  void cancel() {
    if (!in_flight) return;
    ::CancelIoEx(handle.get(), &overlapped);
    DWORD got = 0;
    ::GetOverlappedResult(handle.get(), &overlapped, &got, TRUE);
    in_flight = false;
  }
};

struct peer_streams::impl {
  overlapped_reader input, side;
  bool side_watched = true;
  HANDLE gone = nullptr;  ///< not owned
  windows::unique_handle wake_reader = manual_reset_event(), wake_writer = manual_reset_event();

  unique_os_handle output;
  windows::unique_handle write_event = manual_reset_event();
  OVERLAPPED write_overlapped{};
  std::string write_buffer;
  bool write_in_flight = false;
  std::optional<write_attempt> write_resolved;  ///< a cancelled write's outcome, for the next try_write

  ~impl() {
    input.cancel();
    side.cancel();
    cancel_write();
  }

  write_attempt write_outcome(BOOL done, DWORD written) {
    if (done) return {.bytes = written, .would_block = written == 0};
    const DWORD error = ::GetLastError();
    if (error == ERROR_OPERATION_ABORTED) return {.bytes = written, .would_block = written == 0};
    return {.failed = windows::error_text(error)};
  }

  /// Cancels the write in flight and keeps what it came to for the next try_write.
  void cancel_write() {
    if (!write_in_flight) return;
    ::CancelIoEx(output.get(), &write_overlapped);
    DWORD written = 0;
    const BOOL done = ::GetOverlappedResult(output.get(), &write_overlapped, &written, TRUE);
    write_resolved = write_outcome(done, written);
    write_in_flight = false;
  }
};

peer_streams::peer_streams(std::unique_ptr<impl> state) : impl_{std::move(state)} {}
peer_streams::~peer_streams() = default;

result<std::unique_ptr<peer_streams>> peer_streams::open(os_handle input, os_handle output, os_handle side,
                                                         os_handle gone) {
  auto state = std::make_unique<impl>();
  state->input.handle.reset(input);
  state->side.handle.reset(side);
  state->output.reset(output);
  state->gone = gone;
  for (const auto* event : {&state->input.event, &state->side.event, &state->wake_reader, &state->wake_writer,
                            &state->write_event})
    if (!event->valid())
      return fail_with(error_kind::system_call_failed,
                     fmt::format("CreateEventW: {}", windows::error_text(::GetLastError())));
  return std::unique_ptr<peer_streams>{new peer_streams{std::move(state)}};
}

void peer_streams::prepare_writer_thread() noexcept {}  // no signals: a closed pipe is an error code

result<peer_streams::ready> peer_streams::wait() {
  impl& s = *impl_;
  for (;;) {
    ready now{.input = s.input.ready(),
              .side = s.side_watched && s.side.valid() && s.side.ready(),
              .gone = s.gone != nullptr && signalled(s.gone),
              .woken = signalled(s.wake_reader.get())};
    if (now.input || now.side || now.gone || now.woken) return now;
    std::vector<HANDLE> waits{s.wake_reader.get()};
    if (s.gone != nullptr) waits.push_back(s.gone);
    if (s.input.in_flight) waits.push_back(s.input.event.get());
    if (s.side_watched && s.side.in_flight) waits.push_back(s.side.event.get());
    if (::WaitForMultipleObjects(static_cast<DWORD>(waits.size()), waits.data(), FALSE, INFINITE) == WAIT_FAILED)
      return fail_with(error_kind::system_call_failed,
                     fmt::format("WaitForMultipleObjects: {}", windows::error_text(::GetLastError())));
  }
}

peer_streams::drained peer_streams::drain_input(const sink& to) { return impl_->input.drain(to); }

peer_streams::drained peer_streams::drain_side(const sink& to) {
  return impl_->side.valid() ? impl_->side.drain(to) : drained::ended;
}

void peer_streams::forget_side() noexcept { impl_->side_watched = false; }

void peer_streams::wake_reader() noexcept { ::SetEvent(impl_->wake_reader.get()); }

peer_streams::write_attempt peer_streams::try_write(std::string_view bytes, steady::time_point deadline) {
  impl& s = *impl_;
  if (s.write_resolved) {
    const write_attempt resolved = std::move(*s.write_resolved);
    s.write_resolved.reset();
    return resolved;
  }
  if (s.write_in_flight) {
    DWORD written = 0;
    const BOOL done = ::GetOverlappedResult(s.output.get(), &s.write_overlapped, &written, FALSE);
    if (!done && ::GetLastError() == ERROR_IO_INCOMPLETE) return {.would_block = true, .in_flight = true};
    s.write_in_flight = false;
    return s.write_outcome(done, written);
  }
  if (steady::now() >= deadline) return {.would_block = true};
  s.write_buffer.assign(bytes.substr(0, std::size_t{1} << 30));
  ::ResetEvent(s.write_event.get());
  s.write_overlapped = OVERLAPPED{};
  s.write_overlapped.hEvent = s.write_event.get();
  if (!::WriteFile(s.output.get(), s.write_buffer.data(), static_cast<DWORD>(s.write_buffer.size()), nullptr,
                   &s.write_overlapped) &&
      ::GetLastError() != ERROR_IO_PENDING)
    return {.failed = windows::error_text(::GetLastError())};
  s.write_in_flight = true;
  DWORD written = 0;
  const BOOL done = ::GetOverlappedResult(s.output.get(), &s.write_overlapped, &written, FALSE);
  if (!done && ::GetLastError() == ERROR_IO_INCOMPLETE) return {.would_block = true, .in_flight = true};
  s.write_in_flight = false;
  return s.write_outcome(done, written);
}

bool peer_streams::write_in_flight() const noexcept { return impl_->write_in_flight; }

bool peer_streams::wait_writable(steady::time_point deadline) {
  impl& s = *impl_;
  if (signalled(s.wake_writer.get())) {
    s.cancel_write();
    return false;
  }
  if (!s.write_in_flight) return true;
  const HANDLE waits[2] = {s.write_event.get(), s.wake_writer.get()};
  const DWORD woke = ::WaitForMultipleObjects(2, waits, FALSE, wait_ms(deadline));
  if (woke == WAIT_OBJECT_0 + 1) {
    s.cancel_write();
    return false;
  }
  if (woke != WAIT_OBJECT_0 && steady::now() >= deadline) s.cancel_write();  // out of time: count what went
  return true;
}

void peer_streams::wake_writer() noexcept { ::SetEvent(impl_->wake_writer.get()); }

void peer_streams::close_output() noexcept {
  impl_->cancel_write();
  impl_->output.reset();
}

}  // namespace psych::host

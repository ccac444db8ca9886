#pragma once
// What the Windows launcher's test host needs of the system it runs on, one implementation per
// host: host_os_wine.cpp drives the launcher under Wine from Linux (a throwaway WINEPREFIX,
// fork, /proc), host_os_windows.cpp drives it natively on Windows (CreateProcessW, a Toolhelp
// census); host_os_common.cpp is what both share (loopback TCP). launcher_host.cpp, the
// contract's host side, is the same on both.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace psych::testing::windows::os {

using deadline = std::chrono::steady_clock::time_point;
/// A process id as the host's system numbers it (a Linux pid under Wine, a Windows pid natively).
using process_id = std::int64_t;

/// Why the launcher cannot be run here (it was not built, no wine64), or nullopt.
std::optional<std::string> why_launcher_cannot_run();

/// Whether the launcher runs under Wine, whose Job Object keeps no limits (docs/windows-launcher.md);
/// on Windows itself a limit that does not read back is a failure, never a skip.
bool under_wine();

/// Seconds this binary spent making the place the launcher runs in (the Linux host's Wine prefix,
/// made on first use); nullopt where it made none.
std::optional<double> setup_seconds();

/// `path` as the launcher names it: Wine's Z: drive under Wine, itself on Windows.
std::string launcher_path_of(const std::filesystem::path& path);

/// The contract-speaking test child (tests/windows_launcher/test_child), as the host sees it.
std::filesystem::path test_child();

/// What is left of `until`, in milliseconds for poll or WSAPoll: at most a minute, so a caller's
/// loop looks at its deadline again.
inline int milliseconds_until(deadline until) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
}

// ---- loopback TCP (host_os_common.cpp) ------------------------------------------------------

#ifdef _WIN32
using socket_handle = std::uintptr_t;  // SOCKET
inline constexpr socket_handle no_socket = ~socket_handle{0};
#else
using socket_handle = int;
inline constexpr socket_handle no_socket = -1;
#endif

/// A listener on 127.0.0.1 at a port of the system's choosing, which `port` receives. Throws.
socket_handle listen_on_loopback(std::uint16_t& port);
/// One waiting connection, or no_socket.
socket_handle accept_connection(socket_handle listener);
/// A connection to 127.0.0.1:port, or no_socket.
socket_handle connect_to_loopback(std::uint16_t port);
/// Whether `socket` has something to read (or end of file) before `until`.
bool readable_before(socket_handle socket, deadline until);
/// What one receive returned: bytes, 0 at end of file, negative on an error.
std::ptrdiff_t receive_some(socket_handle socket, char* buffer, std::size_t size);
/// All of `bytes`, or false when the peer is gone.
bool send_all(socket_handle socket, std::string_view bytes);
void close_socket(socket_handle socket);

// ---- the launcher ------------------------------------------------------------------------

/// psych-launch-windows.exe: stdin the file `stdin_file` (a decoy no child may inherit), stdout
/// and stderr pipes the host drains, `extra_environment` added to what the host's system gives
/// it (the Wine prefix's variables; the test binary's own environment on Windows).
class launcher_process {
 public:
  launcher_process(const std::vector<std::pair<std::string, std::string>>& extra_environment,
                   const std::filesystem::path& stdin_file);
  ~launcher_process();  ///< ends a launcher a failed test left running
  launcher_process(const launcher_process&) = delete;
  launcher_process& operator=(const launcher_process&) = delete;

  /// Its exit status, waiting at most `timeout`; -1 if it was killed or had to be.
  int wait(std::chrono::milliseconds timeout);
  /// Ends it at once, as a crash or an OOM killer would.
  void kill();
  /// What it (and its program) wrote, once it has exited: read to end of file, 5 s at most.
  std::string drain_stdout();
  std::string drain_stderr();

  struct state;

 private:
  std::unique_ptr<state> state_;
};

#ifndef _WIN32
/// Under Wine, for psych's own host (test_host_session.cpp): the command that starts
/// psych-launch-windows.exe, and the environment every Wine process here gets (the shared
/// throwaway prefix's, made on first use).
std::vector<std::string> wine_launcher_command();
std::vector<std::string> wine_environment();
#endif

/// The processes of the host's system whose command line holds `marker`.
std::vector<process_id> processes_with(std::string_view marker);
/// Ends a process this test started, by id.
void kill_process(process_id process);

}  // namespace psych::testing::windows::os

#pragma once
// What the remote tests share: a throwaway certificate (openssl CLI), tokens, the children's uid and
// temp root, the fake service as a child process, an in-process sandbox_service on a local backend,
// a process runner with a time bound, and the memory and descriptor readings of this process; and
// the steps most cases begin with (a service or the certificate, else a skip; a client REQUIREd to be
// made) and end with (no child process left).
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "psych/host/remote_sandbox.hpp"
#include "service_kit.hpp"
#include "temp_dir.hpp"
#include "psych/host/sandbox.hpp"
#include "psych/host/sandbox_service.hpp"

namespace remote_test {

/// The uid the service's children run as when this process is root.
inline constexpr std::int64_t child_uid = 1'500'300;

using psych::testing::temp_dir;

/// test_certificate(), or null with the case reported as skipped (at `where`, the caller's line).
const certificate* certificate_or_skip(std::source_location where = std::source_location::current());

/// The root the service's children make their directories in (0711, removed at exit).
const std::string& children_root();

/// A process-level local backend whose children run as child_uid (as root) or as this process.
std::unique_ptr<psych::sandbox> local_backend();

/// The counts psych_fake_service writes after each request.
struct fake_counts {
  int describe = 0, execute = 0, results = 0, cancel = 0, other = 0;
};

/// psych_fake_service in one --mode, TLS with test_certificate(); killed (by its pid) when this goes.
class fake_service {
 public:
  fake_service(const std::string& mode, const certificate& tls);
  ~fake_service();
  fake_service(const fake_service&) = delete;
  fake_service& operator=(const fake_service&) = delete;
  [[nodiscard]] bool started() const { return port_ != 0; }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] fake_counts counts() const;
  /// Stops it now; true when it was still running (it must not have died on its own).
  bool stop();

 private:
  temp_dir dir_{"psych-remote-fake"};
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

/// The lines an in-process service wrote to its access log.
class access_log {
 public:
  std::function<void(std::string_view)> sink();
  std::vector<std::string> lines() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

/// A sandbox_service on local_backend(), TLS with test_certificate(), its token file in a temp dir.
struct service_under_test {
  std::unique_ptr<temp_dir> dir;
  std::string token_file;
  std::shared_ptr<access_log> log;
  std::unique_ptr<psych::sandbox_service> service;
  const certificate* tls = nullptr;  ///< what it serves, and so what its clients trust as their CA
  [[nodiscard]] std::string url() const { return "https://127.0.0.1:" + std::to_string(service->port()); }
};
/// `tokens`: lines of the token file ("name token"). `tune` adjusts the options before start.
/// nullopt (with why) when it cannot start.
std::optional<service_under_test> start_service(const std::vector<std::string>& token_lines, const certificate& tls,
                                                std::string* why,
                                                const std::function<void(psych::sandbox_service_options&)>& tune = {});
/// start_service() with test_certificate(); nullopt, with the case reported as skipped (at `where`),
/// when either cannot be had here.
std::optional<service_under_test> service_or_skip(
    const std::vector<std::string>& token_lines,
    const std::function<void(psych::sandbox_service_options&)>& tune = {},
    std::source_location where = std::source_location::current());

/// remote_sandbox options for a service at `url` with this token and the test CA.
psych::remote_sandbox_options client_options(const std::string& url, const std::string& token, const certificate& ca);
/// The same for a service_under_test: its url, and its own certificate as the CA.
psych::remote_sandbox_options client_options(const service_under_test& service, const std::string& token);

/// remote_sandbox(options), REQUIREd to be made (a URL and CA file it accepts).
std::unique_ptr<psych::sandbox> made_client(psych::remote_sandbox_options options);
/// made_client(options), REQUIREd as well to find the service ready: the case is about what comes
/// after, not about reaching it.
std::unique_ptr<psych::sandbox> ready_client(psych::remote_sandbox_options options);

/// Terms for a trivial program: process isolation, `wall` seconds of wall clock.
psych::execution_terms short_terms(double wall);

/// This process's resident set and its peak, in KiB (/proc/self/status).
struct memory_reading {
  long rss_kib = 0, peak_kib = 0;
};
memory_reading read_memory();
/// Resets the peak (VmHWM) to the current RSS (/proc/self/clear_refs, "5").
void reset_peak();
/// Open descriptors of this process.
std::size_t open_descriptors();

double seconds_since(std::chrono::steady_clock::time_point start);

/// Waits up to `limit` for `done()`; its last answer.
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit);

/// CHECKs that no process of child_uid is alive within 5 s. Only as root: otherwise the children
/// run as this process's own uid, and cannot be told apart from anything else of it.
void check_no_children_left();

}  // namespace remote_test

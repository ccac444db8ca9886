#pragma once
// What tests/scale stands up: `psych serve` replicas as processes of their own on loopback ports and
// HAProxy in front of them, its configuration rendered from the shipped deploy/haproxy/psych.cfg.
// Every process is a child of this one, ended by its pid; everything they write is in one temp dir,
// removed with the cluster.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace scale_test {

using psych::testing::temp_dir;

/// One child process, its standard output and error appended to `log`. SIGKILLed and reaped when
/// this goes, if it has not been reaped before; never a signal to anything but its pid.
class child {
 public:
  child() = default;
  child(const std::vector<std::string>& argv, const std::vector<std::string>& environment, const std::string& log);
  ~child();
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  /// Takes `other`'s process, after ending this one's.
  child& operator=(child&& other) noexcept;
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] bool running() const { return pid_ > 0; }
  bool signal(int signal_number) const;
  /// Its exit status (128 + the signal when one ended it), or nullopt if it did not end within `limit`.
  std::optional<int> wait(std::chrono::milliseconds limit);
  /// SIGKILL and reap, if it still runs.
  void kill_now();

 private:
  pid_t pid_ = -1;
};

/// What one line of a replica's access log says (docs/serve.md, "The access log").
struct access_line {
  std::string method, path, outcome, forwarded_for;
  unsigned status = 0;
};

/// Kibibytes from a line of /proc/<pid>/status ("VmHWM", "VmRSS"); 0 when it cannot be read.
long status_kib(pid_t pid, const std::string& field);

/// One `psych serve --backend linux-process` on 127.0.0.1, max_concurrent 4.
class replica {
 public:
  replica(std::string name, std::string dir);
  /// Starts it on `port` (0: any) and waits for its "listening on" line; false (with why) if none came.
  bool start(std::uint16_t port, std::string* why);
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] child& process() { return process_; }
  /// Every access-log line it has written, across restarts.
  [[nodiscard]] std::vector<access_line> access_log() const;
  /// Its peak resident set (VmHWM), while it runs.
  [[nodiscard]] long peak_kib() const { return status_kib(process_.pid(), "VmHWM"); }

 private:
  std::string name_, dir_, log_;
  std::uint16_t port_ = 0;
  child process_;
};

/// The state HAProxy's stats socket reports for one server of one backend ("UP", "DOWN",
/// "UP 1/2", ...), its last check's ("L7OK", "L4CON", ...), and its current sessions.
struct server_state {
  std::string status, check;
  long sessions = 0;
  long queued = 0, queued_peak = 0;  ///< requests waiting here for a slot of it: now, and at most
};

/// What a cluster is made of.
struct cluster_options {
  int replicas = 3;  ///< r1..rN of the shipped configuration's three servers; the others are left out
  int drain_seconds = 30;
};

/// Replicas (three unless told) and HAProxy in front of them, TLS from clients terminated by
/// HAProxy with a throwaway certificate, the shipped configuration rendered with this cluster's
/// ports. Each replica's executions have their directories under `children/<name>/` (their
/// working directory names the replica that runs them).
class cluster {
 public:
  static constexpr std::size_t max_concurrent = 4;  ///< each replica's, and the config's maxconn
  /// Stands everything up and waits for HAProxy to see every replica up; nullptr with why if it
  /// could not (haproxy or openssl missing, a replica that did not start, a check that never passed).
  static std::unique_ptr<cluster> start(std::string* why, cluster_options options = {});
  ~cluster();
  [[nodiscard]] int replica_count() const { return static_cast<int>(replicas_.size()); }

  [[nodiscard]] std::string url() const { return "https://127.0.0.1:" + std::to_string(haproxy_port_); }
  [[nodiscard]] const std::string& token() const { return client_token_; }
  [[nodiscard]] const std::string& ca_file() const { return cert_; }
  [[nodiscard]] replica& at(int index) { return *replicas_[static_cast<std::size_t>(index)]; }
  [[nodiscard]] child& haproxy() { return haproxy_; }
  /// The configuration HAProxy runs, as rendered.
  [[nodiscard]] const std::string& haproxy_config() const { return rendered_; }

  /// Each server of the executions backend ("r1".."r3") as the stats socket says now; empty when
  /// the socket does not answer.
  std::map<std::string, server_state> executions_backend() const;
  /// Waits up to `limit` for the server's status to start with `status` ("UP", "DOWN").
  bool wait_for_status(const std::string& server, const std::string& status, std::chrono::milliseconds limit) const;
  /// Restarts replica `index` on its old port (HAProxy's configuration names it).
  bool restart(int index, std::string* why);

  /// The uids the replicas' executions run as, when this process is root: outside the default
  /// run_as_range (1500000-1501023), whose lock files (another directory) other tests running
  /// beside this one take their uids by, so no uid is ever held by two allocators at once.
  static constexpr std::int64_t first_uid = 1'510'000;
  static constexpr std::int64_t uid_count = 24;

 private:
  cluster() = default;
  std::unique_ptr<temp_dir> dir_;
  std::string cert_, client_token_, health_token_, rendered_;
  std::uint16_t haproxy_port_ = 0;
  std::vector<std::unique_ptr<replica>> replicas_;
  child haproxy_;
};

/// The shipped configuration with this host's paths and ports: `global` keeps its settings but
/// logs to standard error and runs in the foreground as this user (no chroot, user, group,
/// daemon), its stats socket at `stats_socket`; the frontend's `bind` takes `bind_address` and
/// `pem`; every `server NAME ADDRESS` line takes `servers[NAME]`, and a server `servers` does not
/// name is left out (a cluster of fewer replicas). Empty, with why, when the file
/// does not have the lines this replaces (its shape changed: the test must follow).
std::string render_haproxy_config(const std::string& shipped, const std::string& stats_socket,
                                  const std::string& bind_address, const std::string& pem,
                                  const std::map<std::string, std::string>& servers, std::string* why);

}  // namespace scale_test

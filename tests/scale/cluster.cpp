#include "cluster.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <rapidjson/document.h>

#include "service_kit.hpp"

namespace scale_test {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

/// A port nothing listens on now (the kernel's pick for a socket bound to port 0, then closed).
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  std::uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

/// What the stats socket at `path` answers to `command`; empty when it does not.
std::string ask_stats_socket(const std::string& path, const std::string& command) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  std::string answer;
  timeval timeout{.tv_sec = 2, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::write(fd, command.data(), command.size()) == static_cast<ssize_t>(command.size())) {
    char buffer[8192];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) answer.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return answer;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

/// The words of a configuration line, split at blanks.
std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

std::string joined_words(const std::vector<std::string>& words) {
  std::string line = "    ";
  for (std::size_t i = 0; i < words.size(); ++i) line += (i ? " " : "") + words[i];
  return line;
}

}  // namespace

child::child(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
             const std::string& log) {
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  std::vector<char*> args, env;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : environment) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  if (::posix_spawn(&pid_, args[0], &files, nullptr, args.data(), env.data()) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&files);
}

child::~child() { kill_now(); }

child& child::operator=(child&& other) noexcept {
  if (this != &other) {
    kill_now();
    pid_ = std::exchange(other.pid_, -1);
  }
  return *this;
}

bool child::signal(int signal_number) const { return pid_ > 0 && ::kill(pid_, signal_number) == 0; }

std::optional<int> child::wait(std::chrono::milliseconds limit) {
  if (pid_ <= 0) return std::nullopt;
  const auto until = clock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t reaped = ::waitpid(pid_, &status, WNOHANG);
    if (reaped == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (reaped < 0 && errno != EINTR) {
      pid_ = -1;
      return std::nullopt;
    }
    if (clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(20ms);
  }
}

void child::kill_now() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

long status_kib(pid_t pid, const std::string& field) {
  if (pid <= 0) return 0;
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(status, line);)
    if (line.starts_with(field + ":")) return std::atol(line.c_str() + field.size() + 1);
  return 0;
}

replica::replica(std::string name, std::string dir) : name_(std::move(name)), dir_(std::move(dir)) {
  log_ = dir_ + "/" + name_ + ".log";
}

bool replica::start(std::uint16_t port, std::string* why) {
  process_.kill_now();
  const auto offset = remote_test::read_file(log_).size();  // a restart appends to the same log
  process_ = child({PSYCH_CLI, "serve", "--listen", fmt::format("127.0.0.1:{}", port), "--token-file",
                    dir_ + "/tokens", "--backend", "linux-process", "--config", dir_ + "/" + name_ + ".json",
                    "--trusted-proxy", "127.0.0.1",
                    "--max-concurrent", std::to_string(cluster::max_concurrent), "--drain-seconds",
                    remote_test::read_file(dir_ + "/drain-seconds")},
                   {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, log_);
  if (!process_.running()) {
    *why = fmt::format("{}: posix_spawn({}) failed", name_, PSYCH_CLI);
    return false;
  }
  constexpr std::string_view listening = "psych serve: listening on http://127.0.0.1:";
  const auto until = clock::now() + 30s;
  while (clock::now() < until) {
    const auto text = remote_test::read_file(log_).substr(offset);
    if (const auto at = text.find(listening); at != std::string::npos && text.find('\n', at) != std::string::npos) {
      port_ = static_cast<std::uint16_t>(std::atoi(text.c_str() + at + listening.size()));
      return true;
    }
    if (process_.wait(0ms)) break;
    std::this_thread::sleep_for(50ms);
  }
  *why = fmt::format("{} did not start listening: {}", name_, remote_test::read_file(log_).substr(offset, 600));
  return false;
}

std::vector<access_line> replica::access_log() const {
  std::vector<access_line> lines;
  std::istringstream in(remote_test::read_file(log_));
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("{")) continue;
    rapidjson::Document json;
    if (json.Parse(line.c_str()).HasParseError() || !json.IsObject()) continue;
    access_line entry;
    const auto text = [&](const char* member) -> std::string {
      const auto it = json.FindMember(member);
      return it != json.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
    };
    entry.method = text("method");
    entry.path = text("path");
    entry.outcome = text("outcome");
    entry.forwarded_for = text("forwarded_for");
    if (const auto it = json.FindMember("status"); it != json.MemberEnd() && it->value.IsUint())
      entry.status = it->value.GetUint();
    lines.push_back(std::move(entry));
  }
  return lines;
}

std::string render_haproxy_config(const std::string& shipped, const std::string& stats_socket,
                                  const std::string& bind_address, const std::string& pem,
                                  const std::map<std::string, std::string>& servers, std::string* why) {
  std::string out;
  std::string section;
  int binds = 0, sockets = 0, logs = 0;
  std::map<std::string, int> servers_seen;
  std::istringstream in(shipped);
  for (std::string line; std::getline(in, line);) {
    auto words = words_of(line);
    const bool header = !line.empty() && line[0] != ' ' && line[0] != '#';
    if (header) section = words.empty() ? "" : words[0];
    if (words.empty() || words[0].starts_with("#") || header) {
      out += line + "\n";
      continue;
    }
    const std::string keyword = words[0];
    if (section == "global") {
      if (keyword == "chroot" || keyword == "user" || keyword == "group" || keyword == "daemon") continue;
      if (keyword == "log") {
        words = {"log", "stderr", "format", "raw", "local0"};
        ++logs;
      }
      if (keyword == "stats" && words.size() > 2 && words[1] == "socket") {
        words[2] = stats_socket;
        ++sockets;
      }
    } else if (keyword == "bind" && words.size() > 1) {
      words[1] = bind_address;
      for (std::size_t i = 2; i + 1 < words.size(); ++i)
        if (words[i] == "crt") words[i + 1] = pem;
      ++binds;
    } else if (keyword == "server" && words.size() > 2) {
      const auto it = servers.find(words[1]);
      if (it == servers.end()) continue;  // a replica this cluster does not run
      words[2] = it->second;
      ++servers_seen[words[1]];
    }
    out += joined_words(words) + "\n";
  }
  bool every_server = true;
  for (const auto& [name, address] : servers) every_server = every_server && servers_seen[name] > 0;
  if (binds != 1 || sockets != 1 || logs != 1 || !every_server) {
    *why = fmt::format(
        "the shipped configuration has {} bind lines, {} stats sockets and {} log lines (1 each expected), "
        "and {} the servers this cluster runs: the test renders it by these lines",
        binds, sockets, logs, every_server ? "all of" : "not all of");
    return {};
  }
  return out;
}

std::unique_ptr<cluster> cluster::start(std::string* why, cluster_options options) {
  std::unique_ptr<cluster> c(new cluster);
  // 0711: the replicas' children (another uid, as root) must reach their temp root inside it.
  c->dir_ = std::make_unique<temp_dir>("psych-scale", 0711);
  const auto& dir = *c->dir_;

  const auto* tls = remote_test::test_certificate(why);
  if (!tls) return nullptr;
  c->cert_ = tls->cert;
  const auto pem = dir.file("haproxy.pem");  // HAProxy's crt: the chain, then the key
  remote_test::write_file(pem, remote_test::read_file(tls->cert) + remote_test::read_file(tls->key));

  c->client_token_ = remote_test::fresh_token();
  c->health_token_ = remote_test::fresh_token();
  remote_test::write_file(dir.file("tokens"), "client " + c->client_token_ + "\nhaproxy " + c->health_token_ + "\n");
  remote_test::write_file(dir.file("drain-seconds"), std::to_string(options.drain_seconds));
  std::filesystem::create_directory(dir.file("children"));
  ::chmod(dir.file("children").c_str(), 0711);

  std::map<std::string, std::string> servers;
  for (int i = 0; i < options.replicas; ++i) {
    const auto name = fmt::format("r{}", i + 1);
    const auto children = dir.file("children/" + name);
    std::filesystem::create_directory(children);
    ::chmod(children.c_str(), 0711);
    // As root, every execution has a uid of its own from one range the replicas share, kept
    // apart by the lock files in one directory (docs/isolated-backend.md), as on one real host.
    remote_test::write_file(
        dir.file(name + ".json"),
        ::geteuid() == 0
            ? fmt::format(R"({{"run_as_range": {{"first": {}, "count": {}, "lock_dir": "{}"}}, "temp_root": "{}"}})",
                          first_uid, uid_count, dir.file("uids"), children)
            : fmt::format(R"({{"allow_same_uid": true, "temp_root": "{}"}})", children));
    auto r = std::make_unique<replica>(name, dir.file(""));
    if (!r->start(0, why)) return nullptr;
    servers[r->name()] = fmt::format("127.0.0.1:{}", r->port());
    c->replicas_.push_back(std::move(r));
  }

  if (::access("/usr/sbin/haproxy", X_OK) != 0) {
    *why = "haproxy is not installed (/usr/sbin/haproxy; Debian's package haproxy, which scripts/test installs)";
    return nullptr;
  }
  c->haproxy_port_ = free_port();
  c->rendered_ = render_haproxy_config(remote_test::read_file(PSYCH_HAPROXY_CONFIG), dir.file("admin.sock"),
                                       fmt::format("127.0.0.1:{}", c->haproxy_port_), pem, servers, why);
  if (c->rendered_.empty()) return nullptr;
  remote_test::write_file(dir.file("haproxy.cfg"), c->rendered_);
  c->haproxy_ = child({"/usr/sbin/haproxy", "-f", dir.file("haproxy.cfg"), "-db"},
                      {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "PSYCH_HEALTH_TOKEN=" + c->health_token_},
                      dir.file("haproxy.log"));
  // Up once every replica's check has passed (HAProxy starts a server up and takes it down after
  // failed checks, so "UP" alone would not say that one has).
  const auto until = clock::now() + 30s;
  bool up = false;
  while (!up && clock::now() < until && c->haproxy_.running()) {
    const auto states = c->executions_backend();
    up = states.size() == c->replicas_.size();
    for (const auto& [name, state] : states) up = up && state.status == "UP" && state.check == "L7OK";
    if (!up) std::this_thread::sleep_for(100ms);
    if (c->haproxy_.wait(0ms)) break;
  }
  if (!up) {
    *why = "HAProxy did not see every replica up within 30 s: " + remote_test::read_file(dir.file("haproxy.log")).substr(0, 1500);
    return nullptr;
  }
  return c;
}

cluster::~cluster() {
  haproxy_.kill_now();
  for (auto& r : replicas_) {
    // SIGTERM first: the service then ends its executions' process trees and their cgroups.
    if (r->process().signal(SIGTERM) && !r->process().wait(20s)) r->process().kill_now();
  }
}

std::map<std::string, server_state> cluster::executions_backend() const {
  std::map<std::string, server_state> out;
  const auto csv = ask_stats_socket(dir_->file("admin.sock"), "show stat\n");
  const auto lines = split(csv, '\n');
  if (lines.empty() || !lines[0].starts_with("# ")) return out;
  const auto columns = split(lines[0].substr(2), ',');
  std::size_t status = 0, sessions = 0, check = 0, queued = 0, queued_peak = 0;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == "status") status = i;
    if (columns[i] == "scur") sessions = i;
    if (columns[i] == "check_status") check = i;
    if (columns[i] == "qcur") queued = i;
    if (columns[i] == "qmax") queued_peak = i;
  }
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto fields = split(lines[i], ',');
    if (fields.size() <= std::max({status, sessions, check, queued, queued_peak}) || fields[0] != "psych_executions")
      continue;
    if (fields[1] == "BACKEND" || fields[1] == "FRONTEND") continue;
    out[fields[1]] = {.status = fields[status],
                      .check = fields[check],
                      .sessions = std::atol(fields[sessions].c_str()),
                      .queued = std::atol(fields[queued].c_str()),
                      .queued_peak = std::atol(fields[queued_peak].c_str())};
  }
  return out;
}

bool cluster::wait_for_status(const std::string& server, const std::string& status,
                              std::chrono::milliseconds limit) const {
  const auto until = clock::now() + limit;
  while (clock::now() < until) {
    const auto states = executions_backend();
    if (const auto it = states.find(server); it != states.end() && it->second.status.starts_with(status)) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

bool cluster::restart(int index, std::string* why) {
  auto& r = at(index);
  return r.start(r.port(), why);
}

}  // namespace scale_test

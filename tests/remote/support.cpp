#include "support.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "host_leftovers.hpp"
#include "skip.hpp"

extern char** environ;

namespace remote_test {

const certificate* certificate_or_skip(std::source_location where) {
  std::string why;
  const auto* tls = test_certificate(&why);
  if (!tls) psych::testing::skip_case(why, where);
  return tls;
}

const std::string& children_root() {
  static temp_dir root("psych-remote-children", 0711);
  static const std::string path = root.path().string();
  return path;
}

std::unique_ptr<psych::sandbox> local_backend() {
  psych::local_sandbox_options options;
  options.isolation = psych::isolation_level::process;
  options.backend = "linux-process";
  options.temp_root = children_root();
  if (::geteuid() == 0) {
    options.run_as_uid = options.run_as_gid = child_uid;
  } else {
    options.allow_same_uid = true;
  }
  auto made = psych::local_sandbox(options);
  if (!made) return nullptr;
  return std::move(made).value();
}

fake_service::fake_service(const std::string& mode, const certificate& tls) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  const std::string counts = dir_.file("counts");
  std::vector<std::string> argv{PSYCH_FAKE_SERVICE, "--mode", mode, "--counts", counts, "--cert", tls.cert,
                                "--key", tls.key};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const int spawned = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    pid_ = -1;
    ::close(pipe_fds[0]);
    return;
  }
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{.fd = pipe_fds[0], .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char c;
    if (::read(pipe_fds[0], &c, 1) != 1) break;
    line.push_back(c);
  }
  ::close(pipe_fds[0]);
  const int port = std::atoi(line.c_str());
  if (port > 0 && port < 65536) port_ = static_cast<std::uint16_t>(port);
}

bool fake_service::stop() {
  if (pid_ <= 0) return false;
  int status = 0;
  const bool alive = ::waitpid(pid_, &status, WNOHANG) == 0;
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return alive;
}

fake_service::~fake_service() { stop(); }

fake_counts fake_service::counts() const {
  fake_counts c;
  std::istringstream in(read_file(dir_.file("counts")));
  std::string name;
  int value = 0;
  while (in >> name >> value) {
    if (name == "describe") c.describe = value;
    else if (name == "execute") c.execute = value;
    else if (name == "results") c.results = value;
    else if (name == "cancel") c.cancel = value;
    else if (name == "other") c.other = value;
  }
  return c;
}

std::function<void(std::string_view)> access_log::sink() {
  return [this](std::string_view line) {
    std::lock_guard lock(mutex_);
    lines_.emplace_back(line);
  };
}

std::vector<std::string> access_log::lines() const {
  std::lock_guard lock(mutex_);
  return lines_;
}

std::optional<service_under_test> start_service(const std::vector<std::string>& token_lines, const certificate& tls,
                                                std::string* why,
                                                const std::function<void(psych::sandbox_service_options&)>& tune) {
  service_under_test s;
  s.dir = std::make_unique<temp_dir>("psych-remote-service");
  s.token_file = s.dir->file("tokens");
  std::string text;
  for (const auto& line : token_lines) text += line + "\n";
  write_file(s.token_file, text);
  s.log = std::make_shared<access_log>();
  auto backend = local_backend();
  if (!backend) {
    if (why) *why = "the local linux-process backend cannot be made here";
    return std::nullopt;
  }
  psych::sandbox_service_options options;
  options.port = 0;
  options.tls_cert_file = tls.cert;
  options.tls_key_file = tls.key;
  options.token_file = s.token_file;
  options.request_timeout_seconds = 2;
  options.idle_timeout_seconds = 2;
  options.drain_seconds = 5;
  options.access_log = s.log->sink();
  if (tune) tune(options);
  auto started = psych::sandbox_service::start(std::move(backend), std::move(options));
  if (!started) {
    if (why) *why = "sandbox_service::start: " + started.error().message();
    return std::nullopt;
  }
  s.service = std::move(started).value();
  s.tls = &tls;
  return s;
}

std::optional<service_under_test> service_or_skip(const std::vector<std::string>& token_lines,
                                                   const std::function<void(psych::sandbox_service_options&)>& tune,
                                                   std::source_location where) {
  const auto* tls = certificate_or_skip(where);
  if (!tls) return std::nullopt;
  std::string why;
  auto s = start_service(token_lines, *tls, &why, tune);
  if (!s) psych::testing::skip_case(why, where);
  return s;
}

psych::remote_sandbox_options client_options(const std::string& url, const std::string& token, const certificate& ca) {
  psych::remote_sandbox_options o;
  o.url = url;
  o.token = [token]() -> psych::result<std::string> { return token; };
  o.ca_file = ca.cert;
  o.connect_timeout_seconds = 2;
  o.wall_clock_slack_seconds = 1;
  o.cancel_grace_seconds = 1;
  return o;
}

psych::remote_sandbox_options client_options(const service_under_test& service, const std::string& token) {
  return client_options(service.url(), token, *service.tls);
}

std::unique_ptr<psych::sandbox> made_client(psych::remote_sandbox_options options) {
  auto made = psych::remote_sandbox(std::move(options));
  REQUIRE(made);
  return std::move(made).value();
}

std::unique_ptr<psych::sandbox> ready_client(psych::remote_sandbox_options options) {
  auto client = made_client(std::move(options));
  REQUIRE(client->describe().ready);
  return client;
}

psych::execution_terms short_terms(double wall) {
  psych::execution_terms terms;
  terms.isolation = psych::isolation_level::process;
  terms.limits.wall_seconds = wall;
  return terms;
}

memory_reading read_memory() {
  memory_reading r;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) r.rss_kib = std::atol(line.c_str() + 6);
    else if (line.starts_with("VmHWM:")) r.peak_kib = std::atol(line.c_str() + 6);
  }
  return r;
}

void reset_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
}

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

void check_no_children_left() {
  if (::geteuid() == 0)
    CHECK(eventually([] { return psych::testing::processes_of(child_uid).empty(); }, std::chrono::seconds(5)));
}

}  // namespace remote_test

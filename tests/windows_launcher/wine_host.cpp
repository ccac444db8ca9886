#include "wine_host.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>
#include <utility>
#include <variant>

namespace psych::testing::windows {

namespace {

constexpr std::string_view wine64_path = PSYCH_WINE64;
constexpr std::string_view launcher_path = PSYCH_WINDOWS_LAUNCHER;
constexpr std::string_view test_child_path = PSYCH_WINDOWS_TEST_CHILD;

bool executable(std::string_view path) { return !path.empty() && ::access(std::string(path).c_str(), X_OK) == 0; }
bool readable(std::string_view path) { return !path.empty() && ::access(std::string(path).c_str(), R_OK) == 0; }

std::string system_error_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

/// wineserver beside wine64 (Debian: /usr/lib/wine/), else on PATH.
std::string wineserver_path() {
  const auto beside = std::filesystem::path(wine64_path).parent_path() / "wineserver";
  return ::access(beside.c_str(), X_OK) == 0 ? beside.string() : std::string("wineserver");
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

/// Starts `argv` with `environment` and /dev/null as its stdio; its pid, or -1.
pid_t start_quietly(std::vector<std::string> argv, std::vector<std::string> environment) {
  auto args = pointers_to(argv);
  auto env = pointers_to(environment);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execvpe(args[0], args.data(), env.data());
    ::_exit(127);
  }
  return pid;
}

/// Runs `argv` with `environment` and waits for it; its exit status, or -1.
int run_and_wait(std::vector<std::string> argv, std::vector<std::string> environment) {
  const pid_t pid = start_quietly(std::move(argv), std::move(environment));
  if (pid < 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string random_hex(std::size_t bytes) {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  std::string raw(bytes, '\0');
  urandom.read(raw.data(), static_cast<std::streamsize>(bytes));
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  for (const unsigned char c : raw) {
    hex.push_back(digits[c >> 4]);
    hex.push_back(digits[c & 15]);
  }
  return hex;
}

/// Compares all of both, whatever differs first: the time taken says nothing about the secret.
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  return differ == 0;
}

int poll_ms(deadline until) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
}

/// The first line of a fresh connection, read a byte at a time so nothing after it is consumed;
/// nullopt past `until`, at end of file, or past 1 KiB (an attach frame is far smaller).
std::optional<std::string> read_attach_line(int fd, deadline until) {
  std::string line;
  while (line.size() < 1024) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, poll_ms(until)) <= 0) return std::nullopt;
    char c = 0;
    if (::read(fd, &c, 1) != 1) return std::nullopt;
    if (c == '\n') return line;
    line.push_back(c);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> why_wine_cannot_run() {
  if (!readable(launcher_path) || !readable(test_child_path))
    return std::string("psych-launch-windows.exe was not built: mingw-w64 (g++-mingw-w64-x86-64-posix) was not "
                       "found when this build was configured");
  if (!executable(wine64_path))
    return std::string("wine64 is not installed (Debian: apt-get install wine64), so the Windows launcher cannot run here");
  return std::nullopt;
}

std::string windows_path(const std::filesystem::path& path) {
  std::string out = "Z:" + path.string();
  std::replace(out.begin(), out.end(), '/', '\\');
  return out;
}

// ---- wine_prefix ---------------------------------------------------------------

wine_prefix& wine_prefix::shared() {
  static wine_prefix prefix;
  return prefix;
}

wine_prefix::wine_prefix() : dir_("psych-wine") {
  std::filesystem::create_directories(dir_.path() / "home");
  std::filesystem::create_directories(dir_.path() / "tmp");
  const auto start = std::chrono::steady_clock::now();
  // The first Wine process creates the prefix; wineboot does only that.
  run_and_wait({std::string(wine64_path), "wineboot", "--init"}, environment());
  creation_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Wine starts its own services (services.exe, winedevice, explorer) with the first process of a
  // session, and they inherit that process's stdio. A process that outlives every launch keeps the
  // session, and so those services, started here with /dev/null: otherwise each launch's would
  // hold the program's output pipes open after the launcher exits.
  keeper_ = start_quietly({std::string(wine64_path), std::string(test_child_path), "--sleep", "86400"}, environment());
}

wine_prefix::~wine_prefix() {
  // Every process of this prefix ends with its wineserver; nothing of it is left behind.
  run_and_wait({wineserver_path(), "-k"}, environment());
  if (keeper_ > 0) {
    ::kill(keeper_, SIGKILL);
    ::waitpid(keeper_, nullptr, 0);
  }
}

std::vector<std::string> wine_prefix::environment() const {
  return {"WINEPREFIX=" + (dir_.path() / "prefix").string(),
          // Wine's own diagnostics off; no Mono or Gecko installer offered while the prefix is made.
          "WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree=;mshtml=",
          "HOME=" + (dir_.path() / "home").string(),
          // Debian's Wine makes its server's socket directory under TMPDIR (/tmp/wine-XXXXXX) and
          // leaves it behind when the server exits; inside the prefix's directory it goes with it.
          "TMPDIR=" + (dir_.path() / "tmp").string(), "PATH=/usr/local/bin:/usr/bin:/bin"};
}

// ---- frame_socket ----------------------------------------------------------------

frame_socket::frame_socket(int fd, std::size_t max_frame_bytes)
    : fd_(fd), reader_(protocol::stream_bounds{.max_frame_bytes = max_frame_bytes}) {}

frame_socket::frame_socket(frame_socket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), reader_(other.reader_), lines_(std::move(other.lines_)), eof_(other.eof_) {}

frame_socket& frame_socket::operator=(frame_socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    reader_ = other.reader_;
    lines_ = std::move(other.lines_);
    eof_ = other.eof_;
  }
  return *this;
}

frame_socket::~frame_socket() { close(); }

void frame_socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::optional<std::string> frame_socket::next_line(deadline until) {
  while (lines_.empty() && !eof_ && fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, poll_ms(until)) <= 0) return std::nullopt;
    char buffer[65536];
    const auto n = ::read(fd_, buffer, sizeof buffer);
    if (n <= 0) {
      eof_ = true;
      break;
    }
    auto fed = reader_.feed({buffer, static_cast<std::size_t>(n)}, [this](std::string_view line) {
      lines_.emplace_back(line);
    });
    if (!fed) throw std::runtime_error("the peer broke the stream's bounds: " + fed.error().message());
  }
  if (lines_.empty()) return std::nullopt;
  auto line = std::move(lines_.front());
  lines_.pop_front();
  return line;
}

void frame_socket::send_raw(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error(system_error_text("send"));
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// ---- attach_listener ---------------------------------------------------------------

attach_listener::attach_listener() : secret_(random_hex(16)) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(system_error_text("socket"));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd_, 8) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw std::runtime_error(system_error_text("bind/listen"));
  port_ = ntohs(address.sin_port);
}

attach_listener::~attach_listener() { close(); }

void attach_listener::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::optional<frame_socket> attach_listener::accept(protocol::attached_stream stream, deadline until) {
  // A connection gets this long to prove the secret: a silent one cannot hold the port for long.
  constexpr auto proof_deadline = 2s;
  while (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, poll_ms(until)) <= 0) return std::nullopt;
    const int connection = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    const auto line = read_attach_line(connection, std::min(until, in(proof_deadline)));
    auto frame = line ? protocol::decode_frame<protocol::attach_frame>(*line) : result<std::variant<protocol::attach_frame>>(
                                                                                    failure(error_kind::json_malformed));
    if (frame) {
      const auto& attach = std::get<protocol::attach_frame>(frame.value());
      if (same_secret(attach.secret, secret_) && attach.stream == stream) return frame_socket(connection);
    }
    ::close(connection);
    ++dropped_;
  }
  return std::nullopt;
}

// ---- launcher_process ----------------------------------------------------------------

launcher_process::launcher_process(wine_prefix& prefix, const attach_listener& listener, const std::string& stdin_file) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error(system_error_text("pipe2"));
  auto environment = prefix.environment();
  environment.push_back(std::string(protocol::host_port_variable) + "=" + std::to_string(listener.port()));
  environment.push_back(std::string(protocol::host_secret_variable) + "=" + listener.secret());
  std::vector<std::string> argv{std::string(wine64_path), std::string(launcher_path)};
  auto args = pointers_to(argv);
  auto env = pointers_to(environment);
  const int input = ::open(stdin_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (input < 0) throw std::runtime_error(system_error_text("open decoy"));
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(system_error_text("fork"));
  if (pid_ == 0) {
    ::dup2(input, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execve(args[0], args.data(), env.data());
    ::_exit(127);
  }
  ::close(input);
  ::close(out[1]);
  ::close(err[1]);
  stdout_ = out[0];
  stderr_ = err[0];
}

launcher_process::~launcher_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  for (const int fd : {stdout_, stderr_})
    if (fd >= 0) ::close(fd);
}

int launcher_process::wait(std::chrono::milliseconds timeout) {
  const auto until = in(timeout);
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

void launcher_process::kill() {
  if (pid_ > 0) ::kill(pid_, SIGKILL);
}

std::string launcher_process::drain(int& fd) {
  std::string text;
  char buffer[4096];
  // The launcher closed its copies and the tree is gone: end of file comes; a bound keeps a
  // leftover writer from hanging the test.
  const auto until = in(5s);
  while (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, poll_ms(until)) <= 0) break;
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  if (fd >= 0) ::close(fd);
  fd = -1;
  return text;
}

// ---- one execution ---------------------------------------------------------------------

launch_dir::launch_dir() : root("psych-wine-launch") {
  workspace = root.file("workspace");
  tmp = root.file("tmp");
  canary = root.file("canary");
  decoy = root.file("decoy-stdin");
  std::filesystem::create_directory(workspace);
  std::filesystem::create_directory(tmp);
  std::ofstream(canary) << "canary\n";
  std::ofstream(decoy) << "the launcher's own stdin, which no child may inherit\n";
}

protocol::launch_frame default_launch(const launch_dir& dir) {
  protocol::launch_frame launch;
  launch.token = random_hex(16);
  launch.limits.cpu_seconds.value = 10;
  launch.limits.address_space_bytes.value = 256u << 20;
  launch.limits.file_size_bytes.value = 1u << 20;
  launch.limits.process_count.value = 8;
  launch.limits.wall_seconds.value = 20;
  launch.environment = {{"SystemRoot", "C:\\windows"}, {"PSYCH_TEST", "a value"}};
  launch.interpreter = windows_path(std::string(test_child_path));
  launch.workspace = windows_path(dir.workspace);
  launch.tmp_dir = windows_path(dir.tmp);
  launch.canary = windows_path(dir.canary);
  launch.allow_same_uid = true;
  return launch;
}

namespace {

/// How long Wine may take to start the launcher and have it attach (a cold start of the prefix's
/// services takes seconds here).
constexpr auto attach_patience = 60s;
constexpr auto frame_patience = 30s;

template <class Frame>
std::optional<Frame> decoded(const std::optional<std::string>& line) {
  if (!line) return std::nullopt;
  auto frame = protocol::decode_frame<Frame>(*line);
  if (!frame) return std::nullopt;
  return std::get<Frame>(std::move(frame).value());
}

void impersonate(std::uint16_t port, const std::string& secret) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    const auto line = protocol::encode_frame(protocol::attach_frame{.secret = secret, .stream = protocol::attached_stream::control});
    (void)::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
  }
  ::close(fd);
}

}  // namespace

execution run_program(const launch_dir& dir, const protocol::launch_frame& launch, std::string_view program,
                      const run_options& options) {
  execution out;
  auto& prefix = wine_prefix::shared();
  attach_listener listener;
  if (options.impostor_secret) impersonate(listener.port(), *options.impostor_secret);
  const auto start = std::chrono::steady_clock::now();
  launcher_process process(prefix, listener, dir.decoy);
  auto finish = [&] {
    out.launcher_status = process.wait();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.stdout_text = process.drain_stdout();
    out.stderr_text = process.drain_stderr();
    out.dropped_connections = listener.dropped();
    return out;
  };

  auto control = listener.accept(protocol::attached_stream::control, in(attach_patience));
  if (!control) return finish();
  control->send_raw(protocol::encode_frame(launch) +
                    (options.cancel_with_launch ? protocol::encode_frame(protocol::cancel_frame{.reason = "cancelled"})
                                                : std::string()));
  // The launcher answers `started` only after attaching the channel (whose connection waits in
  // the listener's backlog meanwhile), or `error` without one.
  const auto first = control->next_line(in(frame_patience));
  if (first) {
    auto reply = protocol::decode_frame<protocol::started_frame, protocol::launch_error_frame>(*first);
    if (reply && std::holds_alternative<protocol::started_frame>(reply.value()))
      out.started = std::get<protocol::started_frame>(reply.value());
    else if (reply)
      out.error = std::get<protocol::launch_error_frame>(reply.value());
  }
  std::optional<frame_socket> channel;
  if (out.started) channel = listener.accept(protocol::attached_stream::channel, in(frame_patience));
  listener.close();
  if (!out.started || !channel) return finish();

  out.hello = decoded<protocol::hello_frame>(channel->next_line(in(frame_patience)));
  if (out.hello) channel->send(protocol::run_frame{.program = std::string(program)});
  if (options.host_leaves_after || options.launcher_killed_after) {
    std::this_thread::sleep_for(options.host_leaves_after.value_or(options.launcher_killed_after.value_or(0ms)));
    if (!options.watched_marker.empty()) {
      const auto until = in(10s);
      while ((out.watched_before_leaving = wine_processes_with(options.watched_marker).size()) < options.watched_count &&
             std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(50ms);
    }
    if (options.host_leaves_after) control->close();
    else process.kill();
    return finish();
  }
  if (options.cancel_after) {
    std::this_thread::sleep_for(*options.cancel_after);
    control->send(protocol::cancel_frame{.reason = options.cancel_reason});
  }
  const auto wall = std::chrono::milliseconds(static_cast<std::int64_t>(launch.limits.wall_seconds.value * 1000));
  out.done = decoded<protocol::done_frame>(channel->next_line(in(wall + frame_patience)));
  out.exit = decoded<protocol::exit_frame>(control->next_line(in(wall + frame_patience)));
  return finish();
}

std::vector<pid_t> wine_processes_with(std::string_view marker) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    std::ifstream file(entry.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (cmdline.find(marker) != std::string::npos) found.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return found;
}

std::vector<pid_t> wait_until_gone(std::string_view marker, std::chrono::milliseconds timeout) {
  const auto until = in(timeout);
  auto left = wine_processes_with(marker);
  while (!left.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
    left = wine_processes_with(marker);
  }
  return left;
}

}  // namespace psych::testing::windows

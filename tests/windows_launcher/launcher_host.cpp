#include "launcher_host.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <utility>
#include <variant>

#include "os/random_hex.hpp"  // src/host: the secret and the token, as psych's host makes them

namespace psych::testing::windows {

namespace {

/// Compares all of both, whatever differs first: the time taken says nothing about the secret.
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  return differ == 0;
}

/// The first line of a fresh connection, read a byte at a time so nothing after it is consumed;
/// nullopt past `until`, at end of file, or past 1 KiB (an attach frame is far smaller).
std::optional<std::string> read_attach_line(os::socket_handle socket, deadline until) {
  std::string line;
  while (line.size() < 1024) {
    if (!os::readable_before(socket, until)) return std::nullopt;
    char c = 0;
    if (os::receive_some(socket, &c, 1) != 1) return std::nullopt;
    if (c == '\n') return line;
    line.push_back(c);
  }
  return std::nullopt;
}

}  // namespace

// ---- frame_socket ----------------------------------------------------------------

frame_socket::frame_socket(os::socket_handle socket, std::size_t max_frame_bytes)
    : socket_(socket), reader_(protocol::stream_bounds{.max_frame_bytes = max_frame_bytes}) {}

frame_socket::frame_socket(frame_socket&& other) noexcept
    : socket_(std::exchange(other.socket_, os::no_socket)), reader_(other.reader_), lines_(std::move(other.lines_)), eof_(other.eof_) {}

frame_socket& frame_socket::operator=(frame_socket&& other) noexcept {
  if (this != &other) {
    close();
    socket_ = std::exchange(other.socket_, os::no_socket);
    reader_ = other.reader_;
    lines_ = std::move(other.lines_);
    eof_ = other.eof_;
  }
  return *this;
}

frame_socket::~frame_socket() { close(); }

void frame_socket::close() {
  if (socket_ != os::no_socket) os::close_socket(socket_);
  socket_ = os::no_socket;
}

std::optional<std::string> frame_socket::next_line(deadline until) {
  while (lines_.empty() && !eof_ && socket_ != os::no_socket) {
    if (!os::readable_before(socket_, until)) return std::nullopt;
    char buffer[65536];
    const auto n = os::receive_some(socket_, buffer, sizeof buffer);
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
  if (!os::send_all(socket_, bytes)) throw std::runtime_error("send: the launcher's connection is gone");
}

// ---- attach_listener ---------------------------------------------------------------

attach_listener::attach_listener() : secret_(host::random_hex(16)) { socket_ = os::listen_on_loopback(port_); }

attach_listener::~attach_listener() { close(); }

void attach_listener::close() {
  if (socket_ != os::no_socket) os::close_socket(socket_);
  socket_ = os::no_socket;
}

std::optional<frame_socket> attach_listener::accept(protocol::attached_stream stream, deadline until) {
  // A connection gets this long to prove the secret: a silent one cannot hold the port for long.
  constexpr auto proof_deadline = 2s;
  while (socket_ != os::no_socket) {
    if (!os::readable_before(socket_, until)) return std::nullopt;
    const auto connection = os::accept_connection(socket_);
    if (connection == os::no_socket) continue;
    const auto line = read_attach_line(connection, std::min(until, in(proof_deadline)));
    auto frame = line ? protocol::decode_frame<protocol::attach_frame>(*line) : result<std::variant<protocol::attach_frame>>(
                                                                                    fail_with(error_kind::json_malformed));
    if (frame) {
      const auto& attach = std::get<protocol::attach_frame>(frame.value());
      if (same_secret(attach.secret, secret_) && attach.stream == stream) return frame_socket(connection);
    }
    os::close_socket(connection);
    ++dropped_;
  }
  return std::nullopt;
}

// ---- one execution ---------------------------------------------------------------------

launch_dir::launch_dir() : root("psych-windows-launch") {
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
  launch.token = host::random_hex(16);
  launch.limits.cpu_seconds.value = 10;
  launch.limits.address_space_bytes.value = 256u << 20;
  launch.limits.file_size_bytes.value = 1u << 20;
  launch.limits.process_count.value = 8;
  launch.limits.wall_seconds.value = 20;
  launch.environment = {{"SystemRoot", "C:\\windows"}, {"PSYCH_TEST", "a value"}};
  launch.interpreter = os::launcher_path_of(os::test_child());
  launch.workspace = os::launcher_path_of(dir.workspace);
  launch.tmp_dir = os::launcher_path_of(dir.tmp);
  launch.canary = os::launcher_path_of(dir.canary);
  launch.allow_same_uid = true;
  return launch;
}

namespace {

/// How long the launcher may take to start and attach (under Wine, a cold start of the prefix's
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
  const auto socket = os::connect_to_loopback(port);
  if (socket == os::no_socket) return;
  (void)os::send_all(socket, protocol::encode_frame(
                                 protocol::attach_frame{.secret = secret, .stream = protocol::attached_stream::control}));
  os::close_socket(socket);
}

}  // namespace

execution run_program(const launch_dir& dir, const protocol::launch_frame& launch, std::string_view program,
                      const run_options& options) {
  execution out;
  attach_listener listener;
  if (options.impostor_secret) impersonate(listener.port(), *options.impostor_secret);
  const auto start = std::chrono::steady_clock::now();
  os::launcher_process process({{std::string(protocol::host_port_variable), std::to_string(listener.port())},
                               {std::string(protocol::host_secret_variable), listener.secret()}},
                              dir.decoy);
  auto finish = [&] {
    out.launcher_status = process.wait(30s);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.stdout_text = process.drain_stdout();
    out.stderr_text = process.drain_stderr();
    out.dropped_connections = listener.dropped();
    return out;
  };

  auto control = listener.accept(protocol::attached_stream::control, in(attach_patience));
  if (!control) return finish();
  control->send_raw(protocol::encode_frame(launch) +
                    (options.cancel_with_launch
                         ? protocol::encode_frame(protocol::cancel_frame{.reason = protocol::cancel_reason::cancelled})
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
      while ((out.watched_before_leaving = os::processes_with(options.watched_marker).size()) < options.watched_count &&
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

std::vector<os::process_id> wait_until_gone(std::string_view marker, std::chrono::milliseconds timeout) {
  const auto until = in(timeout);
  auto left = os::processes_with(marker);
  while (!left.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
    left = os::processes_with(marker);
  }
  return left;
}

}  // namespace psych::testing::windows

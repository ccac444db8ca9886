#include "os/run_command.hpp"

#include <algorithm>
#include <array>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "os/child_process.hpp"
#include "os/child_streams.hpp"
#include "os/os_handle.hpp"

namespace psych::host {

namespace {

namespace asio = boost::asio;

constexpr std::size_t output_bytes_max = std::size_t{1} << 20;

/// Reads `pipe` to its end, keeping the first output_bytes_max bytes.
class bounded_drain {
 public:
  bounded_drain(pipe_stream& pipe, std::string& into) : pipe_(pipe), into_(into) { read(); }

 private:
  void read() {
    pipe_.async_read_some(asio::buffer(buffer_), [this](boost::system::error_code ec, std::size_t n) {
      if (ec) return;  // end of file, or the pipe closed under it
      into_.append(buffer_.data(), std::min(n, output_bytes_max - std::min(into_.size(), output_bytes_max)));
      read();
    });
  }
  pipe_stream& pipe_;
  std::string& into_;
  std::array<char, 16384> buffer_{};
};

}  // namespace

result<command_output> run_command(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
                                   std::chrono::milliseconds limit) {
  PSYCH_TRY(auto out, output_pipe());
  PSYCH_TRY(auto err, output_pipe());
  auto child = child_process::spawn({.argv = argv,
                                     .environment = environment,
                                     .descriptors = {no_os_handle, out.second.get(), err.second.get()}});
  if (!child) return fail_with(error_kind::system_call_failed, child.error().message());
  out.second.reset();
  err.second.reset();

  // Both streams to their end, on one loop that stops at the limit.
  command_output result;
  asio::io_context io;
  pipe_stream out_stream(io), err_stream(io);
  PSYCH_TRY(adopt(out_stream, out.first));
  PSYCH_TRY(adopt(err_stream, err.first));
  const auto deadline = std::chrono::steady_clock::now() + limit;
  {
    const bounded_drain stdout_drain(out_stream, result.stdout_text);
    const bounded_drain stderr_drain(err_stream, result.stderr_text);
    io.run_until(deadline);
  }
  const bool timed_out = !io.stopped();
  // Both streams ended; what is left of the limit is how long it may take to exit.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (timed_out || !child.value().wait_exit(std::max(left, std::chrono::milliseconds(0))))
    child.value().signal_group(ending::kill);
  const auto status = child.value().reap();
  result.exit_code = timed_out ? -1 : status.code;
  return result;
}

std::string without_trailing_space(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace psych::host

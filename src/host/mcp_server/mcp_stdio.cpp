// psych mcp over stdio (mcp_server.hpp): newline-delimited JSON-RPC on a pair of descriptors, one
// session. The reader (the caller's thread) reads lines within the message bound; a writer thread
// writes what the session sends, in order. What is written but not yet taken by the client is
// bounded: past the bound progress is dropped, and the reader stops reading until the client has
// taken its answers, so a client that never reads holds the server to a fixed amount of memory.
#ifdef _WIN32
#include <io.h>
#else
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "mcp/json_rpc_wire.hpp"
#include "mcp_server/mcp_server_wire.hpp"
#include "psych/host/mcp_server.hpp"
#include "psych/protocol/json.hpp"

namespace psych {
namespace {

long read_some(int fd, char* buffer, std::size_t size) {
#ifdef _WIN32
  return ::_read(fd, buffer, static_cast<unsigned>(size));
#else
  for (;;) {
    const auto got = ::read(fd, buffer, size);
    if (got >= 0 || errno != EINTR) return static_cast<long>(got);
  }
#endif
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
#ifdef _WIN32
    const auto wrote = ::_write(fd, bytes.data(), static_cast<unsigned>(std::min<std::size_t>(bytes.size(), 1u << 20)));
#else
    const auto wrote = ::write(fd, bytes.data(), bytes.size());
    if (wrote < 0 && errno == EINTR) continue;
#endif
    if (wrote <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(wrote));
  }
  return true;
}

/// The writer's queue, shared with its thread: a client that stopped reading can hold a write
/// forever, so at the end the thread is let go rather than joined, and keeps what it uses.
struct outbox {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::string> lines;
  std::size_t unsent = 0;  ///< queued and in the write under way
  bool closing = false;
  bool broken = false;     ///< the client closed its end: nothing more can be written
  bool finished = false;   ///< the writer thread has returned
  std::size_t dropped = 0;
  std::size_t bound = 0;

  /// False when the message was dropped (progress, past the bound) or the client is gone.
  bool put(mcp_outgoing message) {
    std::lock_guard lock(mutex);
    if (broken || closing) return false;
    if (message.droppable && unsent + message.json.size() > bound) {
      ++dropped;
      return false;
    }
    message.json.push_back('\n');
    unsent += message.json.size();
    lines.push_back(std::move(message.json));
    changed.notify_all();
    return true;
  }

  /// The reader waits here while the client has more than the bound still to take.
  void wait_for_room() {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return unsent <= bound || broken; });
  }

  static void run(const std::shared_ptr<outbox>& self, int fd) {
#ifndef _WIN32
    // A client that closed its input makes the write fail with EPIPE here, not SIGPIPE end psych.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
#endif
    std::unique_lock lock(self->mutex);
    for (;;) {
      self->changed.wait(lock, [&] { return !self->lines.empty() || self->closing; });
      if (self->lines.empty()) break;
      std::string line = std::move(self->lines.front());
      self->lines.pop_front();
      lock.unlock();
      const bool wrote = write_all(fd, line);
      lock.lock();
      self->unsent -= line.size();
      self->changed.notify_all();
      if (!wrote) {
        self->broken = true;
        self->lines.clear();
        self->unsent = 0;
        break;
      }
    }
    self->finished = true;
    self->changed.notify_all();
  }
};

/// A rejected message's words for the client: as the error answer JSON-RPC has for it, and for a
/// notification (which is never answered) as a log message.
std::string log_message(std::string_view problem) {
  mcp_server_wire::log_params params{.level = "error",
                                     .data = {fmt::format(R"({{"error":{}}})", protocol::encode_json(std::string(problem)))}};
  return protocol::encode_json(
      json_rpc_wire::notification_out{.method = "notifications/message", .params = {protocol::encode_json(params)}});
}

}  // namespace

result<void> serve_mcp_stdio(const mcp_server_options& options, int input_fd, int output_fd,
                             const mcp_stdio_options& bounds) {
  auto box = std::make_shared<outbox>();
  box->bound = bounds.max_unsent_bytes;
  std::thread writer([box, output_fd] { outbox::run(box, output_fd); });
  auto opened = mcp_server_session::open(options, "stdio");
  if (!opened) {
    {
      std::lock_guard lock(box->mutex);
      box->closing = true;
      box->changed.notify_all();
    }
    writer.join();
    return opened.error();
  }
  auto& session = *opened.value();
  const mcp_send send = [box](mcp_outgoing message) { box->put(std::move(message)); };

  std::string line;
  bool skipping = false;  // inside a line past the bound: its bytes are passed over, never held
  std::size_t skipped = 0;
  std::vector<char> buffer(std::size_t{64} << 10);
  const auto handle = [&](std::string_view message) {
    if (message.find_first_not_of(" \t\r") == std::string_view::npos) return;  // a blank line
    const auto receipt = session.receive(message, send);
    if (receipt.what != mcp_receipt::kind::rejected) return;
    box->put({.json = receipt.answerable ? receipt.error_json : log_message(receipt.problem)});
  };
  for (;;) {
    box->wait_for_room();
    const long got = read_some(input_fd, buffer.data(), buffer.size());
    if (got <= 0) break;  // the client closed its end (or the descriptor failed): the session ends
    std::string_view bytes(buffer.data(), static_cast<std::size_t>(got));
    while (!bytes.empty()) {
      const auto newline = bytes.find('\n');
      const auto piece = bytes.substr(0, newline);
      if (skipping) {
        skipped += piece.size();
      } else if (line.size() + piece.size() > bounds.max_message_bytes) {
        skipping = true;
        skipped = line.size() + piece.size();
        line.clear();
        line.shrink_to_fit();
      } else {
        line.append(piece);
      }
      if (newline == std::string_view::npos) break;
      bytes.remove_prefix(newline + 1);
      if (skipping) {
        const auto problem = fmt::format("request_too_large: a message of {} bytes was refused unread (the most is {})",
                                         skipped, bounds.max_message_bytes);
        box->put({.json = protocol::encode_json(json_rpc_wire::reply_error_out{
                      .id = {"null"}, .error = {.code = -32600, .message = problem}})});
        skipping = false;
      } else {
        handle(line);
      }
      line.clear();
    }
  }
  if (!skipping && !line.empty()) handle(line);  // a last message without its newline
  session.cancel_all();
  {
    std::lock_guard lock(box->mutex);
    box->closing = true;
    box->changed.notify_all();
  }
  // What is queued goes out if the client still reads; a client that does not gets 2 s.
  std::unique_lock lock(box->mutex);
  if (box->changed.wait_for(lock, std::chrono::seconds(2), [&] { return box->finished; })) {
    lock.unlock();
    writer.join();
  } else {
    lock.unlock();
    writer.detach();  // blocked in a write the client will never take; it holds its own outbox
  }
  return success();
}

}  // namespace psych

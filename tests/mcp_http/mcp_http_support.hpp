#pragma once
// What the Streamable HTTP tests share: an in-process mcp_http_server on a real local sandbox (no
// upstream tools, a BlobStore in a temp dir), its token, raw clients that speak JSON-RPC over HTTP
// to it (tests/remote/raw_client), an SSE reader, the JSON of a message, this process's memory, and
// the check that nothing is left behind.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "psych/host/blob_store.hpp"
#include "psych/host/mcp_http_server.hpp"
#include "psych/host/sandbox.hpp"
#include "raw_client.hpp"
#include "temp_dir.hpp"

namespace mcp_http_test {

using remote_test::header_list;
using remote_test::raw_connection;
using remote_test::raw_response;

/// The uid the executions run as when this process is root (the remote tests use another, so that
/// each suite's leftover check sees only its own).
inline constexpr std::int64_t child_uid = 1'500'400;

/// Where a server is, and the token it takes.
struct endpoint {
  std::uint16_t port = 0;
  bool tls = false;
  std::string token;
};

/// A server, its sandbox and its files. Destroying it shuts the server down, and CHECKs that no
/// execution's process is left (as root, where they run as child_uid).
struct server_under_test {
  std::unique_ptr<psych::testing::temp_dir> dir;
  std::string token;
  std::string token_file;
  bool tls = false;
  std::unique_ptr<psych::sandbox> backend;
  std::unique_ptr<psych::directory_blob_store> blobs;
  psych::mcp_server_options sessions;
  std::unique_ptr<psych::mcp_http_server> server;

  server_under_test() = default;
  server_under_test(const server_under_test&) = delete;
  server_under_test& operator=(const server_under_test&) = delete;
  ~server_under_test();
  [[nodiscard]] endpoint at() const { return {server->port(), tls, token}; }
};

using tuning = std::function<void(psych::mcp_http_options&, psych::mcp_server_options&)>;
/// A server on 127.0.0.1, any port (TLS with the test certificate when `tls`); null, with the case
/// reported as skipped (at the caller's line), when the sandbox or the certificate cannot be had.
std::unique_ptr<server_under_test> server_or_skip(const tuning& tune = {}, bool tls = false,
                                                  std::source_location where = std::source_location::current());

/// A connection to it, REQUIREd to open.
std::unique_ptr<raw_connection> connect(const endpoint& to);

/// One HTTP request to the endpoint. By default a POST with the server's token, JSON, and an
/// Accept header that takes both a JSON body and an SSE stream.
struct http_call {
  std::string method = "POST";
  std::string target = "/mcp";
  std::string body;
  std::string session;                 ///< Mcp-Session-Id, when not empty
  std::optional<std::string> token;    ///< default: the server's; "" sends no Authorization
  std::string accept = "application/json, text/event-stream";
  header_list extra;
};
/// Sends it on `c`; REQUIREd to be written.
void send(const endpoint& to, raw_connection& c, const http_call& call);
/// Sends it on a fresh connection and reads the whole response; REQUIREd to come within `timeout`.
raw_response exchange(const endpoint& to, const http_call& call, double timeout = 20);

/// A JSON-RPC request's text; `params` is JSON.
std::string request_text(std::int64_t id, std::string_view method, std::string_view params = "{}");
/// tools/call of run_code with this program, and a progress token when `progress_token` is set.
std::string run_code_text(std::int64_t id, std::string_view program, std::optional<std::string> progress_token = {});

/// The next response on `c`, REQUIREd to come within `timeout`.
raw_response response_on(raw_connection& c, double timeout = 20);
/// The refusal a response names: its JSON-RPC error's message up to the first ':'; "" for an answer.
std::string refusal_of(const raw_response& response);

/// initialize, then notifications/initialized: the new session's id (REQUIREd to be given).
std::string open_session(const endpoint& to);

/// A response's SSE events, read as they come.
class sse_reader {
 public:
  explicit sse_reader(raw_connection& c) : c_(c) {}
  /// The next event's data; nullopt when the stream ended (ended() true) or nothing came in time.
  std::optional<std::string> next(double timeout);
  [[nodiscard]] bool ended() const { return ended_ && pending_.find("\n\n") == std::string::npos; }

 private:
  raw_connection& c_;
  std::string pending_;
  bool ended_ = false;
};

/// A POST whose SSE stream has begun: its connection and its events, and the first event (REQUIREd
/// to come) when `first_event`.
struct started_stream {
  std::unique_ptr<raw_connection> connection;
  std::unique_ptr<sse_reader> events;
  std::string first;
};
started_stream start_stream(const endpoint& to, const http_call& call, bool first_event);

/// A JSON text parsed (REQUIREd to parse).
rapidjson::Document parsed(const std::string& text);
/// The `value` of a run_code answer's payload (an answer's whole text), as JSON text; REQUIREd.
std::string value_of(const std::string& answer);
/// The string at a JSON pointer ("/error/message"), or "" when there is none.
std::string string_at(const rapidjson::Document& document, const char* pointer);

/// This process's resident set, in KiB (/proc/self/status).
long rss_kib();

/// The largest resident set this process had while it lived, sampled every 20 ms on a thread.
class memory_peak {
 public:
  memory_peak();
  ~memory_peak();
  memory_peak(const memory_peak&) = delete;
  memory_peak& operator=(const memory_peak&) = delete;
  [[nodiscard]] long before_kib() const { return before_; }
  /// Stops sampling; the peak, in KiB.
  long stop();

 private:
  long before_;
  std::atomic<long> peak_;
  std::atomic<bool> sampling_{true};
  std::thread sampler_;
};

/// Waits up to `limit` for `done()`; its last answer.
bool eventually(const std::function<bool()>& done,
                std::chrono::steady_clock::duration limit = std::chrono::seconds(10));

}  // namespace mcp_http_test

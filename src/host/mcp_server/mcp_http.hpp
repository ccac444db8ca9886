#pragma once
// psych mcp over Streamable HTTP (mcp_http_server.hpp) as its files share it: the listener, the
// connections and the idle sweep (mcp_http.cpp), and each request's answer (mcp_http_requests.cpp).
// One event loop thread serves every connection and alone touches the session table; the sessions'
// executions hand their messages over through each POST's post_reply.
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/bearer_tokens.hpp"
#include "http/http_link.hpp"
#include "mcp_server/mcp_http_reply.hpp"
#include "mcp_server/mcp_http_sessions.hpp"
#include "psych/host/mcp_http_server.hpp"

namespace psych {

struct mcp_http_server::impl {
  impl(const mcp_server_options& sessions_in, mcp_http_options options_in)
      : session_options(sessions_in), options(std::move(options_in)) {}

  mcp_server_options session_options;
  mcp_http_options options;
  // First: destroyed last, after everything that holds a timer or a socket of it.
  host::asio::io_context io;
  std::unique_ptr<host::asio::ssl::context> tls;
  host::asio::ip::tcp::acceptor acceptor{io};
  host::asio::steady_timer sweep{io};
  std::uint16_t bound_port = 0;
  std::thread io_thread;
  std::once_flag shutdown_once;

  host::bearer_credentials credentials;
  host::session_reaper reaper;
  // The event loop's alone.
  host::session_table sessions{options.max_sessions, reaper};
  std::set<host::beast::tcp_stream*> connections;
  bool stopping = false;

  mutable std::mutex counted_mutex;
  mcp_http_stats counted;
  template <class F>
  void count(F&& change) {
    std::lock_guard lock(counted_mutex);
    change(counted);
  }

  host::asio::awaitable<void> accept_loop();
  host::asio::awaitable<void> serve(host::asio::ip::tcp::socket socket);
  /// Forgets the sessions idle past their expiry, a few times per expiry, until the server stops.
  host::asio::awaitable<void> expire_idle();
  /// Stopping: closes the listener and every connection, and hands every session to the reaper.
  void close_all();
  void note_sessions();

  // mcp_http_requests.cpp. Stream: beast::tcp_stream or tls_stream. False: close the connection.
  template <class Stream>
  host::asio::awaitable<void> serve_requests(Stream& stream);
  template <class Stream>
  host::asio::awaitable<bool> handle(Stream& stream, host::beast::flat_buffer& buffer,
                                     host::http::request_parser<host::http::empty_body>& header);
  template <class Stream>
  host::asio::awaitable<bool> post(Stream& stream, const std::string& client,
                                   host::http::request<host::http::string_body>& request, bool keep_alive);
  template <class Stream>
  host::asio::awaitable<bool> end_session(Stream& stream, const std::string& client, std::string_view session_id,
                                          bool keep_alive);
  /// A refusal, named; a `status` other than 0 overrides the refusal's own (431 for a header).
  /// `words` by value: they are most often a temporary of the co_await that calls this.
  template <class Stream>
  host::asio::awaitable<bool> refuse(Stream& stream, mcp_http_refusal why, std::string words, bool keep_alive,
                                     unsigned status = 0);
  /// The answer as one JSON body, once it has come.
  template <class Stream>
  host::asio::awaitable<bool> answer_once(Stream& stream, std::shared_ptr<host::post_reply> reply, bool keep_alive,
                                          std::string_view new_session);
  /// Every message as an SSE event as it comes, the answer last.
  template <class Stream>
  host::asio::awaitable<bool> answer_streamed(Stream& stream, std::shared_ptr<host::post_reply> reply,
                                              bool keep_alive, std::string_view new_session);
};

}  // namespace psych

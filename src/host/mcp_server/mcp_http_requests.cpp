// One connection's requests to psych mcp's Streamable HTTP endpoint (mcp_http_server.hpp;
// docs/mcp-server-http.md): the checks every request passes (path, origin, token, method, protocol
// version, size), then a POST's message handed to its session and its answer written, as one JSON
// body or as an SSE stream, or a DELETE's session ended.
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

#include "http/http_server.hpp"
#include "mcp_server/mcp_http.hpp"
#include "mcp_server/mcp_http_rules.hpp"

namespace psych {

using namespace psych::host;
using http_refusal = mcp_http_refusal;

namespace {

constexpr std::string_view json_type = "application/json";
/// How long a refused request's unread body is taken and dropped so its refusal reaches the client.
constexpr double unread_linger_seconds = 2;

http::response<http::string_body> response_of(unsigned status, bool keep_alive, std::string_view new_session = {}) {
  http::response<http::string_body> response{static_cast<http::status>(status), 11};
  response.set(http::field::cache_control, "no-store");
  if (!new_session.empty()) response.set(mcp_http::session_header, new_session);
  response.keep_alive(keep_alive);
  return response;
}

/// The client of a POST being answered, watched while the answer is awaited: a client that closes
/// its connection (or writes while its answer is still to come, which no client of this protocol
/// does) has gone, and its reply is abandoned. Its execution goes on: MCP says a disconnection is
/// not a cancellation.
struct client_watch {
  bool gone = false;
};

awaitable<void> watch_client(asio::ip::tcp::socket& socket, std::shared_ptr<post_reply> reply,
                             std::shared_ptr<client_watch> watch) {
  auto [ec] = co_await socket.async_wait(asio::ip::tcp::socket::wait_read, use_tuple);
  if (ec) co_return;  // cancelled: the answer went out
  watch->gone = true;
  reply->abandon();
}

template <class Stream>
std::shared_ptr<client_watch> start_watching(Stream& stream, const std::shared_ptr<post_reply>& reply) {
  auto watch = std::make_shared<client_watch>();
  auto& socket = beast::get_lowest_layer(stream).socket();
  asio::co_spawn(socket.get_executor(), watch_client(socket, reply, watch), asio::detached);
  return watch;
}

template <class Stream>
void stop_watching(Stream& stream) {
  boost::system::error_code ignored;
  beast::get_lowest_layer(stream).socket().cancel(ignored);
}

/// Counts a POST of a session as being answered while it lives, and the session as used at both
/// ends (a long SSE stream is use).
class answering_guard {
 public:
  explicit answering_guard(std::shared_ptr<http_session> entry) : entry_(std::move(entry)) {
    ++entry_->in_flight;
    entry_->last_used = mcp_clock::now();
  }
  ~answering_guard() {
    --entry_->in_flight;
    entry_->last_used = mcp_clock::now();
  }
  answering_guard(const answering_guard&) = delete;
  answering_guard& operator=(const answering_guard&) = delete;

 private:
  std::shared_ptr<http_session> entry_;
};

}  // namespace

template <class Stream>
awaitable<void> mcp_http_server::impl::serve_requests(Stream& stream) {
  beast::flat_buffer buffer;
  bool first = true;
  for (;;) {
    // No body limit yet: handle() applies max_request_bytes, after the checks that need no body.
    http::request_parser<http::empty_body> header;
    const double timeout = first ? options.request_timeout_seconds : options.idle_timeout_seconds;
    const auto ec = co_await read_request_header(stream, buffer, header, timeout);
    if (ec) {
      if (ec == http::error::header_limit)
        co_await refuse(stream, http_refusal::too_large, "the request header is too large", false, 431);
      co_return;
    }
    first = false;
    const bool keep = co_await handle(stream, buffer, header);
    if (!keep) co_return;
  }
}

template <class Stream>
awaitable<bool> mcp_http_server::impl::refuse(Stream& stream, http_refusal why, std::string words, bool keep_alive,
                                              unsigned status) {
  count([why](auto& c) { ++c.refused[why]; });
  auto response = response_of(status ? status : mcp_http::status_of(why), keep_alive);
  response.set(http::field::content_type, json_type);
  if (why == http_refusal::unauthorized) response.set(http::field::www_authenticate, "Bearer");
  if (why == http_refusal::method_not_allowed) response.set(http::field::allow, "POST, DELETE");
  response.body() = mcp_http::refusal_body(why, words);
  const bool written = co_await write_whole(stream, response, options.write_timeout_seconds);
  if (written && !keep_alive) co_await close_unread(beast::get_lowest_layer(stream), unread_linger_seconds);
  co_return written && keep_alive;
}

template <class Stream>
awaitable<bool> mcp_http_server::impl::handle(Stream& stream, beast::flat_buffer& buffer,
                                              http::request_parser<http::empty_body>& header) {
  const auto& request = header.get();
  // A refusal before the body is read keeps the connection only when there is no body: what is left
  // of one would be read as the next request.
  const bool bodiless = !request.chunked() && header.content_length().value_or(0) == 0;
  const bool keep_alive = request.keep_alive();
  const bool keep_unread = keep_alive && bodiless;
  if (stopping) co_return co_await refuse(stream, http_refusal::shutting_down, "the server is shutting down", false);
  if (too_many_fields(request))
    co_return co_await refuse(stream, http_refusal::too_large, "too many header fields", false, 431);
  if (!mcp_http::is_endpoint(request.target()))
    co_return co_await refuse(stream, http_refusal::no_such_path, "the MCP endpoint is /mcp", keep_unread);
  std::optional<std::string_view> origin;
  if (const auto field = request.find(http::field::origin); field != request.end()) origin = field->value();
  if (!mcp_http::origin_allowed(origin, options.listen_host))
    co_return co_await refuse(stream, http_refusal::forbidden_origin,
                              fmt::format("the origin {} is neither loopback nor this server's host",
                                          peer_excerpt(*origin, 100)),
                              keep_unread);
  const auto client = credentials.authenticate(request[http::field::authorization]);
  if (!client)
    co_return co_await refuse(stream, http_refusal::unauthorized, "a bearer token of the server's token file is needed",
                              keep_unread);
  const auto method = request.method();
  if (method == http::verb::get)
    co_return co_await refuse(stream, http_refusal::method_not_allowed,
                              "this server opens no stream of its own: each answer comes on its POST", keep_unread);
  if (method != http::verb::post && method != http::verb::delete_)
    co_return co_await refuse(stream, http_refusal::method_not_allowed, "the endpoint takes POST and DELETE", keep_unread);
  if (const auto version = request[mcp_http::version_header]; !version.empty() && !mcp_http::speaks_version(version))
    co_return co_await refuse(stream, http_refusal::unsupported_protocol_version,
                              fmt::format("{} {} is not spoken here: {} or {}", mcp_http::version_header,
                                          peer_excerpt(version, 40), mcp_server_versions[0], mcp_server_versions[1]),
                              keep_unread);
  if (method == http::verb::delete_) {
    const std::string session_id(request[mcp_http::session_header]);
    co_return co_await end_session(stream, *client, session_id, keep_unread);
  }

  const auto limit = options.max_request_bytes;
  const auto too_large = fmt::format("a message is at most {} bytes", limit);
  // A declared length is checked here, before a byte of the body is read (Beast's body parser
  // never compares it with its limit); a chunked body is checked by the parser as it arrives.
  if (const auto declared = header.content_length(); declared && *declared > limit)
    co_return co_await refuse(stream, http_refusal::too_large, too_large, false);
  http::request_parser<http::string_body> body(std::move(header));
  body.body_limit(limit);
  beast::get_lowest_layer(stream).expires_after(millis(options.request_timeout_seconds));
  auto [ec, n] = co_await http::async_read(stream, buffer, body, use_tuple);
  if (ec == http::error::body_limit) co_return co_await refuse(stream, http_refusal::too_large, too_large, false);
  if (ec) co_return false;  // the body did not arrive in time, or the client went away
  co_return co_await post(stream, *client, body.get(), keep_alive);
}

template <class Stream>
awaitable<bool> mcp_http_server::impl::post(Stream& stream, const std::string& client,
                                            http::request<http::string_body>& request, bool keep_alive) {
  const std::string session_id(request[mcp_http::session_header]);
  const std::string message = std::move(request.body());
  const auto outline = mcp_http::outline_of(message);
  std::shared_ptr<http_session> entry;
  bool opened = false;
  if (session_id.empty()) {
    if (outline.method != "initialize" || !outline.id)
      co_return co_await refuse(stream, http_refusal::missing_session_id,
                                fmt::format("every message but initialize needs the {} header initialize's answer "
                                            "carried",
                                            mcp_http::session_header),
                                keep_alive);
    auto made = sessions.open(session_options, client);
    if (!made)
      co_return co_await refuse(stream, http_refusal::session_failed, "a session could not be opened: " +
                                                                      made.error().message(),
                                keep_alive);
    if (!made.value())
      co_return co_await refuse(stream, http_refusal::too_many_sessions,
                                fmt::format("{} sessions are open, the most this server holds: end one (DELETE) or "
                                            "wait for one to expire",
                                            options.max_sessions),
                                keep_alive);
    entry = std::move(made).value();
    opened = true;
  } else {
    entry = sessions.find(session_id, client);
    if (!entry)
      co_return co_await refuse(stream, http_refusal::unknown_session,
                                "no such session: it expired, was deleted, or never was; initialize a new one",
                                keep_alive);
  }
  if (entry->in_flight >= options.max_requests_in_flight)
    co_return co_await refuse(stream, http_refusal::too_many_requests,
                              fmt::format("{} requests of this session are being answered, the most it may have; "
                                          "nothing was done",
                                          entry->in_flight),
                              keep_alive);
  answering_guard answering(entry);

  const bool streamed =
      outline.method == "tools/call" && mcp_http::accepts_event_stream(request[http::field::accept]);
  auto reply = std::make_shared<post_reply>(
      io.get_executor(), streamed ? post_reply::form::event_stream : post_reply::form::single_answer,
      options.max_unsent_bytes);
  if (outline.id) entry->wait_for(*outline.id, reply);
  const auto receipt = entry->session->receive(message, [reply](mcp_outgoing out) { reply->put(std::move(out)); });
  // An initialize that failed (its answer an error) makes no session: it is forgotten once that
  // answer is out, and the answer carries no id.
  const bool made_session = opened && entry->session->initialized();
  const bool discard = opened && !made_session;
  if (made_session) count([](auto& c) { ++c.sessions_opened; });
  note_sessions();
  using kind = mcp_receipt::kind;
  if (discard && receipt.what != kind::answering) {
    sessions.forget(entry);
    note_sessions();
  }
  if (receipt.what == kind::rejected) {
    count([](auto& c) { ++c.refused[http_refusal::rejected_message]; });
    auto response = response_of(400, keep_alive);
    response.set(http::field::content_type, json_type);
    response.body() = receipt.error_json;
    const bool written = co_await write_whole(stream, response, options.write_timeout_seconds);
    co_return written && keep_alive;
  }
  if (receipt.what == kind::accepted) {
    // A cancel the session accepted: the POST waiting for that request's answer ends without it.
    if (outline.cancelled_id) entry->abandon(outline.cancelled_id);
    auto response = response_of(202, keep_alive);
    const bool written = co_await write_whole(stream, response, options.write_timeout_seconds);
    co_return written && keep_alive;
  }
  const std::string_view new_session = made_session ? std::string_view(entry->id) : std::string_view{};
  bool keep = false;
  if (streamed) keep = co_await answer_streamed(stream, reply, keep_alive, new_session);
  else keep = co_await answer_once(stream, reply, keep_alive, new_session);
  if (discard) {
    sessions.forget(entry);
    note_sessions();
  }
  co_return keep;
}

template <class Stream>
awaitable<bool> mcp_http_server::impl::answer_once(Stream& stream, std::shared_ptr<post_reply> reply, bool keep_alive,
                                                   std::string_view new_session) {
  auto taken = reply->take();
  if (!taken.answer) {
    const auto watch = start_watching(stream, reply);
    while (!taken.answer && !reply->abandoned()) {
      co_await reply->wait();
      taken = reply->take();
    }
    stop_watching(stream);
    if (watch->gone) count([](auto& c) { ++c.answers_undelivered; });
  }
  // Abandoned (cancelled, its session ended, its client gone): there is no answer to give.
  if (!taken.answer) co_return false;
  auto response = response_of(200, keep_alive, new_session);
  response.set(http::field::content_type, json_type);
  const auto bytes = taken.messages.back().size();
  response.body() = std::move(taken.messages.back());
  const bool written = co_await write_whole(stream, response, options.write_timeout_seconds);
  reply->sent(bytes);
  if (!written) count([](auto& c) { ++c.answers_undelivered; });
  count([&](auto& c) { c.progress_dropped += reply->dropped(); });
  co_return written && keep_alive;
}

template <class Stream>
awaitable<bool> mcp_http_server::impl::answer_streamed(Stream& stream, std::shared_ptr<post_reply> reply,
                                                       bool keep_alive, std::string_view new_session) {
  http::response<http::empty_body> head{http::status::ok, 11};
  head.set(http::field::content_type, mcp_http::event_stream);
  head.set(http::field::cache_control, "no-store");
  if (!new_session.empty()) head.set(mcp_http::session_header, new_session);
  head.keep_alive(keep_alive);
  head.chunked(true);
  http::response_serializer<http::empty_body> serializer(head);
  auto& tcp = beast::get_lowest_layer(stream);
  tcp.expires_after(millis(options.write_timeout_seconds));
  auto [head_ec, head_n] = co_await http::async_write_header(stream, serializer, use_tuple);
  bool writable = !head_ec;
  bool answered = false;
  const auto watch = start_watching(stream, reply);
  while (writable) {
    auto taken = reply->take();
    if (taken.messages.empty()) {
      if (reply->abandoned()) break;
      co_await reply->wait();
      continue;
    }
    std::string events;
    std::size_t bytes = 0;
    for (const auto& message : taken.messages) {
      bytes += message.size();
      events += mcp_http::sse_event(message);
    }
    // A client that does not take this within the write timeout has its connection closed.
    tcp.expires_after(millis(options.write_timeout_seconds));
    auto [ec, n] = co_await asio::async_write(stream, http::make_chunk(asio::buffer(events)), use_tuple);
    reply->sent(bytes);
    writable = !ec;
    answered = writable && taken.answer;
    if (answered) break;
  }
  stop_watching(stream);
  count([&](auto& c) { c.progress_dropped += reply->dropped(); });
  if (!answered && (!writable || watch->gone)) {
    reply->abandon();
    count([](auto& c) { ++c.answers_undelivered; });
    co_return false;
  }
  // Answered, or the request was cancelled (or its session ended): the stream ends here.
  tcp.expires_after(millis(options.write_timeout_seconds));
  auto [end_ec, end_n] = co_await asio::async_write(stream, http::make_chunk_last(), use_tuple);
  co_return !end_ec && keep_alive;
}

template <class Stream>
awaitable<bool> mcp_http_server::impl::end_session(Stream& stream, const std::string& client,
                                                   std::string_view session_id, bool keep_alive) {
  if (session_id.empty())
    co_return co_await refuse(stream, http_refusal::missing_session_id,
                              fmt::format("DELETE ends the session its {} header names", mcp_http::session_header),
                              keep_alive);
  auto entry = sessions.find(std::string(session_id), client);
  if (!entry) co_return co_await refuse(stream, http_refusal::unknown_session, "no such session", keep_alive);
  sessions.forget(entry);  // its executions are cancelled by the reaper; its waiting POSTs end
  count([](auto& c) { ++c.sessions_deleted; });
  note_sessions();
  auto response = response_of(200, keep_alive);
  const bool written = co_await write_whole(stream, response, options.write_timeout_seconds);
  co_return written && keep_alive;
}

template awaitable<void> mcp_http_server::impl::serve_requests(beast::tcp_stream&);
template awaitable<void> mcp_http_server::impl::serve_requests(tls_stream&);

}  // namespace psych

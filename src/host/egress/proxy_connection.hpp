#pragma once
// One client connection of the egress proxy, from its request head to its end (docs/network.md,
// "The proxy"): the head read and admitted (proxy_request.hpp), the destination reached
// (upstream_dialer.hpp), then a CONNECT tunnel (proxy_tunnel.cpp) or one plain request sent on
// (proxy_forward.cpp), the bytes moved in pieces (proxy_relay.cpp). Every step runs under the
// connection's clock; every refusal is answered, recorded, and followed by a close. Everything here
// runs on the proxy's one thread.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "egress/connection_clock.hpp"
#include "egress/egress_meters.hpp"
#include "egress/egress_proxy.hpp"
#include "egress/name_cache.hpp"
#include "egress/proxy_refusal.hpp"
#include "egress/proxy_request.hpp"
#include "egress/upstream_dialer.hpp"

namespace psych::host::egress {

class proxy_connection;

/// What every connection of one proxy shares. Outlives the proxy's event loop.
struct proxy_context {
  egress_proxy_options options;
  egress_tally tally;
  /// The listeners' own addresses: a destination that is one of them would loop back into the proxy.
  std::vector<boost::asio::ip::tcp::endpoint> own_listeners;
  std::size_t serving = 0;                     ///< connections admitted, at most options.max_connections
  std::size_t turning_away = 0;                ///< connections being answered 503, at most as many again
  std::unordered_set<proxy_connection*> live;  ///< for stop()
  name_cache names;                            ///< what the connections' names resolved to
};

/// Which of the context's counts a connection holds a place in.
enum class admission { served, turned_away };

class proxy_connection : public std::enable_shared_from_this<proxy_connection> {
 public:
  proxy_connection(proxy_context& context, boost::asio::ip::tcp::socket client, admission place);
  proxy_connection(const proxy_connection&) = delete;
  proxy_connection& operator=(const proxy_connection&) = delete;
  ~proxy_connection();

  /// Serves the connection to its end.
  static boost::asio::awaitable<void> serve(std::shared_ptr<proxy_connection> self);
  /// Answers 503 (the proxy serves max_connections already) and closes.
  static boost::asio::awaitable<void> turn_away(std::shared_ptr<proxy_connection> self);
  /// Ends the connection now, whatever it waits on (the proxy stops).
  void close();

 private:
  /// How one direction of relaying ended.
  enum class relay_end {
    finished,  ///< its source ended (end of file): the other side's sending half is shut
    failed,    ///< an error on either socket: the connection ends
    stopped,   ///< the connection is ending for another reason (a bound, the other direction)
    bound,     ///< connection_bytes moved: the connection ends
  };
  /// What a CONNECT tunnel's first bytes allow.
  enum class first_bytes { pass, refused, gone };

  static boost::asio::awaitable<void> watch(std::shared_ptr<proxy_connection> self);
  void expire();
  /// Ends both directions: every wait on either socket returns.
  void end_both();
  void record(const proxy_refusal& refusal);
  /// Records the refusal, answers it (when it has a status), and closes.
  boost::asio::awaitable<void> refuse(const proxy_refusal& refusal);
  /// Closes the client without losing what was just written to it: a close with unread bytes
  /// would reset the connection, so its sending half is shut and what still comes is dropped for
  /// a moment first.
  boost::asio::awaitable<void> close_gently();
  boost::asio::awaitable<void> serve_head();

  // proxy_tunnel.cpp
  /// Whether the target's port is one of options.tls_ports.
  [[nodiscard]] bool tls_only(const proxy_target& target) const;
  boost::asio::awaitable<void> tunnel(const proxy_target& target);
  boost::asio::awaitable<relay_end> program_to_world(const proxy_target& target);
  boost::asio::awaitable<relay_end> world_to_program(bool after_hello);
  boost::asio::awaitable<first_bytes> inspect_first_bytes(const proxy_target& target, std::string& first);
  /// Records the refusal, sends the TLS alert when `alert` (and the world is not mid-write to the
  /// program), and closes the program's side.
  boost::asio::awaitable<first_bytes> refuse_in_tunnel(const proxy_refusal& refusal, bool alert);
  void open_gate();

  // proxy_forward.cpp
  boost::asio::awaitable<void> forward(const proxy_target& target);
  boost::asio::awaitable<relay_end> send_body(bool chunked);
  boost::asio::awaitable<relay_end> answer_back();

  // proxy_relay.cpp
  boost::asio::awaitable<relay_end> relay(boost::asio::ip::tcp::socket& from, boost::asio::ip::tcp::socket& to);
  /// Writes `bytes` whole to one side, counted against the byte bound: `bound` when they do not fit
  /// in what is left of it (nothing is written then).
  boost::asio::awaitable<relay_end> send(boost::asio::ip::tcp::socket& to, std::string_view bytes);
  /// After a tunnel or a forward: a cut counted by its bound.
  void count_cut(relay_end one, relay_end other);

  proxy_context& context_;
  admission place_;
  boost::asio::ip::tcp::socket client_;
  boost::asio::ip::tcp::socket upstream_;
  connection_clock clock_;
  upstream_dialer dialer_;
  boost::beast::flat_buffer buffer_;
  boost::beast::http::request_parser<boost::beast::http::buffer_body> parser_;
  std::uint64_t bytes_left_;
  std::size_t expiries_ = 0;
  bool ending_ = false;
  bool writing_to_program_ = false;
  /// A tunnel's world-to-program direction waits here until the program's ClientHello has passed.
  boost::asio::steady_timer gate_;
  bool gate_open_ = false;
  /// Where the request asked to go, for the meters' refusals.
  std::string asked_host_;
  std::uint16_t asked_port_ = 0;
};

}  // namespace psych::host::egress

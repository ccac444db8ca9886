// psych_fake_service: a sandbox service that misbehaves on purpose, for tests/remote. It listens on
// 127.0.0.1 (an ephemeral port, printed as the first line of standard output), speaks TLS when given
// --cert and --key, answers GET /v1/describe with a valid description (ready, isolated, every grade
// enforced) unless --mode describe_hang, and answers POST /v1/executions/{id} as --mode says:
//
//   valid                 accepted, an output chunk, done (value 42)
//   endless_line          accepted, then one line that never ends, streamed as fast as it goes
//   empty_lines           accepted, then millions of "\n"
//   slow                  accepted, one byte a second
//   drip                  accepted, then one byte a second for ever (whole output frames, byte by
//                         byte), and a cancel is read but never answered: a client that resets a
//                         per-read timer at each byte, or waits for the cancel's answer, never ends
//   status_500            HTTP 500
//   redirect_302          302 to http://example.invalid/ (a header value only: nothing connects there)
//   html_200              200 text/html
//   close_mid_frame       accepted, half a frame, then the connection is closed
//   frames_after_done     accepted, done, then one more frame
//   done_before_accepted  done first
//   huge_header           a response header of about 1 MiB
//   wrong_execution_id    a valid stream whose `accepted` names another execution
//   unknown_error_code    an `error` frame whose code this client does not have (a newer service's)
//   describe_hang         describe is never answered (the connection is held open)
//   accepted_then_silent  accepted, then nothing until the client goes away
//   results_unknown       accepted, a call, then nothing until the client goes away; the call's
//                         results are answered 404 (as by a replica that does not run it)
//
// Cancels are answered 200 (but in drip), and results too (but in results_unknown). After reading each request it rewrites --counts FILE with
// what it has received so far ("describe N", "execute N", "results N", "cancel N", "other N"), so a
// test can check that an execution was POSTed once and that a cancel was posted. Beast parses and
// writes all HTTP; one thread per connection, synchronous.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "http/base64.hpp"
#include "psych/host/remote_protocol.hpp"
#include "psych/host/result_json.hpp"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string mode;
std::string counts_file;

struct counters {
  std::mutex mutex;
  int describe = 0, execute = 0, results = 0, cancel = 0, other = 0;

  template <class F>
  void add(F&& f) {
    std::lock_guard lock(mutex);
    f(*this);
    if (counts_file.empty()) return;
    const std::string temp = counts_file + ".tmp";
    {
      std::ofstream out(temp, std::ios::trunc);
      out << "describe " << describe << "\nexecute " << execute << "\nresults " << results << "\ncancel " << cancel
          << "\nother " << other << "\n";
    }
    std::rename(temp.c_str(), counts_file.c_str());
  }
} counts;

std::string description_json() {
  psych::description d;
  d.ready = true;
  d.isolation = psych::isolation_level::isolated;
  auto& g = d.guarantees;
  for (auto* grade : {&g.filesystem, &g.network, &g.process_tree, &g.identity, &g.cpu, &g.memory, &g.file_size,
                      &g.process_count, &g.wall_clock, &g.environment})
    *grade = psych::enforcement::enforced;
  d.limit_ceiling = psych::sandbox_limits{};  // the spec's defaults: 30 s of wall clock, ...
  d.backend = "fake";
  d.interpreter = "/usr/bin/python3";
  d.launcher = "fake";
  return psych::protocol::encode_json(d);
}

std::string done_line(std::string value = "42") {
  psych::remote::execution_outcome o;
  o.value = psych::json_text{std::move(value)};
  o.stdout_size = 3;
  o.duration_seconds = 0.01;
  o.isolation = psych::isolation_level::isolated;
  return psych::protocol::encode_frame(psych::remote::done_frame{std::move(o)});
}

std::string accepted_line(const std::string& id) {
  return psych::protocol::encode_frame(psych::remote::accepted_frame{
      .version = std::string(psych::remote::protocol_version), .execution_id = id, .backend = "fake"});
}

std::string output_line(std::string_view bytes) {
  return psych::protocol::encode_frame(
      psych::remote::output_frame{.stream = "stdout", .index = 0, .data = psych::host::base64_encode(bytes)});
}

template <class Stream>
tcp::socket& socket_of(Stream& stream) {
  if constexpr (std::is_same_v<Stream, tcp::socket>) return stream;
  else return stream.next_layer();
}

/// Blocks until the peer closes the connection (or sends anything): how a hanging service waits.
template <class Stream>
void hold_until_peer_leaves(Stream& stream) {
  boost::system::error_code ec;
  socket_of(stream).wait(tcp::socket::wait_read, ec);
}

template <class Stream>
void simple(Stream& stream, http::status status, std::string content_type, std::string body, bool keep_alive,
            std::optional<std::string> location = std::nullopt) {
  http::response<http::string_body> response{status, 11};
  response.set(http::field::content_type, content_type);
  if (location) response.set(http::field::location, *location);
  response.keep_alive(keep_alive);
  response.body() = std::move(body);
  response.prepare_payload();
  boost::system::error_code ec;
  http::write(stream, response, ec);
}

template <class Stream>
void execution(Stream& stream, const std::string& id) {
  boost::system::error_code ec;
  if (mode == "status_500")
    return simple(stream, http::status::internal_server_error, "application/json",
                  R"({"error":"internal","message":"the fake service fails on purpose"})", false);
  if (mode == "redirect_302")
    return simple(stream, http::status::found, "text/plain", "moved", false, "http://example.invalid/");
  if (mode == "html_200")
    return simple(stream, http::status::ok, "text/html", "<html><body>hello</body></html>", false);

  http::response<http::empty_body> response{http::status::ok, 11};
  response.set(http::field::content_type, "application/x-ndjson");
  if (mode == "huge_header") {
    // Many fields of 8 KiB: about 1 MiB of header.
    const std::string filler(8 * 1024, 'h');
    for (int i = 0; i < 128; ++i) response.insert("X-Filler-" + std::to_string(i), filler);
  }
  response.keep_alive(false);
  response.chunked(true);
  http::response_serializer<http::empty_body> serializer(response);
  http::write_header(stream, serializer, ec);
  if (ec) return;
  const auto send = [&](std::string_view bytes) {
    asio::write(stream, http::make_chunk(asio::buffer(bytes.data(), bytes.size())), ec);
    return !ec;
  };
  const auto end = [&] { asio::write(stream, http::make_chunk_last(), ec); };

  if (mode == "huge_header") {
    if (send(accepted_line(id)) && send(done_line())) end();
    return;
  }
  if (mode == "done_before_accepted") {
    if (send(done_line())) end();
    return;
  }
  if (mode == "unknown_error_code") {
    if (send(R"({"type":"error","code":"quota_exceeded","message":"the tenant's quota is spent"})"
             "\n"))
      end();
    return;
  }
  if (mode == "wrong_execution_id") {
    if (send(accepted_line("somebody-elses-execution")) && send(done_line())) end();
    return;
  }
  if (!send(accepted_line(id))) return;
  if (mode == "valid") {
    if (send(output_line("hi\n")) && send(done_line())) end();
  } else if (mode == "frames_after_done") {
    if (send(done_line()) && send(output_line("late\n"))) end();
  } else if (mode == "close_mid_frame") {
    const std::string done = done_line();
    send(std::string_view(done).substr(0, done.size() / 2));
    socket_of(stream).shutdown(tcp::socket::shutdown_both, ec);
    socket_of(stream).close(ec);
  } else if (mode == "endless_line") {
    const std::string piece(64 * 1024, 'x');
    send("{\"type\":\"output\",\"stream\":\"stdout\",\"data\":\"");
    while (send(piece)) {
    }
  } else if (mode == "empty_lines") {
    const std::string piece(64 * 1024, '\n');
    for (int i = 0; i < 64 && send(piece); ++i) {  // 4 Mi empty lines
    }
    hold_until_peer_leaves(stream);
  } else if (mode == "slow") {
    const std::string frame = output_line("slow\n");
    for (const char c : frame) {
      if (!send(std::string_view(&c, 1))) return;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    hold_until_peer_leaves(stream);
  } else if (mode == "drip") {
    for (const std::string frame = output_line("drip\n");;) {
      for (const char c : frame) {
        if (!send(std::string_view(&c, 1))) return;
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
  } else if (mode == "accepted_then_silent") {
    hold_until_peer_leaves(stream);
  } else if (mode == "results_unknown") {
    const auto call = psych::protocol::encode_frame(
        psych::protocol::call_frame{.id = 1, .tool = "lookup", .arguments = psych::json_text{"{}"}});
    if (send(call)) hold_until_peer_leaves(stream);
  }
}

template <class Stream>
void serve(Stream& stream) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    boost::system::error_code ec;
    http::read(stream, buffer, parser, ec);
    if (ec) return;
    const auto& request = parser.get();
    const std::string target(request.target());
    const std::string prefix = "/v1/executions/";
    if (target == "/v1/describe" || target.starts_with("/v1/describe?")) {
      counts.add([](counters& c) { ++c.describe; });
      if (mode == "describe_hang") return hold_until_peer_leaves(stream);
      simple(stream, http::status::ok, "application/json", description_json(), request.keep_alive());
      if (!request.keep_alive()) return;
      continue;
    }
    if (target.starts_with(prefix) && target.ends_with("/cancel")) {
      counts.add([](counters& c) { ++c.cancel; });
      if (mode == "drip") return hold_until_peer_leaves(stream);
      simple(stream, http::status::ok, "application/json", "{}", request.keep_alive());
      if (!request.keep_alive()) return;
      continue;
    }
    if (target.starts_with(prefix) && target.ends_with("/results")) {
      counts.add([](counters& c) { ++c.results; });
      if (mode == "results_unknown")
        simple(stream, http::status::not_found, "application/json",
               R"({"error":"not_found","message":"no such execution is running"})", request.keep_alive());
      else
        simple(stream, http::status::ok, "application/json", R"({"delivered":0})", request.keep_alive());
      if (!request.keep_alive()) return;
      continue;
    }
    if (target.starts_with(prefix) && request.method() == http::verb::post) {
      counts.add([](counters& c) { ++c.execute; });
      return execution(stream, target.substr(prefix.size()));
    }
    counts.add([](counters& c) { ++c.other; });
    simple(stream, http::status::not_found, "application/json", R"({"error":"not_found","message":"no"})", false);
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string cert, key;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--mode") mode = argv[i + 1];
    else if (flag == "--counts") counts_file = argv[i + 1];
    else if (flag == "--cert") cert = argv[i + 1];
    else if (flag == "--key") key = argv[i + 1];
    else {
      std::cerr << "psych_fake_service: unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (mode.empty()) {
    std::cerr << "usage: psych_fake_service --mode MODE [--counts FILE] [--cert PEM --key PEM]\n";
    return 2;
  }
  asio::io_context io;
  std::optional<asio::ssl::context> tls;
  if (!cert.empty()) {
    tls.emplace(asio::ssl::context::tls_server);
    tls->use_certificate_chain_file(cert);
    tls->use_private_key_file(key, asio::ssl::context::pem);
  }
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  counts.add([](counters&) {});
  std::cout << acceptor.local_endpoint().port() << std::endl;
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket(io);
    acceptor.accept(socket, ec);
    if (ec) continue;
    std::thread([socket = std::move(socket), &tls]() mutable {
      boost::system::error_code ignored;
      if (!tls) {
        serve(socket);
        socket.close(ignored);
        return;
      }
      asio::ssl::stream<tcp::socket> stream(std::move(socket), *tls);
      stream.handshake(asio::ssl::stream_base::server, ignored);
      if (!ignored) serve(stream);
      stream.next_layer().close(ignored);
    }).detach();
  }
}

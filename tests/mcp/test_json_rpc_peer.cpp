// json_rpc_peer (src/host/mcp/json_rpc_peer.hpp) with this test as the other side, on two pipes it
// holds ends of: what happens to a request the other side's full input pipe keeps from being
// written.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <future>
#include <string>

#include "text.hpp"
#include "pipe_pair.hpp"
#include "mcp/json_rpc_peer.hpp"

using psych::mcp_error_kind;
using psych::host::json_rpc_peer;
using namespace std::chrono_literals;

using psych::testing::contains;

namespace {

/// The other side: the peer reads `to_peer` and writes `from_peer`; this test holds the other ends.
struct session {
  pipe_pair to_peer;
  pipe_pair from_peer;
  int from_peer_read = from_peer.read;
  int to_peer_write = to_peer.write;
  int filler = ::fcntl(from_peer.write, F_DUPFD_CLOEXEC, 0);  ///< writes into the peer's output pipe
  json_rpc_peer peer{{.server_name = "test", .write_limit = 5s},
                     {},
                     to_peer.give_read(),
                     from_peer.give_write(),
                     -1,
                     -1};
  ~session() { ::close(filler); }

  /// Fills the peer's output pipe to the brim; the byte count.
  std::size_t fill() {
    REQUIRE(::fcntl(filler, F_SETFL, O_NONBLOCK) == 0);
    const std::string chunk(4096, '#');
    std::size_t filled = 0;
    for (std::size_t size = chunk.size(); size > 0; size /= 2)
      while (true) {
        const ssize_t n = ::write(filler, chunk.data(), size);
        if (n <= 0) break;
        filled += static_cast<std::size_t>(n);
      }
    REQUIRE(errno == EAGAIN);
    return filled;
  }

  std::string read_bytes(std::size_t count) {
    std::string bytes(count, '\0');
    std::size_t got = 0;
    while (got < count) {
      const ssize_t n = ::read(from_peer_read, bytes.data() + got, count - got);
      REQUIRE(n > 0);
      got += static_cast<std::size_t>(n);
    }
    return bytes;
  }

  std::string read_line() {
    std::string line;
    char c = 0;
    while (::read(from_peer_read, &c, 1) == 1 && c != '\n') line += c;
    return line;
  }
};

}  // namespace

TEST_CASE("json_rpc_peer: a request never begun by its time limit is withdrawn; no cancel follows and the peer goes on") {
  session s;
  const std::size_t filled = s.fill();
  auto withdrawn = s.peer.request("first", "{}", 300ms, {});
  REQUIRE_FALSE(withdrawn);
  CHECK(withdrawn.error().kind == mcp_error_kind::timeout);
  CHECK(s.peer.usable());

  auto other_side = std::async(std::launch::async, [&] {
    const std::string filler = s.read_bytes(filled);
    CHECK(filler.find_first_not_of('#') == std::string::npos);
    const std::string line = s.read_line();  // the next thing written: the second request, nothing else
    const std::string answer = R"({"jsonrpc":"2.0","id":2,"result":{"ok":true}})"
                               "\n";
    CHECK(::write(s.to_peer_write, answer.data(), answer.size()) == static_cast<ssize_t>(answer.size()));
    return line;
  });
  auto answered = s.peer.request("second", "{}", 5s, {});
  const std::string seen = other_side.get();
  CHECK(seen == R"({"jsonrpc":"2.0","id":2,"method":"second","params":{}})");
  CHECK_FALSE(contains(seen, "first"));
  CHECK_FALSE(contains(seen, "cancelled"));
  REQUIRE_MESSAGE(answered, (answered ? std::string{} : answered.error().message()));
  CHECK(answered.value() == R"({"ok":true})");
}

TEST_CASE("json_rpc_peer: a line left half written at its time limit breaks the peer, since nothing can follow it") {
  session s;
  const std::string big = "{\"blob\":\"" + std::string(std::size_t{256} << 10, 'x') + "\"}";  // past the pipe's 64 KiB
  // Long enough for the write to have begun (it fills the pipe at once) even on a busy host under
  // ThreadSanitizer; one that had not begun would be a plain timeout, and the peer still usable.
  auto half = s.peer.request("big", big, 2s, {});
  REQUIRE_FALSE(half);
  CHECK(half.error().kind == mcp_error_kind::protocol_violation);
  CHECK(contains(half.error().detail, "in the middle of a message"));
  CHECK_FALSE(s.peer.usable());
  auto after = s.peer.request("after", "{}", 1s, {});
  REQUIRE_FALSE(after);
  CHECK(after.error().kind == mcp_error_kind::unusable);
}

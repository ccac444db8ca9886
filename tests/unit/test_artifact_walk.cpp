// Collecting a workspace's files (src/host/execution/artifact_walk_posix.cpp): plain files come back by
// workspace-relative path; symlinks, hardlinks, FIFOs, sockets and devices are counted, never
// followed or read; the limits count what they leave out; and a program racing to swap a
// directory or a file for a symlink never leads the walk out of the workspace.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "execution/artifact_walk.hpp"
#include "skip.hpp"

using namespace psych;
using namespace std::string_literals;
namespace fs = std::filesystem;

namespace {

/// A fresh directory per test, removed with everything in it (remove_all never follows a link).
/// `ws` is the workspace; `outside` sits next to it, holding what the walk must never reach.
class walk_dir {
 public:
  walk_dir() {
    std::string pattern = "/tmp/psych-walk-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    root = pattern;
    ws = root / "ws";
    outside = root / "outside";
    fs::create_directory(ws);
    fs::create_directory(outside);
  }
  walk_dir(const walk_dir&) = delete;
  walk_dir& operator=(const walk_dir&) = delete;
  ~walk_dir() {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  }
  fs::path root, ws, outside;
};

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REQUIRE(out.good());
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

artifact_policy collecting() {
  artifact_policy policy;
  policy.collection = artifact_collection::collect;
  return policy;
}

host::harvest collect(const fs::path& ws, const artifact_policy& policy = collecting()) {
  auto got = host::collect_artifacts(ws.string(), policy);
  REQUIRE(got.has_value());
  return std::move(got).value();
}

std::uint64_t omitted(const host::harvest& h, omission_reason why) {
  const auto it = h.omitted.find(why);
  return it == h.omitted.end() ? 0 : it->second;
}

std::vector<std::string> paths_of(const host::harvest& h) {
  std::vector<std::string> paths;
  for (const auto& file : h.files) paths.push_back(file.path);
  return paths;
}

/// True when `needle` occurs in any collected file's bytes or path.
bool appears_anywhere(const host::harvest& h, const std::string& needle) {
  for (const auto& file : h.files)
    if (file.bytes.find(needle) != std::string::npos || file.path.find(needle) != std::string::npos) return true;
  return false;
}

/// What the walk must never hand back, kept outside the workspace.
const std::string secret = "psych-walk-secret-7d1f0c9a";

}  // namespace

TEST_CASE("artifact walk: nested files come back by workspace-relative path, sorted, byte for byte") {
  walk_dir dir;
  const std::string binary("\x00\x01\xff\n\x00tail", 9);
  const std::string odd_name = "caf\xff\xfe";  // not UTF-8: collected with its bytes as they are
  fs::create_directories(dir.ws / "sub" / "deeper");
  fs::create_directory(dir.ws / "empty-dir");
  write_file(dir.ws / "z.txt", "last\n");
  write_file(dir.ws / "a.txt", "first\n");
  write_file(dir.ws / "sub" / "b.txt", "middle\n");
  write_file(dir.ws / "sub" / "deeper" / "c.bin", binary);
  write_file(dir.ws / "empty", "");
  write_file(dir.ws / odd_name, "odd");

  const auto h = collect(dir.ws);
  CHECK(paths_of(h) == std::vector<std::string>{"a.txt", odd_name, "empty", "sub/b.txt", "sub/deeper/c.bin", "z.txt"});
  REQUIRE(h.files.size() == 6);
  CHECK(h.files[0].bytes == "first\n");
  CHECK(h.files[1].bytes == "odd");
  CHECK(h.files[2].bytes.empty());
  CHECK(h.files[3].bytes == "middle\n");
  CHECK(h.files[4].bytes == binary);
  CHECK(h.files[5].bytes == "last\n");
  CHECK(h.omitted_total() == 0);
  for (const auto& path : paths_of(h)) {
    CHECK(path.front() != '/');
    CHECK(path.find("..") == std::string::npos);
  }
}

TEST_CASE("artifact walk: no descriptor is left open, whatever was met") {
  auto open_fds = [] {
    return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator());
  };
  walk_dir dir;
  fs::create_directories(dir.ws / "a" / "b" / "c");
  write_file(dir.ws / "a" / "b" / "file", "x");
  write_file(dir.ws / "big", "0123456789");
  fs::create_symlink("/etc", dir.ws / "link");
  REQUIRE(::mkfifo((dir.ws / "pipe").c_str(), 0600) == 0);
  auto policy = collecting();
  policy.max_depth = 2;
  policy.max_file_bytes = 4;
  const auto before = open_fds();
  const auto h = collect(dir.ws, policy);
  CHECK(open_fds() == before);
  CHECK(paths_of(h) == std::vector<std::string>{"a/b/file"});
  CHECK(h.omitted_total() == 4);  // too_deep a/b/c, too_large big, symlink, fifo
}

TEST_CASE("artifact walk: a policy of none collects nothing") {
  walk_dir dir;
  write_file(dir.ws / "a.txt", "first\n");
  const auto h = collect(dir.ws, artifact_policy{});
  CHECK(h.files.empty());
  CHECK(h.omitted_total() == 0);
}

TEST_CASE("artifact walk: symlinks are counted and never followed") {
  walk_dir dir;
  write_file(dir.outside / "secret", secret);
  fs::create_directory(dir.outside / "secret-dir");
  write_file(dir.outside / "secret-dir" / "inner", secret);
  write_file(dir.ws / "plain", "plain");
  fs::create_symlink(dir.outside / "secret", dir.ws / "to-file");
  fs::create_directory_symlink(dir.outside / "secret-dir", dir.ws / "to-dir");
  fs::create_symlink(dir.outside / "nothing-here", dir.ws / "dangling");
  fs::create_symlink("plain", dir.ws / "to-inside");  // even one that stays inside

  const auto h = collect(dir.ws);
  CHECK(paths_of(h) == std::vector<std::string>{"plain"});
  CHECK(omitted(h, omission_reason::symlink) == 4);
  CHECK(h.omitted_total() == 4);
  CHECK_FALSE(appears_anywhere(h, secret));
}

TEST_CASE("artifact walk: a hardlinked file is counted under every name, never read") {
  walk_dir dir;
  write_file(dir.outside / "secret", secret);
  write_file(dir.ws / "a", "shared");
  write_file(dir.ws / "plain", "plain");
  REQUIRE(::link((dir.ws / "a").c_str(), (dir.ws / "b").c_str()) == 0);
  REQUIRE(::link((dir.outside / "secret").c_str(), (dir.ws / "from-outside").c_str()) == 0);

  const auto h = collect(dir.ws);
  CHECK(paths_of(h) == std::vector<std::string>{"plain"});
  CHECK(omitted(h, omission_reason::hardlink) == 3);
  CHECK(h.omitted_total() == 3);
  CHECK_FALSE(appears_anywhere(h, secret));
}

TEST_CASE("artifact walk: a FIFO is counted and never blocks the walk") {
  walk_dir dir;
  write_file(dir.ws / "plain", "plain");
  const auto fifo = dir.ws / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);

  auto walking = std::async(std::launch::async, [&] { return host::collect_artifacts(dir.ws.string(), collecting()); });
  if (walking.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    FAIL_CHECK("the walk blocked on a FIFO");
    // Release it: a writer lets a blocked reader's open return, and closing gives it end-of-file.
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (writer >= 0) ::close(writer);
  }
  auto got = walking.get();
  REQUIRE(got.has_value());
  CHECK(paths_of(got.value()) == std::vector<std::string>{"plain"});
  CHECK(omitted(got.value(), omission_reason::fifo) == 1);
  CHECK(got.value().omitted_total() == 1);
}

TEST_CASE("artifact walk: a unix socket is counted") {
  walk_dir dir;
  const auto path = dir.ws / "sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  REQUIRE(path.string().size() < sizeof address.sun_path);
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  const int bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  ::close(fd);
  REQUIRE(bound == 0);

  const auto h = collect(dir.ws);
  CHECK(h.files.empty());
  CHECK(omitted(h, omission_reason::socket) == 1);
  CHECK(h.omitted_total() == 1);
}

TEST_CASE("artifact walk: a device node is counted") {
  walk_dir dir;
  const auto path = dir.ws / "null";
  if (::mknod(path.c_str(), S_IFCHR | 0600, ::makedev(1, 3)) != 0) {
    const int why = errno;
    REQUIRE_MESSAGE(why == EPERM, "mknod: " << std::strerror(why));
    psych::testing::skip_case("mknod of a character device is not permitted here (no CAP_MKNOD, or a user namespace)");
    return;
  }
  const auto h = collect(dir.ws);
  CHECK(h.files.empty());
  CHECK(omitted(h, omission_reason::device) == 1);
  CHECK(h.omitted_total() == 1);
}

TEST_CASE("artifact walk: limits count what they leave out") {
  walk_dir dir;
  auto policy = collecting();

  SUBCASE("a file over max_file_bytes is too_large; one exactly at it comes back") {
    policy.max_file_bytes = 4;
    write_file(dir.ws / "fits", "1234");
    write_file(dir.ws / "over", "12345");
    const auto h = collect(dir.ws, policy);
    CHECK(paths_of(h) == std::vector<std::string>{"fits"});
    CHECK(omitted(h, omission_reason::too_large) == 1);
    CHECK(h.omitted_total() == 1);
  }
  SUBCASE("files past max_files are too_many, the first in walk order are kept") {
    policy.max_files = 2;
    for (const char* name : {"a", "b", "c", "d"}) write_file(dir.ws / name, name);
    const auto h = collect(dir.ws, policy);
    CHECK(paths_of(h) == std::vector<std::string>{"a", "b"});
    CHECK(omitted(h, omission_reason::too_many) == 2);
    CHECK(h.omitted_total() == 2);
  }
  SUBCASE("a file that would pass max_total_bytes is too_many; a smaller one later still fits") {
    policy.max_total_bytes = 10;
    write_file(dir.ws / "a", "123456");
    write_file(dir.ws / "b", "123456");
    write_file(dir.ws / "c", "1234");
    const auto h = collect(dir.ws, policy);
    CHECK(paths_of(h) == std::vector<std::string>{"a", "c"});
    CHECK(omitted(h, omission_reason::too_many) == 1);
    CHECK(h.omitted_total() == 1);
  }
  SUBCASE("a directory deeper than max_depth is too_deep, once, and never entered") {
    policy.max_depth = 1;
    fs::create_directories(dir.ws / "a" / "b" / "c");
    write_file(dir.ws / "top", "top");
    write_file(dir.ws / "a" / "one", "one");
    write_file(dir.ws / "a" / "b" / "two", "two");
    write_file(dir.ws / "a" / "b" / "c" / "three", "three");
    const auto h = collect(dir.ws, policy);
    CHECK(paths_of(h) == std::vector<std::string>{"a/one", "top"});
    CHECK(omitted(h, omission_reason::too_deep) == 1);
    CHECK(h.omitted_total() == 1);
  }
  SUBCASE("max_depth 0 keeps only the workspace's own files") {
    policy.max_depth = 0;
    fs::create_directory(dir.ws / "a");
    fs::create_directory(dir.ws / "b");
    write_file(dir.ws / "top", "top");
    write_file(dir.ws / "a" / "one", "one");
    const auto h = collect(dir.ws, policy);
    CHECK(paths_of(h) == std::vector<std::string>{"top"});
    CHECK(omitted(h, omission_reason::too_deep) == 2);
  }
}

TEST_CASE("artifact walk: a racing swap for a symlink never leads the walk out of the workspace") {
  // Many racing names, so each walk crosses many windows between listing a name and opening it
  // (and, in a walk that opened a name twice, between the two opens): in pair i, directory d<i> is exchanged with s<i> -> /etc, file f<i> with
  // g<i> -> /etc/passwd, and file k<i> with l<i>, a hardlink of a secret outside. A second racer
  // does it the plain-rename way: directory r<i> moved aside to r<i>.real, symlink t<i> -> /etc
  // renamed onto r<i>, then both put back. A walk that reopens by name without openat2's
  // resolve flags or the inode check fails this in most runs; a correct walk never does.
  constexpr int pairs = 16;
  walk_dir dir;
  write_file(dir.outside / "secret", secret);
  const std::string ws = dir.ws.string();
  auto name = [](const char* stem, int i) { return std::string(stem) + std::to_string(i); };
  for (int i = 0; i < pairs; ++i) {
    for (const char* stem : {"d", "r"}) {
      fs::create_directory(dir.ws / name(stem, i));
      write_file(dir.ws / name(stem, i) / "inner", "inside");
    }
    fs::create_directory_symlink("/etc", dir.ws / name("s", i));
    fs::create_directory_symlink("/etc", dir.ws / name("t", i));
    write_file(dir.ws / name("f", i), "plain");
    fs::create_symlink("/etc/passwd", dir.ws / name("g", i));
    write_file(dir.ws / name("k", i), "kept");
    REQUIRE(::link((dir.outside / "secret").c_str(), (dir.ws / name("l", i)).c_str()) == 0);
  }

  const std::string passwd = read_file("/etc/passwd");
  const std::string hostname = read_file("/etc/hostname");
  REQUIRE_FALSE(passwd.empty());

  auto exchange = [&](const std::string& a, const std::string& b) {
    return ::renameat2(AT_FDCWD, (ws + "/" + a).c_str(), AT_FDCWD, (ws + "/" + b).c_str(), RENAME_EXCHANGE) == 0;
  };
  auto move = [&](const std::string& from, const std::string& to) {
    return ::rename((ws + "/" + from).c_str(), (ws + "/" + to).c_str()) == 0;
  };
  std::atomic<std::uint64_t> swaps{0};
  std::atomic<bool> swap_failed{false};
  {
    std::jthread exchanger([&](std::stop_token stop) {
      while (!stop.stop_requested()) {
        for (int i = 0; i < pairs; ++i) {
          const bool ok = exchange(name("d", i), name("s", i)) && exchange(name("f", i), name("g", i)) &&
                          exchange(name("k", i), name("l", i));
          if (!ok) return void(swap_failed = true);
          ++swaps;
        }
      }
    });
    std::jthread renamer([&](std::stop_token stop) {
      while (!stop.stop_requested()) {
        for (int i = 0; i < pairs; ++i) {
          const auto real = name("r", i) + ".real";
          const bool ok = move(name("r", i), real) && move(name("t", i), name("r", i)) &&
                          move(name("r", i), name("t", i)) && move(real, name("r", i));
          if (!ok) return void(swap_failed = true);
          ++swaps;
        }
      }
    });
    for (int run = 0; run < 200; ++run) {
      const auto h = collect(dir.ws);
      for (const auto& file : h.files) {
        INFO("run " << run << ", path " << file.path);
        // Top-level files, or the one file of a racing directory: nothing from /etc.
        const auto slash = file.path.find('/');
        CHECK((slash == std::string::npos || file.path.substr(slash) == "/inner"));
        CHECK(file.bytes != passwd);
        CHECK((hostname.empty() || file.bytes != hostname));
        CHECK(file.bytes.find(secret) == std::string::npos);
        CHECK((file.bytes == "inside" || file.bytes == "plain" || file.bytes == "kept"));
      }
    }
  }  // the racers stop and join here
  CHECK_FALSE(swap_failed);
  CHECK(swaps > 0);
  MESSAGE("swaps during the 200 walks: " << swaps.load());
}

TEST_CASE("artifact walk: a FIFO swapped in for a file is never opened or read in a blocking way") {
  // Two FIFOs take turns with a plain file's name: one with no writer, on which a blocking open
  // for reading would wait for ever, and one whose writer this test holds open without writing, on
  // which a blocking read would. A walk that opens or reads either without O_NONBLOCK hangs here.
  constexpr int pairs = 8;
  walk_dir dir;
  const std::string ws = dir.ws.string();
  auto name = [](const char* stem, int i) { return std::string(stem) + std::to_string(i); };
  std::vector<int> writers;
  for (int i = 0; i < pairs; ++i) {
    write_file(dir.ws / name("f", i), "plain");
    write_file(dir.ws / name("h", i), "plain");
    REQUIRE(::mkfifo((dir.ws / name("lonely", i)).c_str(), 0600) == 0);
    REQUIRE(::mkfifo((dir.ws / name("held", i)).c_str(), 0600) == 0);
    // O_RDWR opens a FIFO at once and keeps a writer on it for as long as this test holds it.
    const int writer = ::open((dir.ws / name("held", i)).c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(writer >= 0);
    writers.push_back(writer);
  }
  const auto release = [&] {
    for (const int writer : writers) ::close(writer);  // a blocked reader sees end of file
    writers.clear();
    for (int i = 0; i < pairs; ++i) {  // a blocked opener sees a writer come and go
      const int late = ::open((dir.ws / name("lonely", i)).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (late >= 0) ::close(late);
    }
  };

  auto exchange = [&](const std::string& a, const std::string& b) {
    return ::renameat2(AT_FDCWD, (ws + "/" + a).c_str(), AT_FDCWD, (ws + "/" + b).c_str(), RENAME_EXCHANGE) == 0;
  };
  std::atomic<std::uint64_t> swaps{0};
  std::atomic<bool> swap_failed{false};
  std::uint64_t fifos_met = 0;
  {
    std::jthread swapper([&](std::stop_token stop) {
      while (!stop.stop_requested()) {
        for (int i = 0; i < pairs; ++i) {
          if (!exchange(name("f", i), name("lonely", i)) || !exchange(name("h", i), name("held", i)))
            return void(swap_failed = true);
          ++swaps;
        }
      }
    });
    std::atomic<int> walked{0};
    auto walking = std::async(std::launch::async, [&] {
      std::vector<result<host::harvest>> walks;
      for (int run = 0; run < 200; ++run) {
        walks.push_back(host::collect_artifacts(ws, collecting()));
        ++walked;
      }
      return walks;
    });
    // Blocked is one walk that does not end, not 200 that take long (under ThreadSanitizer on a
    // busy host they take minutes): the watch restarts with every walk that ends.
    bool blocked = false;
    for (int seen = -1; walking.wait_for(std::chrono::seconds(30)) != std::future_status::ready;) {
      if (walked == seen) {
        blocked = true;
        break;
      }
      seen = walked;
    }
    if (blocked) {
      FAIL_CHECK("the walk blocked on a FIFO swapped in for a file");
      swapper.request_stop();
      swapper.join();
      // Keep releasing until the walk returns: it may block again on the next FIFO it meets.
      while (walking.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) release();
    }
    for (const auto& walk : walking.get()) {
      REQUIRE(walk.has_value());
      const auto& h = walk.value();
      for (const auto& file : h.files) CHECK(file.bytes == "plain");
      // Each name is one kind or the other when the walk meets it: a file read or a FIFO counted
      // (or, should the kernel give up on a lookup under concurrent renames, an unreadable one).
      const auto fifos = omitted(h, omission_reason::fifo), unreadable = omitted(h, omission_reason::unreadable);
      CHECK(h.files.size() + fifos + unreadable == 4 * pairs);
      CHECK(h.omitted_total() == fifos + unreadable);
      fifos_met += fifos;
    }
  }  // the swapper stops and joins here
  release();
  CHECK_FALSE(swap_failed);
  CHECK(swaps > 0);
  CHECK(fifos_met > 0);
  MESSAGE("swaps during the 200 walks: " << swaps.load() << "; FIFOs met: " << fifos_met);
}

TEST_CASE("artifact walk: a workspace that cannot be opened as a directory is a failure") {
  walk_dir dir;
  write_file(dir.ws / "a", "a");
  write_file(dir.root / "file", "file");
  fs::create_directory_symlink(dir.ws, dir.root / "link");

  for (const auto& path : {dir.root / "link", dir.root / "missing", dir.root / "file"}) {
    INFO("workspace " << path.string());
    const auto got = host::collect_artifacts(path.string(), collecting());
    REQUIRE_FALSE(got.has_value());
    CHECK(got.error().kind == error_kind::system_call_failed);
  }
}

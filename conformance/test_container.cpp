// The container backend's own promises: its channel against another local account, no pull of a
// missing image, extra run arguments that may not widen psych's flags, and no container left on
// any path (docs/container-backend.md). The shared contract runs against it in every other file.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "backends_posix.hpp"
#include "backends/container/container_runtime.hpp"

using namespace psych;
namespace fs = std::filesystem;

namespace {

const conformance::backend_under_test* container_backend() {
  for (const auto& backend : conformance::backends())
    if (backend.container) return &backend;
  return nullptr;
}

/// The container backend built, or a skip naming why it cannot be here.
std::unique_ptr<sandbox> container_or_skip() {
  const auto* backend = container_backend();
  REQUIRE(backend != nullptr);
  if (::geteuid() != 0) {
    psych::testing::skip_case("the container backend needs a root worker (docs/container-backend.md)");
    return nullptr;
  }
  auto made = conformance::make_sandbox(*backend);
  if (!made) {
    psych::testing::skip_case("container is not available here: " + made.error().message());
    return nullptr;
  }
  return std::move(made).value();
}

/// What a connection attempt as (uid, gid) to `path` got: "EACCES", "ENOENT", "ECONNREFUSED",
/// "dropped" (connected, wrote `line`, and the host closed it without a byte), or "answered".
/// Made in a child that drops to the identity first, so the test's own root never connects.
std::string connect_as(std::int64_t uid, std::int64_t gid, const std::string& path, const std::string& line) {
  int report[2];
  REQUIRE(::pipe(report) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(report[0]);
    const auto say = [&](const char* word) {
      (void)!::write(report[1], word, std::strlen(word));
      ::_exit(0);
    };
    const auto u = static_cast<uid_t>(uid);
    const auto g = static_cast<gid_t>(gid);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(g, g, g) != 0 || ::setresuid(u, u, u) != 0)
      say("setresuid failed");
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      say(errno == EACCES ? "EACCES" : errno == ENOENT ? "ENOENT" : errno == ECONNREFUSED ? "ECONNREFUSED" : "other");
    (void)!::write(fd, line.data(), line.size());
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, 5000) <= 0) say("held open");
    char byte = 0;
    say(::recv(fd, &byte, 1, 0) == 0 ? "dropped" : "answered");
  }
  ::close(report[1]);
  std::string word(64, '\0');
  const ssize_t n = ::read(report[0], word.data(), word.size());
  ::close(report[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  word.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return word;
}

/// The first channel socket that appears under `root`, within `limit`.
std::string wait_for_channel(const std::string& root, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root, ec))
      if (entry.path().filename().string().starts_with("psych-channel-") && fs::exists(entry.path() / "s", ec))
        return (entry.path() / "s").string();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return {};
}

}  // namespace

TEST_CASE("container: another local account cannot take the launcher's place on the channel") {
  auto sb = container_or_skip();
  if (!sb) return;
  // Another account (a uid nothing uses); the execution's own uid and gid with a guessed token
  // (what a second process of that identity could try); and, after the run, anybody at all.
  constexpr std::int64_t stranger = 1'500'290;
  const auto uid = conformance::suite_uid;
  std::string stranger_got, guesser_got, socket_path;
  std::thread attacker([&] {
    socket_path = wait_for_channel(conformance::temp_root(), std::chrono::seconds(30));
    if (socket_path.empty()) return;
    stranger_got = connect_as(stranger, stranger, socket_path, "0123456789abcdef0123456789abcdef\n");
    guesser_got = connect_as(uid, uid, socket_path, "0123456789abcdef0123456789abcdef\n");
  });
  const auto r = conformance::run(*sb, "import time\ntime.sleep(1.5)\nreturn 'the real program'");
  attacker.join();
  REQUIRE_MESSAGE(!socket_path.empty(), "no channel socket appeared under the temp root");
  INFO("stranger: " << stranger_got << ", guesser: " << guesser_got);
  // The directory (0710, the execution's gid) stops every other account before the socket.
  CHECK(stranger_got == "EACCES");
  // Past the directory, a wrong token is dropped without a byte. (The attacker connects within
  // milliseconds of the socket appearing; the container's launcher needs the runtime's few hundred.)
  CHECK(guesser_got == "dropped");
  REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
  CHECK(r.value->text == R"("the real program")");
  CHECK(r.isolation == isolation_level::isolated);
  // Afterwards: nobody can connect, and the directory is gone.
  CHECK(connect_as(uid, uid, socket_path, "x\n") == "ENOENT");
  CHECK_FALSE(fs::exists(fs::path(socket_path).parent_path()));
}

TEST_CASE("container: a missing image is a setup error naming the fix, never a pull") {
  const auto* backend = container_backend();
  REQUIRE(backend != nullptr);
  auto options = *backend->container;
  options.image = "localhost/psych-absent:never-built";
  if (::geteuid() != 0) {
    // An ordinary worker is refused before any runtime is asked, and told why.
    auto made = container_sandbox(options);
    REQUIRE_FALSE(made);
    CHECK(made.error().kind == error_kind::sandbox_setup);
    CHECK(made.error().message().find("needs a root worker") != std::string::npos);
    return;
  }
  const auto found = detect_container_runtime(options);
  if (found.runtime.empty()) {
    psych::testing::skip_case("no container runtime here: " + found.problem);
    return;
  }
  const auto started = std::chrono::steady_clock::now();
  auto made = container_sandbox(options);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(made);
  INFO(made.error().message());
  CHECK(made.error().kind == error_kind::sandbox_setup);
  CHECK(made.error().message().find("not present locally") != std::string::npos);
  CHECK(made.error().message().find("scripts/build-image") != std::string::npos);
  CHECK_FALSE(found.image_present);
  CHECK(took.count() < 10.0);  // a pull would be a registry round trip (and here, a failure to resolve)
}

TEST_CASE("container: without the probe at open, the first run is the probe and still names a missing image") {
  // psych run's mode: no probe container at construction, so a missing image is found by the run,
  // which starts nothing of the program and says what the probe would have said.
  const auto* backend = container_backend();
  REQUIRE(backend != nullptr);
  if (::geteuid() != 0) {
    psych::testing::skip_case("the container backend needs a root worker");
    return;
  }
  auto options = *backend->container;
  options.image = "localhost/psych-absent:never-built";
  options.probe_at_open = false;
  if (detect_container_runtime(options).runtime.empty()) {
    psych::testing::skip_case("no container runtime here");
    return;
  }
  auto made = container_sandbox(options);
  REQUIRE_MESSAGE(made, (made ? "" : made.error().message()));
  const auto offer = made.value()->offer();
  const auto terms = std::get<execution_terms>(intersect_terms(offer, {.limits = offer.limit_ceiling}, {}, {}));
  const auto r = made.value()->run({.program = "return 1", .terms = terms});
  REQUIRE(r.failure);
  INFO(r.failure->message);
  CHECK(r.failure->kind == failure_kind::launch_failed);
  CHECK(r.failure->message.find("not present locally") != std::string::npos);
  CHECK(r.failure->message.find("scripts/build-image") != std::string::npos);
  CHECK_FALSE(r.isolation);
}

TEST_CASE("container: an image gone after the backend was built is a failed run, never a pull") {
  auto sb = container_or_skip();
  if (!sb) return;
  // A registry of our own on the loopback that only counts who connects: a pull of
  // 127.0.0.1:PORT/… would connect here first (without --pull=never, `podman run` of a missing
  // image does, and waits on it). The image is there under that name while the backend is built
  // and probed, and gone when the program runs.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), size) == 0);
  REQUIRE(::listen(listener, 16) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) == 0);
  std::atomic<int> connections{0};
  std::atomic<bool> done{false};
  std::thread registry([&] {
    while (!done) {
      pollfd ready{listener, POLLIN, 0};
      if (::poll(&ready, 1, 50) > 0) {
        const int peer = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (peer >= 0) ++connections, ::close(peer);
      }
    }
  });

  auto options = *container_backend()->container;
  const auto runtime = psych::host::find_container_runtime(options.runtime);
  REQUIRE(runtime);
  const auto alias = fmt::format("127.0.0.1:{}/psych/pull-test:{}", ntohs(address.sin_port), ::getpid());
  REQUIRE(runtime.value().run({"tag", options.image, alias}).value().exit_code == 0);
  options.image = alias;
  auto made = container_sandbox(options);
  const auto untagged = runtime.value().run({"untag", options.image, alias});
  REQUIRE_MESSAGE(made, (made ? "" : made.error().message()));
  REQUIRE(untagged);
  CHECK(untagged.value().exit_code == 0);

  const auto r = conformance::run(*made.value(), "return 1");
  const auto again = container_sandbox(options);
  done = true;
  registry.join();
  ::close(listener);
  REQUIRE(r.failure);
  INFO(r.failure->message);
  CHECK(r.failure->kind == failure_kind::launch_failed);
  CHECK(r.duration_seconds < 30.0);
  REQUIRE_FALSE(again);
  CHECK(again.error().message().find("not present locally") != std::string::npos);
  CHECK(connections == 0);  // nobody asked the registry for it
}

TEST_CASE("container: extra run arguments that would widen psych's flags are refused by name") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--privileged"}, {"--network=host"}, {"--network", "host"}, {"--cap-add=SYS_ADMIN"},
        {"-v", "/:/host"}, {"--volume=/etc:/etc"}, {"--security-opt", "seccomp=unconfined"}, {"--pid=host"},
        {"--user=0"}, {"-e", "SECRET=1"}, {"--env-host"}, {"--memory=0"}, {"--pod=host-pod"}, {"--rootfs", "/"},
        {"--preserve-fds=3"}, {"--cgroups=disabled"}, {"--group-add=0"}, {"other-image"}}) {
    CAPTURE(args.front());
    const auto why = widening_run_argument(args);
    REQUIRE(why.has_value());
    CHECK(why->find(args.front()) != std::string::npos);
    container_sandbox_options options;
    options.extra_run_args = args;
    auto made = container_sandbox(options);
    REQUIRE_FALSE(made);
    CHECK(made.error().kind == error_kind::sandbox_setup);
  }
  CHECK_FALSE(widening_run_argument({"--hostname=sandbox", "--annotation=x=y"}).has_value());
  CHECK_FALSE(widening_run_argument({"--hostname", "sandbox", "--cpus", "1"}).has_value());  // values apart
}

TEST_CASE("container: an image pinned by digest (name@sha256:…) is honoured and reported") {
  auto sb = container_or_skip();
  if (!sb) return;
  auto options = *container_backend()->container;
  const auto found = detect_container_runtime(options);
  REQUIRE(found.available);
  const auto runtime = psych::host::find_container_runtime(options.runtime);
  REQUIRE(runtime);
  auto digest = runtime.value().run({"image", "inspect", "--format", "{{.Digest}}", options.image});
  REQUIRE(digest);
  const auto text = psych::host::without_trailing_space(digest.value().stdout_text);
  if (!text.starts_with("sha256:")) {
    psych::testing::skip_case("the runtime reports no manifest digest for " + options.image + ": " + text);
    return;
  }
  options.image = options.image.substr(0, options.image.rfind(':')) + "@" + text;
  const auto pinned = detect_container_runtime(options);
  CHECK(pinned.available);
  CHECK(pinned.image_digest == text);
  CHECK(pinned.image_id == found.image_id);  // the same image, by another name
  auto made = container_sandbox(options);
  REQUIRE_MESSAGE(made, (made ? "" : made.error().message()));
  const auto r = conformance::run(*made.value(), "return 6 * 7");
  REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
  CHECK(r.value->text == "42");
}

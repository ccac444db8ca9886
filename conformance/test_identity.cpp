// Who the child runs as, on every local backend: an interpreter the child's uid cannot reach is
// refused (named) or skipped (said) before anything runs, never handed back as a backend that
// fails every execution; a root worker's uid range exhausts with a named refusal, never a shared
// uid, and a uid is handed out again only after its execution let it go.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>

#include "backends_posix.hpp"
#include "host_kernel.hpp"

using namespace psych;
namespace fs = std::filesystem;

using conformance::is_root;

namespace {

/// The backend's options, each execution drawing its own uid from `range`.
local_sandbox_options with_range(const conformance::backend_under_test& backend, std::int64_t first,
                                 std::int64_t count) {
  auto options = backend.options;
  options.run_as_uid.reset();
  options.run_as_gid.reset();
  options.allow_same_uid = false;
  options.run_as_range.first = first;
  options.run_as_range.count = count;
  return options;
}

/// An installation prefix behind a directory only root may enter, as pyenv's is under /root:
/// <closed>/py/bin/python3 (a copy of the system's interpreter, a real ELF binary) and
/// <closed>/py/lib/python3.N.
struct closed_prefix {
  std::string closed, prefix, binary;
  closed_prefix() {
    std::string pattern = conformance::temp_root() + "/closed-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    REQUIRE(::chmod(pattern.c_str(), 0700) == 0);
    closed = pattern;
    prefix = closed + "/py";
    binary = prefix + "/bin/python3";
    const auto real = fs::canonical("/usr/bin/python3");
    fs::create_directories(prefix + "/bin");
    fs::create_directories(prefix + "/lib/" + real.filename().string());
    fs::copy_file(real, binary);
    fs::permissions(binary, fs::perms(0755));
  }
  closed_prefix(const closed_prefix&) = delete;
  closed_prefix& operator=(const closed_prefix&) = delete;
  ~closed_prefix() { conformance::remove_tree_of_any_depth(closed); }
};

/// PATH for as long as it lives.
class path_override {
 public:
  explicit path_override(const std::string& value) : saved_(std::getenv("PATH") ? std::getenv("PATH") : "") {
    ::setenv("PATH", value.c_str(), 1);
  }
  path_override(const path_override&) = delete;
  path_override& operator=(const path_override&) = delete;
  ~path_override() { ::setenv("PATH", saved_.c_str(), 1); }

 private:
  std::string saved_;
};

bool has_problem(const description& d, const std::string& a, const std::string& b) {
  for (const auto& problem : d.problems)
    if (problem.find(a) != std::string::npos && problem.find(b) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("an interpreter behind a directory the child's uid cannot enter is refused with the reason" *
          doctest::skip(!is_root())) {
  closed_prefix home;
  for (const auto& backend : conformance::backends()) {
    SUBCASE(backend.name.c_str()) {
      if (backend.container) {
        psych::testing::skip_case(psych::testing::allowed_in_ci::documented_backend_limit,
                                  "the container's interpreter is the image's (container_python_bin), never looked "
                                  "up on the host's PATH (docs/container-backend.md)");
        continue;
      }
      if (backend.remote) {
        psych::testing::skip_case(psych::testing::allowed_in_ci::documented_backend_limit,
                                  "the remote backend's interpreter is its service's, chosen by local_sandbox() there "
                                  "exactly as under linux-isolated, where this case runs (docs/remote-protocol.md)");
        continue;
      }
      auto options = with_range(backend, 1'500'340, 2);
      SUBCASE("named explicitly: local_sandbox() refuses, naming the directory, its mode and a way out") {
        options.python_bin = home.binary;
        auto sandbox = local_sandbox(options);
        REQUIRE_FALSE(sandbox);
        const auto message = sandbox.error().message();
        INFO(message);
        CHECK(sandbox.error().kind == error_kind::sandbox_setup);
        CHECK(message.find(home.prefix + " is not reachable by uid 1500340") != std::string::npos);
        CHECK(message.find(home.closed + " is mode 0700") != std::string::npos);
        CHECK(message.find("set python_bin to /usr/bin/python3") != std::string::npos);
      }
      SUBCASE("first on PATH: skipped, said, and the system's interpreter chosen") {
        path_override path(home.prefix + "/bin:/usr/bin:/bin");
        auto sandbox = local_sandbox(options);
        REQUIRE_MESSAGE(sandbox, (sandbox ? "" : sandbox.error().message()));
        const auto d = sandbox.value()->describe();
        CHECK(d.ready);
        CHECK(d.interpreter == fs::canonical("/usr/bin/python3").string());
        CHECK_MESSAGE(has_problem(d, "skipped " + home.binary, home.closed + " is mode 0700"),
                      conformance::joined(d.problems));
        const auto r = conformance::run(*sandbox.value(), "return 6 * 7");
        REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
        CHECK(r.value->text == "42");
      }
    }
  }
}

TEST_CASE("a range of one uid: a second concurrent execution is refused by name, the uid reused after release" *
          doctest::skip(!is_root())) {
  constexpr std::int64_t uid = 1'500'330;
  for (const auto& backend : conformance::backends()) {
    // A pool holds a uid of its range for the sandbox it keeps waiting: a range of one has none
    // left for a second execution or the probe by design (docs/pools.md, "Identities").
    if (conformance::pooled(backend)) continue;
    SUBCASE(backend.name.c_str()) {
      auto sandbox = conformance::make_sandbox(conformance::with_uid_range(backend, uid, 1));
      REQUIRE_MESSAGE(sandbox, (sandbox ? "" : sandbox.error().message()));
      auto& sb = *sandbox.value();
      const auto idle = sb.describe();
      REQUIRE(idle.run_as);
      CHECK(idle.run_as->mode == run_as_mode::per_execution);
      CHECK(idle.run_as->first == uid);
      CHECK(idle.run_as->count == 1);
      CHECK(idle.run_as->free == 1);

      auto first = std::async(std::launch::async, [&] {
        return conformance::run(sb, "import time\ntime.sleep(4)\nreturn 'first'");
      });
      // Until the first execution's interpreter runs as the range's only uid.
      const auto started = std::chrono::steady_clock::now();
      while (conformance::processes_of(uid).empty() &&
             std::chrono::steady_clock::now() - started < std::chrono::seconds(30))
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      REQUIRE_FALSE(conformance::processes_of(uid).empty());

      const auto second = conformance::run(sb, "return 'second'");
      REQUIRE(second.failure);
      INFO(second.failure->message);
      CHECK(second.failure->kind == failure_kind::launch_failed);
      CHECK(second.failure->message.find("run_as_range 1500330..1500330 is exhausted") != std::string::npos);
      CHECK(second.stdout_size == 0);
      const auto busy = sb.describe();
      REQUIRE(busy.run_as);
      CHECK(busy.run_as->held == 1);
      CHECK(busy.run_as->free == 0);
      CHECK_FALSE(busy.ready);  // its own probe has no uid to run as either

      const auto first_result = first.get();
      REQUIRE_MESSAGE(first_result.ok(), (first_result.failure ? first_result.failure->message : ""));
      CHECK(first_result.value->text == R"("first")");
      const auto third = conformance::run(sb, "return 'third'");
      REQUIRE_MESSAGE(third.ok(), (third.failure ? third.failure->message : ""));
      CHECK(third.value->text == R"("third")");
      CHECK(conformance::processes_of(uid).empty());
      CHECK(conformance::host_leftovers_of(uid).empty());
    }
  }
}

TEST_CASE("one configured run_as uid keeps working, and describe() warns that executions share it" *
          doctest::skip(!is_root())) {
  const auto& backend = conformance::backends().front();
  auto sandbox = local_sandbox(backend.options);
  REQUIRE_MESSAGE(sandbox, (sandbox ? "" : sandbox.error().message()));
  const auto d = sandbox.value()->describe();
  REQUIRE(d.run_as);
  CHECK(d.run_as->mode == run_as_mode::shared);
  CHECK(d.run_as->first == conformance::suite_uid);
  CHECK_MESSAGE(has_problem(d, "concurrent executions share it", "run_as_range"), conformance::joined(d.problems));
}

TEST_CASE("the deployment sets the range in the config file, and `psych describe --json` reports it" *
          doctest::skip(!is_root())) {
  const std::string config = conformance::temp_root() + "/range-config.json";
  {
    std::FILE* file = std::fopen(config.c_str(), "w");
    REQUIRE(file != nullptr);
    std::fputs(R"({"run_as_range": {"first": 1500350, "count": 3}, "temp_root": ")", file);
    std::fputs(conformance::temp_root().c_str(), file);
    std::fputs("\"}", file);
    std::fclose(file);
  }
  const std::string command = std::string("PSYCH_LAUNCHER=") + PSYCH_LAUNCHER_PATH + " " + PSYCH_CLI_PATH +
                              " describe --json --config " + config + " 2>&1";
  std::string output;
  if (std::FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
    ::pclose(pipe);
  }
  fs::remove(config);
  INFO(output);
  CHECK(output.find(R"("run_as":{"mode":"per_execution","first":1500350,"count":3,"free":3,"held":0,"stray":0,)") !=
        std::string::npos);
}

// `psych serve` as an operator runs it: a process of its own, TLS on loopback, its tokens re-read on
// SIGHUP, and SIGTERM draining what runs (docs/serve.md). The library's side of the same
// (sandbox_service) is tests/remote; the remote backend's conformance is every other case here.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include "backends_posix.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "os/run_command.hpp"
#include "execution/session.hpp"

namespace {

using namespace std::chrono_literals;
const std::string psych_cli = PSYCH_CLI_PATH;
constexpr std::int64_t serve_uid = 1'500'350;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Waits until `path` holds `needle`; what it held then.
std::string wait_for_text(const std::string& path, std::string_view needle, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  std::string text;
  while (std::chrono::steady_clock::now() < until) {
    text = read_file(path);
    if (text.find(needle) != std::string::npos) break;
    std::this_thread::sleep_for(50ms);
  }
  return text;
}

/// One `psych serve` process, ended by its pid if the case did not end it.
struct serve_process {
  pid_t pid = -1;
  ~serve_process() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  /// SIGTERM (drain, stop) if it still runs, and its exit status; 0 if it had already been reaped.
  /// Never a signal to anything but that one pid.
  int stop() {
    if (pid <= 0) return 0;
    if (::kill(pid, SIGTERM) != 0) return -1;
    return wait(15s);
  }
  /// Its exit status, or -1 when it did not exit within `limit`.
  int wait(std::chrono::seconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(50ms);
    }
    return -1;
  }
};

}  // namespace

TEST_CASE("psych serve: TLS on loopback, tokens re-read on SIGHUP, running executions drained on SIGTERM") {
  namespace fs = std::filesystem;
  std::string dir = fs::temp_directory_path().string() + "/psych-conformance-serve-XXXXXX";
  REQUIRE(::mkdtemp(dir.data()) != nullptr);
  struct remove_dir {
    std::string path;
    ~remove_dir() { fs::remove_all(path); }
  } cleanup{dir};
  const auto made = psych::host::run_command(
      {"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
       "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-subj", "/CN=localhost", "-addext",
       "subjectAltName=IP:127.0.0.1,DNS:localhost", "-days", "1"},
      {"PATH=/usr/bin:/bin"}, std::chrono::seconds(30));
  if (!made || made.value().exit_code != 0) {
    psych::testing::skip_case("openssl could not make a test certificate");
    return;
  }
  const std::string first_token = "serve-a-" + psych::host::random_token();
  const std::string second_token = "serve-b-" + psych::host::random_token();
  std::ofstream(dir + "/tokens") << "operator " << first_token << "\n";
  const bool root = ::geteuid() == 0;
  // With a pool (docs/pools.md): the service's executions run on sandboxes prepared before them.
  std::ofstream(dir + "/config.json") << (root ? R"({"run_as_uid": 1500350, "pool": {"size": 1}, "temp_root": ")" +
                                                     conformance::temp_root() + "\"}"
                                               : R"({"allow_same_uid": true, "pool": {"size": 1}, "temp_root": ")" +
                                                     conformance::temp_root() + "\"}");

  const std::vector<std::string> argv{psych_cli, "serve", "--listen", "127.0.0.1:0", "--tls-cert", dir + "/cert.pem",
                                      "--tls-key", dir + "/key.pem", "--token-file", dir + "/tokens", "--backend",
                                      "linux-namespaces", "--config", dir + "/config.json", "--drain-seconds", "1"};
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&files, 2, (dir + "/serve.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  serve_process serve;
  char path_variable[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* environment[] = {path_variable, nullptr};
  REQUIRE(::posix_spawn(&serve.pid, args[0], &files, nullptr, args.data(), environment) == 0);
  posix_spawn_file_actions_destroy(&files);

  const std::string listening = "listening on https://127.0.0.1:";
  auto err = wait_for_text(dir + "/serve.err", listening, 20s);
  const auto at = err.find(listening);
  REQUIRE_MESSAGE(at != std::string::npos, err);
  const int port = std::atoi(err.c_str() + at + listening.size());
  REQUIRE(port > 0);

  auto token = std::make_shared<std::string>(first_token);
  const auto client = [&](std::shared_ptr<std::string> source) {
    auto made_client = psych::remote_sandbox(
        {.url = "https://127.0.0.1:" + std::to_string(port),
         .token = [source]() -> psych::result<std::string> { return *source; },
         .ca_file = dir + "/cert.pem",
         .describe_attempts = 1});
    REQUIRE_MESSAGE(made_client, (made_client ? "" : made_client.error().message()));
    return std::move(made_client).value();
  };

  auto sandbox = client(token);
  REQUIRE(sandbox->describe().ready);
  const auto answered = conformance::run(*sandbox, "return 6 * 7");
  REQUIRE_MESSAGE(answered.ok(), (answered.failure ? answered.failure->message : ""));
  CHECK(answered.value->text == "42");
  // The service's describe() reports its pool; a request that found a prepared sandbox is claimed.
  const auto described = sandbox->describe();
  const auto pool = std::find_if(described.mechanisms.begin(), described.mechanisms.end(),
                                 [](const std::string& line) { return line.starts_with("prepared: "); });
  REQUIRE_MESSAGE(pool != described.mechanisms.end(), conformance::joined(described.mechanisms));
  CHECK_MESSAGE(pool->find("of 1 sandboxes waiting") != std::string::npos, *pool);

  SUBCASE("SIGHUP: the token file is read again; the old token is refused, the new one taken") {
    std::ofstream(dir + "/tokens") << "operator " << second_token << "\n";
    REQUIRE(::kill(serve.pid, SIGHUP) == 0);
    CHECK(wait_for_text(dir + "/serve.err", "SIGHUP: tokens re-read", 10s).find("SIGHUP: tokens re-read") !=
          std::string::npos);
    const auto refused = client(std::make_shared<std::string>(first_token))->describe();
    CHECK_FALSE(refused.ready);
    CHECK_MESSAGE(conformance::joined(refused.problems).find("refused the credential (401)") != std::string::npos,
                  conformance::joined(refused.problems));
    CHECK(client(std::make_shared<std::string>(second_token))->describe().ready);
    CHECK(serve.wait(0s) == -1);  // still serving
  }
  SUBCASE("SIGTERM: running executions get the drain deadline, then are cancelled; the service exits 0") {
    auto running = std::async(std::launch::async, [&] {
      return conformance::run(*sandbox, "while True:\n    pass\n", {.wall_seconds = 25.0});
    });
    // Give it time to be running (the access log says nothing of an execution until it ends).
    std::this_thread::sleep_for(1500ms);
    const auto signalled = std::chrono::steady_clock::now();
    REQUIRE(::kill(serve.pid, SIGTERM) == 0);
    const auto r = running.get();
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
    REQUIRE(r.failure);
    CHECK_MESSAGE(r.failure->kind == psych::failure_kind::cancelled, r.failure->message);
    CHECK(r.cancelled);
    CHECK_MESSAGE(waited < 10, waited);  // the drain deadline (1 s) and the kill, not the 25 s wall clock
    CHECK(serve.wait(15s) == 0);
    err = read_file(dir + "/serve.err");
    CHECK(err.find("SIGTERM: draining") != std::string::npos);
    CHECK(err.find("psych serve: stopped") != std::string::npos);
  }

  // The access log: one JSON object per request, naming the credential, never holding a token.
  err = read_file(dir + "/serve.err");
  std::istringstream lines(err);
  int requests = 0;
  for (std::string line; std::getline(lines, line);) {
    CHECK(line.find(first_token) == std::string::npos);
    CHECK(line.find(second_token) == std::string::npos);
    if (!line.starts_with("{")) continue;
    rapidjson::Document record;
    record.Parse(line.c_str());
    REQUIRE_MESSAGE(!record.HasParseError(), line);
    CHECK(record.HasMember("status"));
    ++requests;
  }
  CHECK(requests >= 3);
  CHECK(serve.stop() == 0);  // its pool's waiting sandbox goes with it
  if (root) CHECK(conformance::processes_of(serve_uid).empty());
}

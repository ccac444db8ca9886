// The remote backend's cost over the local one it runs on: remote_sandbox run() of `return 1` to an
// in-process psych serve (sandbox_service) on loopback, over TLS and over plaintext, beside a
// local_sandbox run() of the same program on the same backend, interleaved in one run. The
// connection for each execution is new (the execution's stream owns it); TLS sessions are resumed.
// Then what a user meets, on linux-namespaces: `psych run --remote … --token-command` beside a local
// `psych run` of the same program file and a bare `python3 -I -S -c pass`, each a process with the
// system's PATH (spawn.hpp), interleaved. Prints medians, ratios and "BENCH name value unit" lines.
//   bench_remote [ROUNDS]
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "psych/host/remote_sandbox.hpp"
#include "psych/host/sandbox_service.hpp"

#include "median.hpp"
#include "spawn.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct contender {
  std::string label;
  std::string bench_name;
  std::unique_ptr<psych::sandbox> sandbox;
  std::vector<double> seconds;
};

/// `psych run` end to end, local and --remote to the service on `port`, and the bare interpreter.
bool cli_rounds(const std::string& dir, std::uint16_t port, int rounds) {
  struct command {
    std::string label, bench_name;
    std::vector<std::string> argv;
    std::vector<double> seconds;
  };
  const std::string program = dir + "/program.py";
  std::vector<command> all{
      {"python3 -I -S -c pass", "remote_cli_bare_python_ms", {"/usr/bin/python3", "-I", "-S", "-c", "pass"}, {}},
      {"psych run (local, linux-namespaces)", "remote_cli_local_ms",
       {PSYCH_CLI_PATH, "run", "--backend", "linux-namespaces", "--isolation", "isolated", program}, {}},
      {"psych run --remote (TLS)", "remote_cli_remote_ms",
       {PSYCH_CLI_PATH, "run", "--remote", fmt::format("https://127.0.0.1:{}", port), "--ca", dir + "/cert.pem",
        "--token-command", "cat " + dir + "/token", "--isolation", "isolated", program},
       {}}};
  for (int round = -3; round < rounds; ++round) {
    for (auto& c : all) {
      const auto start = clock_type::now();
      if (!psych::bench::spawn_and_wait(c.argv)) {
        fmt::print(stderr, "bench_remote: {} failed\n", c.label);
        return false;
      }
      if (round >= 0) c.seconds.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
    }
  }
  const double local_ms = psych::bench::median(all[1].seconds) * 1000;
  fmt::print("the command line ({} rounds, interleaved):\n", rounds);
  for (const auto& c : all) {
    const double ms = psych::bench::median(c.seconds) * 1000;
    fmt::print("  {:<34} {:8.2f} ms  {:5.2f}x psych run (local)\n", c.label, ms, ms / local_ms);
    fmt::print("BENCH {} {:.2f} ms\n", c.bench_name, ms);
  }
  fmt::print("BENCH remote_cli_ratio {:.3f} x\n", psych::bench::median(all[2].seconds) / psych::bench::median(all[1].seconds));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 30;
  std::string dir = std::filesystem::temp_directory_path().string() + "/psych-bench-remote-XXXXXX";
  if (!::mkdtemp(dir.data())) return 1;
  const std::string openssl = fmt::format(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout {0}/key.pem -out "
      "{0}/cert.pem -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost -days 1 2>/dev/null",
      dir);
  if (std::system(openssl.c_str()) != 0) {
    fmt::print("bench_remote: not measured: openssl could not make a certificate\n");
    std::filesystem::remove_all(dir);
    return 77;
  }
  const std::string token = "bench-token";
  std::ofstream(dir + "/tokens") << "bench " << token << "\n";
  std::ofstream(dir + "/token") << token << "\n";
  std::ofstream(dir + "/program.py") << "return 1\n";

  int status = 0;
  for (const auto* backend : {"linux-process", "linux-namespaces"}) {
    psych::local_sandbox_options local;
    local.backend = backend;
    local.isolation = std::string_view(backend) == "linux-namespaces" ? psych::isolation_level::isolated
                                                                      : psych::isolation_level::process;
    if (::geteuid() == 0) local.run_as_uid = local.run_as_gid = 1'500'400;
    else local.allow_same_uid = true;
    auto direct = psych::local_sandbox(local);
    auto served_tls = psych::local_sandbox(local);
    auto served_plain = psych::local_sandbox(local);
    if (!direct || !served_tls || !served_plain) {
      fmt::print("bench_remote: {} not measured: {}\n", backend,
                 (!direct ? direct : !served_tls ? served_tls : served_plain).error().message());
      continue;
    }
    auto tls = psych::sandbox_service::start(std::move(served_tls).value(),
                                             {.port = 0,
                                              .tls_cert_file = dir + "/cert.pem",
                                              .tls_key_file = dir + "/key.pem",
                                              .token_file = dir + "/tokens",
                                              .access_log = [](std::string_view) {}});
    auto plain = psych::sandbox_service::start(std::move(served_plain).value(),
                                               {.port = 0, .token_file = dir + "/tokens",
                                                .access_log = [](std::string_view) {}});
    if (!tls || !plain) {
      fmt::print(stderr, "bench_remote: {}\n", (!tls ? tls : plain).error().message());
      status = 1;
      break;
    }
    const auto resolver = [token]() -> psych::result<std::string> { return token; };
    auto over_tls = psych::remote_sandbox({.url = fmt::format("https://127.0.0.1:{}", tls.value()->port()),
                                           .token = resolver,
                                           .ca_file = dir + "/cert.pem"});
    auto over_plain = psych::remote_sandbox({.url = fmt::format("http://127.0.0.1:{}", plain.value()->port()),
                                             .token = resolver});
    if (!over_tls || !over_plain) {
      fmt::print(stderr, "bench_remote: {}\n", (!over_tls ? over_tls : over_plain).error().message());
      status = 1;
      break;
    }
    const std::string tag = std::string_view(backend) == "linux-namespaces" ? "isolated" : "process";
    std::vector<contender> all;
    all.push_back({fmt::format("local run() on {}", backend), "remote_" + tag + "_local_ms", std::move(direct).value(), {}});
    all.push_back({"remote run() over TLS", "remote_" + tag + "_tls_ms", std::move(over_tls).value(), {}});
    all.push_back({"remote run() over plain HTTP", "remote_" + tag + "_plain_ms", std::move(over_plain).value(), {}});
    const auto offer = all.front().sandbox->offer();
    const auto terms = std::get<psych::execution_terms>(psych::intersect_terms(
        offer, {.limits = offer.limit_ceiling}, {.isolation = local.isolation}, {}));
    bool failed = false;
    for (int round = -3; round < rounds && !failed; ++round) {  // three rounds of warm-up
      for (auto& c : all) {
        const auto start = clock_type::now();
        const auto r = c.sandbox->run({.program = "return 1", .terms = terms});
        const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
        if (!r.ok() || !r.value || r.value->text != "1") {
          fmt::print(stderr, "bench_remote: {} failed: {}\n", c.label, r.failure ? r.failure->message : "no value");
          failed = true;
          break;
        }
        if (round >= 0) c.seconds.push_back(elapsed);
      }
    }
    if (failed) {
      status = 1;
      break;
    }
    const double local_ms = psych::bench::median(all[0].seconds) * 1000;
    fmt::print("{} ({} rounds, interleaved):\n", backend, rounds);
    for (const auto& c : all) {
      const double ms = psych::bench::median(c.seconds) * 1000;
      fmt::print("  {:<34} {:8.2f} ms  {:5.2f}x local\n", c.label, ms, ms / local_ms);
      fmt::print("BENCH {} {:.2f} ms\n", c.bench_name, ms);
    }
    fmt::print("BENCH remote_{}_tls_ratio {:.3f} x\n", tag,
               psych::bench::median(all[1].seconds) / psych::bench::median(all[0].seconds));
    fmt::print("BENCH remote_{}_plain_ratio {:.3f} x\n", tag,
               psych::bench::median(all[2].seconds) / psych::bench::median(all[0].seconds));
    all.clear();
    if (tag == "isolated" && !cli_rounds(dir, tls.value()->port(), rounds)) status = 1;
    tls.value()->shutdown();
    plain.value()->shutdown();
  }
  std::filesystem::remove_all(dir);
  return status;
}

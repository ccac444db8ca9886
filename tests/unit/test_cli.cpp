#include <doctest/doctest.h>

#include <vector>

#include "cli.hpp"

using namespace psych;

namespace {

result<cli::command> parse(std::vector<std::string_view> args) { return cli::parse(args); }

error_kind error_of(std::vector<std::string_view> args) {
  auto r = parse(std::move(args));
  REQUIRE(r.has_error());
  return r.error().kind;
}

}  // namespace

TEST_CASE("psych run options") {
  auto r = parse({"run", "--json", "--isolation", "process", "--wall-seconds", "2.5", "--cpu-seconds", "1",
                  "--memory-bytes", "256M", "--file-size-bytes", "4096", "--process-count", "8", "prog.py"});
  REQUIRE(r.has_value());
  const auto& run = std::get<cli::run_command>(r.value());
  CHECK(run.json);
  CHECK(run.limits.wall_seconds.value == 2.5);
  CHECK(run.limits.cpu_seconds.value == 1.0);
  CHECK(run.limits.memory_bytes.value == std::uint64_t{256} << 20);
  CHECK(run.limits.file_size_bytes.value == 4096);
  CHECK(run.limits.process_count.value == 8);
  CHECK(run.program_path == "prog.py");
  CHECK(std::get<cli::run_command>(parse({"run", "-"}).value()).program_path == "-");
  CHECK(std::get<cli::run_command>(parse({"run", "--config", "d.json", "p.py"}).value()).config_path == "d.json");
  CHECK(std::get<cli::describe_command>(parse({"describe", "--config", "d.json"}).value()).config_path == "d.json");
}

TEST_CASE("bad input is a named error") {
  CHECK(error_of({}) == error_kind::invalid_argument);
  CHECK(error_of({"fly"}) == error_kind::invalid_argument);
  CHECK(error_of({"run"}) == error_kind::invalid_argument);
  CHECK(error_of({"run", "a.py", "b.py"}) == error_kind::invalid_argument);
  CHECK(error_of({"run", "--wall-seconds", "-3", "a.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--wall-seconds", "0", "a.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--wall-seconds", "inf", "a.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--memory-bytes", "-1", "a.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--memory-bytes", "lots", "a.py"}) == error_kind::invalid_argument);
  CHECK(error_of({"run", "--process-count", "8M", "a.py"}) == error_kind::invalid_argument);
  CHECK(error_of({"run", "--isolation", "vm", "a.py"}) == error_kind::invalid_argument);
  CHECK(error_of({"run", "--wall-seconds"}) == error_kind::invalid_argument);
  CHECK(error_of({"describe", "--verbose"}) == error_kind::invalid_argument);
  CHECK(error_of({"describe", "--config"}) == error_kind::invalid_argument);
}

TEST_CASE("sizes in bytes: plain, binary and decimal units, fractions; a bad one lists what is accepted") {
  const auto memory = [](std::string_view text) {
    const std::vector<std::string_view> args{"run", "--memory-bytes", text, "p.py"};
    auto r = cli::parse(args);
    REQUIRE_MESSAGE(r.has_value(), text);
    return std::get<cli::run_command>(r.value()).limits.memory_bytes.value;
  };
  constexpr std::uint64_t mib = std::uint64_t{1} << 20;
  CHECK(memory("300000000") == 300000000);
  CHECK(memory("300B") == 300);
  CHECK(memory("300k") == 300 * 1024);
  CHECK(memory("300M") == 300 * mib);
  CHECK(memory("300MiB") == 300 * mib);
  CHECK(memory("300mib") == 300 * mib);
  CHECK(memory("300MB") == 300'000'000);
  CHECK(memory("300mb") == 300'000'000);
  CHECK(memory("1.5G") == 1536 * mib);
  CHECK(memory("1.5GB") == 1'500'000'000);
  CHECK(memory("2T") == std::uint64_t{2} << 40);
  CHECK(memory("0.3K") == 307);  // whole bytes, rounded down
  CHECK(memory("1.0000001M") == mib);  // digits past the sixth are dropped
  for (const std::string_view bad : {"12Q", "1.5", "1.5B", "M", "1.G", "1e6", "0x10", "1 M", "1.5Gi"}) {
    CAPTURE(bad);
    const std::vector<std::string_view> args{"run", "--memory-bytes", bad, "p.py"};
    const auto r = cli::parse(args);
    REQUIRE(r.has_error());
    CHECK(r.error().kind == error_kind::invalid_argument);
    CHECK(r.error().message().find("K, M, G, T or KiB, MiB, GiB, TiB (binary, 1024 each), KB, MB, GB, TB "
                                   "(decimal, 1000 each)") != std::string::npos);
  }
  CHECK(error_of({"run", "--memory-bytes", "0", "a.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--memory-bytes", "0.0001K", "a.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--memory-bytes", "-1G", "a.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--memory-bytes", "16777216T", "a.py"}) == error_kind::invalid_argument);
  CHECK(error_of({"run", "--memory-bytes", "99999999999999999999", "a.py"}) == error_kind::invalid_argument);
  CHECK(std::get<cli::run_command>(parse({"run", "--file-size-bytes", "10MB", "p.py"}).value())
            .limits.file_size_bytes.value == 10'000'000);
  CHECK(std::get<cli::run_command>(parse({"run", "--max-output-bytes", "1.5M", "p.py"}).value()).output.max_bytes ==
        1536 * 1024);
}

TEST_CASE("seconds out of a double's range are invalid limits, as docs/cli.md says") {
  CHECK(error_of({"run", "--wall-seconds", "1e999", "a.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--cpu-seconds", "1e-999", "a.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--wall-seconds", "1e999x", "a.py"}) == error_kind::invalid_argument);
  CHECK(error_of({"run", "--wall-seconds", "nan", "a.py"}) == error_kind::invalid_limit);
}

TEST_CASE("help for each command") {
  CHECK(std::holds_alternative<cli::help_command>(parse({"--help"}).value()));
  CHECK(std::get<cli::help_command>(parse({"run", "--help"}).value()).text.find("--wall-seconds") !=
        std::string::npos);
  CHECK(std::get<cli::help_command>(parse({"describe", "-h"}).value()).text.find("--json") != std::string::npos);
}

TEST_CASE("psych run output, artifact and MCP options") {
  auto r = parse({"run", "--preview-bytes", "2K", "--max-output-bytes", "1M", "--preserve", "required", "--blob-dir",
                  "/var/blobs", "--tenant", "acme", "--collect-artifacts", "--mcp",
                  "fs=/usr/bin/mcp-server-filesystem  /srv/data", "--mcp", "docs=node server.js", "prog.py"});
  REQUIRE(r.has_value());
  const auto& run = std::get<cli::run_command>(r.value());
  CHECK(run.output.preview_bytes == 2048);
  CHECK(run.output.max_bytes == std::uint64_t{1} << 20);
  CHECK(run.output.preserve == output_preservation::required);
  CHECK(run.blob_dir == "/var/blobs");
  CHECK(run.tenant == "acme");
  CHECK(run.collect_artifacts);
  REQUIRE(run.mcp_servers.size() == 2);
  CHECK(run.mcp_servers[0].first == "fs");
  CHECK(run.mcp_servers[0].second == std::vector<std::string>{"/usr/bin/mcp-server-filesystem", "/srv/data"});
  CHECK(run.mcp_servers[1].second == std::vector<std::string>{"node", "server.js"});
  CHECK(error_of({"run", "--mcp", "nocommand", "p.py"}) == error_kind::invalid_argument);
  CHECK(error_of({"run", "--mcp", "a__b=cmd", "p.py"}) == error_kind::invalid_argument);
  CHECK(error_of({"run", "--mcp", "fs=", "p.py"}) == error_kind::invalid_argument);
  CHECK(error_of({"run", "--preserve", "always", "p.py"}) == error_kind::invalid_argument);
}

TEST_CASE("--opt=value is --opt value") {
  const auto spaced = parse({"run", "--wall-seconds", "2.5", "--memory-bytes", "1G", "--isolation", "isolated",
                             "--backend", "linux-process", "--mcp", "fs=srv --root /data", "--config", "d.json",
                             "p.py"});
  const auto joined = parse({"run", "--wall-seconds=2.5", "--memory-bytes=1G", "--isolation=isolated",
                             "--backend=linux-process", "--mcp=fs=srv --root /data", "--config=d.json", "p.py"});
  REQUIRE(spaced.has_value());
  REQUIRE(joined.has_value());
  const auto& a = std::get<cli::run_command>(spaced.value());
  const auto& b = std::get<cli::run_command>(joined.value());
  CHECK(b.limits == a.limits);
  CHECK(b.limits.wall_seconds.value == 2.5);
  CHECK(b.limits.memory_bytes.value == std::uint64_t{1} << 30);
  CHECK(b.isolation == isolation_level::isolated);
  CHECK(b.backend == "linux-process");
  CHECK(b.config_path == "d.json");
  CHECK(b.mcp_servers == a.mcp_servers);
  CHECK(b.mcp_servers.at(0).second == std::vector<std::string>{"srv", "--root", "/data"});
  CHECK(std::get<cli::describe_command>(parse({"describe", "--config=d.json"}).value()).config_path == "d.json");
  // The same checks apply to either spelling.
  CHECK(error_of({"run", "--wall-seconds=-3", "a.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--isolation=vm", "a.py"}) == error_kind::invalid_argument);
}

TEST_CASE("where a value or a program goes") {
  SUBCASE("options may follow the program") {
    const auto r = parse({"run", "p.py", "--json", "--wall-seconds", "1"});
    REQUIRE(r.has_value());
    CHECK(std::get<cli::run_command>(r.value()).program_path == "p.py");
    CHECK(std::get<cli::run_command>(r.value()).json);
  }
  SUBCASE("a value given twice keeps the last") {
    const auto r =
        parse({"run", "--wall-seconds", "1", "--wall-seconds", "2", "--tenant", "a", "--tenant", "b", "p.py"});
    REQUIRE(r.has_value());
    CHECK(std::get<cli::run_command>(r.value()).limits.wall_seconds.value == 2.0);
    CHECK(std::get<cli::run_command>(r.value()).tenant == "b");
  }
  SUBCASE("a value that looks like an option is still the value") {
    CHECK(error_of({"run", "--wall-seconds", "-3", "a.py"}) == error_kind::invalid_limit);
    CHECK(std::get<cli::run_command>(parse({"run", "--tenant", "-x", "p.py"}).value()).tenant == "-x");
  }
  SUBCASE("-- ends the options, so a program's name may start with a dash") {
    CHECK(std::get<cli::run_command>(parse({"run", "--json", "--", "--odd.py"}).value()).program_path == "--odd.py");
  }
  SUBCASE("unknown options and commands are named in the error") {
    auto unknown = parse({"run", "--wall-secs", "1", "p.py"});
    REQUIRE(unknown.has_error());
    CHECK(unknown.error().kind == error_kind::invalid_argument);
    CHECK(unknown.error().detail.find("--wall-secs") != std::string::npos);
    CHECK(unknown.error().detail.find("psych run --help") != std::string::npos);
    auto command = parse({"fly"});
    REQUIRE(command.has_error());
    CHECK(command.error().detail == "unknown command 'fly': the commands are run, describe, serve, mcp, help (see psych --help)");
    auto none = parse({});
    REQUIRE(none.has_error());
    CHECK(none.error().detail.starts_with("no command given"));
    auto extra = parse({"run", "a.py", "b.py"});
    REQUIRE(extra.has_error());
    CHECK(extra.error().detail.find("b.py") != std::string::npos);
    auto missing = parse({"run", "--json"});
    REQUIRE(missing.has_error());
    CHECK(missing.error().detail.find("PROGRAM") != std::string::npos);
    auto empty = parse({"run", "--config"});
    REQUIRE(empty.has_error());
    CHECK(empty.error().detail.find("--config") != std::string::npos);
    auto limit = parse({"run", "--cpu-seconds=0", "p.py"});
    REQUIRE(limit.has_error());
    CHECK(limit.error().detail == "--cpu-seconds must be positive and finite, got '0'");
    auto level = parse({"run", "--isolation", "vm", "p.py"});
    REQUIRE(level.has_error());
    CHECK(level.error().detail == "--isolation is one of process, isolated, got 'vm'");
  }
}

TEST_CASE("the help is generated from the options") {
  const auto help_of = [](std::vector<std::string_view> args) {
    auto r = parse(std::move(args));
    REQUIRE(r.has_value());
    REQUIRE(std::holds_alternative<cli::help_command>(r.value()));
    return std::get<cli::help_command>(r.value()).text;
  };
  const auto top = help_of({"--help"});
  for (const char* word : {"run", "describe"}) CHECK_MESSAGE(top.find(word) != std::string::npos, word);
  CHECK(help_of({"help"}) == top);
  CHECK(help_of({"-h"}) == top);
  const auto run = help_of({"run", "--help"});
  for (const char* option : {"--json", "--isolation", "process|isolated", "--backend", "--wall-seconds",
                             "--cpu-seconds",
                             "--memory-bytes", "--file-size-bytes", "--process-count", "--preview-bytes",
                             "--max-output-bytes", "--blob-dir", "--tenant", "--preserve", "required|when_available",
                             "--collect-artifacts", "--mcp", "NAME=COMMAND", "--allow-same-uid", "--config", "PROGRAM",
                             "exit status: 0 completed; 1 failed or hit a limit; 2 usage or configuration error; "
                             "3 refused"})
    CHECK_MESSAGE(run.find(option) != std::string::npos, option);
  // Help wins over what else is on the line, even a missing program.
  CHECK(help_of({"run", "-h"}) == run);
  CHECK(help_of({"run", "--json", "--help"}) == run);
  const auto describe = help_of({"describe", "--help"});
  for (const char* option : {"--json", "--allow-same-uid", "--config", "exit status: 0 ready"})
    CHECK_MESSAGE(describe.find(option) != std::string::npos, option);
  CHECK(describe.find("--wall-seconds") == std::string::npos);
}

TEST_CASE("psych serve, and --remote for run and describe") {
  const auto served = parse({"serve", "--listen", "127.0.0.1:9443", "--tls-cert", "c.pem", "--tls-key", "k.pem",
                             "--token-file", "t.txt", "--backend", "linux-namespaces", "--max-concurrent", "8",
                             "--max-queued", "2", "--drain-seconds", "5"});
  REQUIRE(served);
  const auto& serve = std::get<cli::serve_command>(served.value());
  CHECK(serve.listen == "127.0.0.1:9443");
  CHECK(serve.tls_cert == "c.pem");
  CHECK(serve.tls_key == "k.pem");
  CHECK(serve.token_file == "t.txt");
  CHECK(serve.backend == "linux-namespaces");
  CHECK(serve.max_concurrent == 8);
  CHECK(serve.max_queued == 2);
  CHECK(serve.drain_seconds == 5.0);
  CHECK(error_of({"serve"}) == error_kind::invalid_argument);  // --token-file is required
  CHECK(error_of({"serve", "--token-file", "t", "--max-concurrent", "0"}) == error_kind::invalid_limit);
  CHECK(error_of({"serve", "--token-file", "t", "--drain-seconds", "-1"}) == error_kind::invalid_limit);

  const auto ran = parse({"run", "--remote", "https://127.0.0.1:9443", "--ca", "c.pem", "--token-command", "cat t",
                          "p.py"});
  REQUIRE(ran);
  const auto& remote = std::get<cli::run_command>(ran.value()).remote;
  CHECK(remote.url == "https://127.0.0.1:9443");
  CHECK(remote.ca_file == "c.pem");
  CHECK(remote.token_command == "cat t");
  CHECK_FALSE(remote.allow_insecure_http);
  const auto described = parse({"describe", "--remote", "http://10.0.0.1:80", "--token-command", "cat t",
                                "--allow-insecure-http"});
  REQUIRE(described);
  CHECK(std::get<cli::describe_command>(described.value()).remote.allow_insecure_http);
}

TEST_CASE("--connect-seconds: the connect budget of run (the service's describe, each MCP server) and describe") {
  CHECK_FALSE(std::get<cli::run_command>(parse({"run", "p.py"}).value()).remote.connect_seconds);
  const auto ran = parse({"run", "--connect-seconds", "2.5", "--mcp", "fs=srv", "p.py"});
  REQUIRE(ran);
  CHECK(std::get<cli::run_command>(ran.value()).remote.connect_seconds == 2.5);
  const auto described = parse({"describe", "--remote", "https://127.0.0.1:9443", "--connect-seconds=4"});
  REQUIRE(described);
  CHECK(std::get<cli::describe_command>(described.value()).remote.connect_seconds == 4.0);
  CHECK(error_of({"run", "--connect-seconds", "0", "p.py"}) == error_kind::invalid_limit);
  CHECK(error_of({"run", "--connect-seconds", "soon", "p.py"}) == error_kind::invalid_argument);
  CHECK(error_of({"describe", "--connect-seconds", "-1"}) == error_kind::invalid_limit);
  // Not a remote option: it needs no --remote (it bounds an MCP server's start-up too).
  CHECK_FALSE(cli::needs_remote(parse({"run", "--connect-seconds", "1", "p.py"}).value()));
}

TEST_CASE("needs_remote: serve and --remote go to psych-remote, everything else stays in psych") {
  const auto needs = [](std::vector<std::string_view> args) {
    auto parsed = parse(std::move(args));
    REQUIRE(parsed);
    return cli::needs_remote(parsed.value());
  };
  CHECK(needs({"serve", "--token-file", "t"}));
  CHECK(needs({"run", "--remote", "https://127.0.0.1:9443", "--token-command", "cat t", "p.py"}));
  CHECK(needs({"describe", "--remote", "https://127.0.0.1:9443"}));
  CHECK_FALSE(needs({"run", "p.py"}));
  CHECK_FALSE(needs({"describe"}));
  CHECK_FALSE(needs({"help"}));
  // A remote option without --remote is a usage error psych reports itself.
  CHECK_FALSE(needs({"run", "--ca", "c.pem", "p.py"}));
  // Help is printed by whichever executable parsed it: the same parser, the same text.
  CHECK_FALSE(needs({"serve", "--help"}));
}

TEST_CASE("psych mcp: run's limits and servers, its own options, and --listen's rules") {
  auto r = parse({"mcp", "--isolation", "isolated", "--wall-seconds", "20", "--memory-bytes", "256M", "--mcp",
                  "fs=/usr/bin/mcp-server-filesystem /srv", "--mcp-config", "servers.json", "--max-concurrent", "2",
                  "--pool", "0", "--max-calls", "50", "--max-session-calls", "300", "--run-log-dir", "/var/log/psych"});
  REQUIRE(r.has_value());
  const auto& mcp = std::get<cli::mcp_command>(r.value());
  CHECK(mcp.isolation == isolation_level::isolated);
  CHECK(mcp.limits.wall_seconds.value == 20.0);
  CHECK(mcp.limits.memory_bytes.value == std::uint64_t{256} << 20);
  REQUIRE(mcp.mcp_servers.size() == 1);
  CHECK(mcp.mcp_servers[0].second == std::vector<std::string>{"/usr/bin/mcp-server-filesystem", "/srv"});
  CHECK(mcp.mcp_config_path == "servers.json");
  CHECK(mcp.max_concurrent == 2);
  CHECK(mcp.pool == 0);
  CHECK(mcp.max_calls == std::uint64_t{50});
  CHECK(mcp.max_session_calls == std::uint64_t{300});
  CHECK(mcp.run_log_dir == "/var/log/psych");
  CHECK(mcp.listen.empty());
  CHECK_FALSE(cli::needs_remote(r.value()));
  // Over HTTP every request is authenticated, and the HTTP options mean nothing over stdio.
  CHECK(error_of({"mcp", "--listen", "127.0.0.1:8765"}) == error_kind::invalid_argument);
  CHECK(error_of({"mcp", "--token-file", "t"}) == error_kind::invalid_argument);
  CHECK(error_of({"mcp", "--max-concurrent", "0"}) == error_kind::invalid_limit);
  auto listening = parse({"mcp", "--listen", "127.0.0.1:8765", "--token-file", "t"});
  REQUIRE(listening.has_value());
  CHECK(cli::needs_remote(listening.value()));
}

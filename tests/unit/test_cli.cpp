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

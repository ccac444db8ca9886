#pragma once
// What the psych commands do once parsed, shared by the two executables built from these sources
// (apps/CMakeLists.txt): psych, which runs everything local, and psych-remote, which also has the
// remote code (remote_commands.hpp). The remote backend is handed in, so this file, and psych,
// link no TLS.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "mcp_servers.hpp"
#include "psych/host/binding_sources.hpp"
#include "psych/host/mcp.hpp"
#include "psych/host/sandbox.hpp"

namespace psych::cli {

enum exit_status : int { completed = 0, failed = 1, usage_error = 2, refused = 3 };

/// --connect-seconds as an MCP server's start-up budget; unset stays unset (the server's default).
std::optional<std::chrono::milliseconds> start_budget(std::optional<double> seconds);

/// Starts each server (within `start_timeout` each, when set) and makes them one binding source.
/// A server that does not start is invalid_argument naming it: nothing runs without its tools.
result<std::unique_ptr<mcp_binding_source>> start_mcp_servers(const std::vector<mcp_server_config>& servers,
                                                              std::optional<std::chrono::milliseconds> start_timeout);

/// Every binding source a command started, owned together and offered as one catalogue and
/// invoker (binding_sources: a name two sources offer is offered by neither). Destroyed in the
/// reverse order of their start, the combined view first.
class started_upstream {
 public:
  started_upstream() = default;
  ~started_upstream();
  started_upstream(const started_upstream&) = delete;
  started_upstream& operator=(const started_upstream&) = delete;

  template <class Source>
  void add(std::unique_ptr<Source> source, std::string label) {
    parts_.push_back(binding_source::of(*source, std::move(label)));
    owners_.push_back(std::shared_ptr<Source>(std::move(source)));
  }
  /// Makes the combined view; call once every source is added. Null views when none was; the one
  /// source itself when there is one, so a lone source's calls take no detour.
  void seal();
  [[nodiscard]] tool_catalogue* catalogue() const { return catalogue_; }
  [[nodiscard]] tool_invoker* invoker() const { return invoker_; }

 private:
  std::vector<std::shared_ptr<void>> owners_;
  std::vector<binding_source> parts_;
  std::unique_ptr<binding_sources> all_;
  tool_catalogue* catalogue_ = nullptr;
  tool_invoker* invoker_ = nullptr;
};

/// How the sources reached over HTTP are started: psych-remote's (http_sources.cpp). psych passes
/// none: it hands every command naming one to psych-remote before one runs.
using http_source_starter = std::function<result<void>(
    const upstream_config& config, std::optional<std::chrono::milliseconds> start_timeout, started_upstream& into)>;

/// Starts every source of `config` (the HTTP ones with `start_http`), each within `start_timeout`.
/// Any that does not start is invalid_argument naming it: nothing runs without its tools.
result<std::unique_ptr<started_upstream>> start_upstream(const upstream_config& config,
                                                         std::optional<std::chrono::milliseconds> start_timeout,
                                                         const http_source_starter& start_http);

/// Prints e on standard error, its text made safe for a terminal; returns usage_error.
int fail_usage(const error& e);

/// How --remote becomes a sandbox: psych-remote's remote_backend. psych passes none: it hands
/// every command with --remote to psych-remote before one runs.
using remote_opener =
    std::function<result<std::unique_ptr<sandbox>>(const remote_choice&, const local_sandbox_options&)>;

/// The deployment's settings: a config file if given, --allow-same-uid on top.
result<local_sandbox_options> sandbox_options(const std::string& config_path, bool allow_same_uid);

/// The pinned or strongest backend: remote with --remote, a container with --backend container,
/// a local one otherwise.
result<std::unique_ptr<sandbox>> chosen_sandbox(const local_sandbox_options& options, const std::string& image,
                                                const std::string& runtime, const remote_choice& remote = {},
                                                const remote_opener& open_remote = {});

int run(const run_command& given, const remote_opener& open_remote, const http_source_starter& start_http = {});
int describe(const describe_command& given, const remote_opener& open_remote);

/// psych mcp over stdio (mcp_command.cpp); --listen is psych-remote's (remote_commands.hpp).
int mcp_stdio(const mcp_command& given, const http_source_starter& start_http = {});

}  // namespace psych::cli

#include "mcp_command.hpp"

#include <cstdio>
#include <filesystem>
#include <random>
#include <system_error>

#include <fmt/format.h>

#include "commands.hpp"

// psych's version, from the main build's project(); the Windows project, which has none, says this.
#ifndef PSYCH_VERSION_TEXT
#define PSYCH_VERSION_TEXT "0.1.0"
#endif

namespace psych::cli {
namespace {

/// A directory only this user can open, under the system's temporary directory.
result<std::string> private_temporary_directory() {
  std::error_code failed;
  const auto base = std::filesystem::temp_directory_path(failed);
  if (failed) return fail_with(error_kind::invalid_argument, "no temporary directory: " + failed.message());
  std::random_device entropy;
  for (int attempt = 0; attempt < 16; ++attempt) {
    const auto path = base / fmt::format("psych-mcp-{:08x}{:08x}", entropy(), entropy());
    if (std::filesystem::create_directory(path, failed)) {
      std::filesystem::permissions(path, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace,
                                   failed);
      if (failed) {
        std::filesystem::remove(path, failed);
        return fail_with(error_kind::invalid_argument, "cannot make a private directory: " + failed.message());
      }
      return path.string();
    }
    if (failed) return fail_with(error_kind::invalid_argument, fmt::format("cannot make {}: {}", path.string(), failed.message()));
  }
  return fail_with(error_kind::invalid_argument, "cannot make a private temporary directory: every name was taken");
}

}  // namespace

mcp_deployment::~mcp_deployment() {
  blobs.reset();
  upstream.reset();  // its servers stop before the sandbox goes
  if (!made_blob_dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(made_blob_dir, ignored);
  }
}

result<std::unique_ptr<mcp_deployment>> prepare_mcp(const mcp_command& given, const http_source_starter& start_http) {
  auto made = std::make_unique<mcp_deployment>();
  PSYCH_TRY(auto options, sandbox_options(given.config_path, given.allow_same_uid));
  if (!given.backend.empty()) options.backend = given.backend;
  options.isolation = given.isolation;
  options.pool.size = static_cast<std::size_t>(given.pool);
  PSYCH_TRY(made->backend, chosen_sandbox(options, given.image, given.container_runtime));

  PSYCH_TRY(auto upstream, upstream_of(given.mcp_servers, given.mcp_config_path, given.http_sources));
  PSYCH_TRY(made->upstream, start_upstream(upstream, start_budget(given.connect_seconds), start_http));

  std::string blob_dir = given.blob_dir;
  if (blob_dir.empty()) {
    PSYCH_TRY(blob_dir, private_temporary_directory());
    made->made_blob_dir = blob_dir;
  }
  PSYCH_TRY(made->blobs, open_directory_blob_store(blob_dir));
  if (!given.run_log_dir.empty()) {
    std::error_code failed;
    std::filesystem::create_directories(given.run_log_dir, failed);
    if (failed)
      return fail_with(error_kind::invalid_argument,
                       fmt::format("--run-log-dir {}: {}", given.run_log_dir, failed.message()));
  }

  auto& server = made->options;
  server.backend = made->backend.get();
  server.ask = {.isolation = given.isolation,
                .limits = given.limits,
                .network = given.allowed_hosts.empty() ? network_access::none : network_access::allowlist,
                .allowed_hosts = given.allowed_hosts,
                .output = given.output};
  server.catalogue = made->upstream->catalogue();
  server.invoker = made->upstream->invoker();
  server.blobs = made->blobs.get();
  if (given.max_calls) server.budget.max_calls = *given.max_calls;
  if (given.max_session_calls) server.budget.max_run_calls = *given.max_session_calls;
  server.tenant = given.tenant;
  server.max_concurrent_per_session = static_cast<std::size_t>(given.max_concurrent);
  server.run_log_dir = given.run_log_dir;
  server.server_version = PSYCH_VERSION_TEXT;
  return made;
}

int mcp_stdio(const mcp_command& given, const http_source_starter& start_http) {
  auto prepared = prepare_mcp(given, start_http);
  if (!prepared) return fail_usage(prepared.error());
  auto served = serve_mcp_stdio(prepared.value()->options, 0, 1);
  if (!served) return fail_usage(served.error());
  return completed;
}

}  // namespace psych::cli

#pragma once
// psych mcp (docs/mcp-server.md): what the server holds while it serves, made once from the command
// line and shared by both transports: stdio here, Streamable HTTP in psych-remote.
#include <memory>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/mcp.hpp"
#include "psych/host/mcp_server.hpp"

namespace psych::cli {

/// The backend, the upstream servers, the BlobStore and the options every session gets. A BlobStore
/// directory it made itself (no --blob-dir) is removed when it is destroyed.
struct mcp_deployment {
  std::unique_ptr<sandbox> backend;
  std::unique_ptr<started_upstream> upstream;
  std::unique_ptr<directory_blob_store> blobs;
  std::string made_blob_dir;
  mcp_server_options options;

  mcp_deployment() = default;
  mcp_deployment(const mcp_deployment&) = delete;
  mcp_deployment& operator=(const mcp_deployment&) = delete;
  ~mcp_deployment();
};

/// Everything a usage or deployment mistake can spoil is found here, before any session starts:
/// an unknown backend, a backend that cannot reach --isolation, an upstream server that does not
/// start, an unusable directory.
result<std::unique_ptr<mcp_deployment>> prepare_mcp(const mcp_command& given, const http_source_starter& start_http);

}  // namespace psych::cli

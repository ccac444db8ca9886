#pragma once
// The agent's tools as psych sees them: Python functions (function_tools, each call handed to the
// package's dispatcher with the GIL taken), MCP servers (over stdio or Streamable HTTP), A2A peers
// and declared HTTP tools, offered as one catalogue and reached through one invoker, as the CLI
// offers its sources.
#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "psych/host/a2a.hpp"
#include "psych/host/binding_sources.hpp"
#include "psych/host/function_tools.hpp"
#include "psych/host/http_tools.hpp"
#include "psych/host/mcp.hpp"

namespace psych::python {

class tool_source {
 public:
  /// `tokens`: a credential callback per source name (an MCP server over HTTP, an A2A peer).
  /// `http_tools_json`: the declarations in the format of the CLI's --http-tools file, or empty.
  tool_source(const pybind11::list& tools, pybind11::object dispatch, std::string_view mcp_servers_json,
              const pybind11::dict& tokens, std::string_view a2a_peers_json, std::string_view http_tools_json);
  /// Joins the tools' pool threads and stops the servers, with the GIL released: a pool thread
  /// may be waiting for it.
  ~tool_source();
  void close();
  void release_sources();
  [[nodiscard]] bool is_open() const { return open_; }

  [[nodiscard]] tool_catalogue* catalogue() const { return catalogue_; }
  [[nodiscard]] tool_invoker* invoker() const { return invoker_; }
  [[nodiscard]] const std::vector<std::string>& servers() const { return servers_; }

 private:
  std::unique_ptr<function_tools> functions_;
  std::unique_ptr<mcp_binding_source> mcp_;
  std::unique_ptr<a2a_binding_source> a2a_;
  std::unique_ptr<http_tool_source> http_;
  std::unique_ptr<binding_sources> combined_;
  tool_catalogue* catalogue_ = nullptr;
  tool_invoker* invoker_ = nullptr;
  std::vector<std::string> servers_;
  bool open_ = true;
};

}  // namespace psych::python

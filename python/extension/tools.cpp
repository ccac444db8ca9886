// Python functions and MCP servers as one binding source (tools.hpp).
#include "tools.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <stop_token>
#include <utility>

#include <pybind11/stl.h>

#include "adapted.hpp"
#include "bridge.hpp"
#include "psych/host/mcp_http_client.hpp"
#include "sandboxes.hpp"

namespace py = pybind11;

namespace psych::python {

namespace {

/// One Python tool as a function_tool: its call takes the GIL and asks the package's dispatcher,
/// which returns (True, value JSON) or (False, kind, message). Whatever the dispatcher raises is the
/// tool's failure, never the host's.
function_tool python_tool(std::string name, std::string description, std::string schema, bool requires_approval,
                          shared_object dispatch) {
  function_tool tool{std::move(name), std::move(description), std::move(schema), {}, requires_approval};
  tool.call = [dispatch = std::move(dispatch), tool_name = tool.name](const json_text& arguments,
                                                                      std::stop_token stop) -> tool_answer<json_text> {
    py::gil_scoped_acquire gil;
    try {
      const py::tuple answer = (*dispatch)(tool_name, arguments.text, stop);
      if (answer.size() >= 2 && answer[0].cast<bool>()) return json_text{answer[1].cast<std::string>()};
      if (answer.size() != 3)
        return boost::outcome_v2::failure(tool_error{tool_error_kind::tool_failed, "the dispatcher answered wrongly"});
      const auto kind = parse_enum<tool_error_kind>(answer[1].cast<std::string>());
      return boost::outcome_v2::failure(
          tool_error{kind.value_or(tool_error_kind::tool_failed), answer[2].cast<std::string>()});
    } catch (py::error_already_set& raised) {
      return boost::outcome_v2::failure(tool_error{tool_error_kind::tool_failed, describe(raised)});
    } catch (const py::cast_error& wrong) {
      return boost::outcome_v2::failure(tool_error{tool_error_kind::tool_failed, wrong.what()});
    }
  };
  return tool;
}

mcp_server_config config_of(const mcp_server_entry& entry, const py::dict& http_tokens) {
  mcp_server_config config{.name = entry.name,
                           .command = entry.command,
                           .url = entry.url,
                           .ca_file = entry.ca_file,
                           .allow_insecure_http = entry.allow_insecure_http,
                           .environment = entry.environment,
                           .timeout = std::chrono::milliseconds(entry.timeout_ms)};
  if (entry.start_timeout_ms) config.start_timeout = std::chrono::milliseconds(*entry.start_timeout_ms);
  if (http_tokens.contains(entry.name)) config.token = token_from(http_tokens[py::str(entry.name)]);
  return config;
}

}  // namespace

tool_source::tool_source(const py::list& tools, py::object dispatch, std::string_view mcp_servers_json,
                         const py::dict& http_tokens, std::string_view a2a_peers_json,
                         std::string_view http_tools_json) {
  std::vector<binding_source> parts;
  if (!tools.empty()) {
    const auto shared_dispatch = share(std::move(dispatch));
    std::vector<function_tool> functions;
    for (const auto& entry : tools) {
      const auto fields = entry.cast<py::tuple>();
      functions.push_back(python_tool(fields[0].cast<std::string>(), fields[1].cast<std::string>(),
                                      fields[2].cast<std::string>(), fields[3].cast<bool>(), shared_dispatch));
    }
    functions_ = value_or_raise(function_tools::create(std::move(functions)));
    parts.push_back(binding_source::of(*functions_, "functions"));
  }
  const auto entries = decode_or_raise<std::vector<mcp_server_entry>>(mcp_servers_json, "the MCP servers");
  if (!entries.empty()) {
    std::vector<std::unique_ptr<mcp_client>> clients;
    for (const auto& entry : entries) {
      const auto config = config_of(entry, http_tokens);
      mcp_result<std::unique_ptr<mcp_client>> started = [&] {
        py::gil_scoped_release unlocked;  // a server's start takes up to its start budget
        return entry.url.empty() ? mcp_client::start(config) : start_mcp_http_client(config);
      }();
      if (!started) raise("mcp_server_unavailable", fmt::format("MCP server {:?}: {}", entry.name, started.error().message()));
      clients.push_back(std::move(started).value());
      servers_.push_back(entry.name);
    }
    auto source = mcp_binding_source::create(std::move(clients));
    if (!source) raise("invalid_argument", source.error().message());
    mcp_ = std::move(source).value();
    parts.push_back(binding_source::of(*mcp_, "mcp"));
  }
  const auto peers = decode_or_raise<std::vector<a2a_peer_entry>>(a2a_peers_json, "the A2A peers");
  if (!peers.empty()) {
    std::vector<a2a_peer_config> configs;
    for (const auto& peer : peers) {
      configs.push_back({.name = peer.name,
                         .url = peer.url,
                         .ca_file = peer.ca_file,
                         .allow_insecure_http = peer.allow_insecure_http,
                         .timeout = std::chrono::milliseconds(peer.timeout_ms),
                         .start_timeout = std::chrono::milliseconds(peer.start_timeout_ms)});
      if (http_tokens.contains(peer.name)) configs.back().token = token_from(http_tokens[py::str(peer.name)]);
      servers_.push_back(peer.name);
    }
    a2a_ = value_or_raise(a2a_binding_source::create(std::move(configs)));
    // Each peer's card is read now, so a runtime fails at start on a peer it cannot reach.
    const result<void> cards = [&] {
      py::gil_scoped_release unlocked;
      return a2a_->read_cards();
    }();
    if (!cards) raise("a2a_peer_unavailable", cards.error().message());
    parts.push_back(binding_source::of(*a2a_, "a2a"));
  }
  if (!http_tools_json.empty()) {
    http_ = value_or_raise(http_tool_source::create(value_or_raise(parse_http_tools(http_tools_json))));
    parts.push_back(binding_source::of(*http_, "http"));
  }
  if (parts.size() == 1) {
    catalogue_ = parts.front().catalogue;
    invoker_ = parts.front().invoker;
  } else if (parts.size() > 1) {
    combined_ = std::make_unique<binding_sources>(std::move(parts));
    catalogue_ = combined_.get();
    invoker_ = combined_.get();
  }
}

void tool_source::close() {
  open_ = false;
  catalogue_ = nullptr;
  invoker_ = nullptr;
  py::gil_scoped_release unlocked;
  release_sources();
}

void tool_source::release_sources() {
  combined_.reset();
  http_.reset();
  a2a_.reset();
  mcp_.reset();
  functions_.reset();
}

tool_source::~tool_source() {
  if (PyGILState_Check() != 0) close();
  else release_sources();
}

namespace {

/// A direct call by the model: the runtime's own tool path. A tool that needs approval is the
/// runtime's to approve (it asks a person), so only a denial stops it here.
py::tuple call_directly(tool_source& source, const std::string& name, const std::string& arguments_json) {
  if (source.invoker() == nullptr) return py::make_tuple(false, "unknown_tool", "this runtime has no tools");
  static std::atomic<std::uint64_t> next_call{0};
  const std::string call_id = "direct-" + std::to_string(++next_call);
  const tool_call call{.call_id = call_id, .execution_id = "", .tool = name, .arguments_json = arguments_json};
  tool_outcome outcome;
  {
    py::gil_scoped_release unlocked;
    source.catalogue()->offered_now();  // a combined source routes by its last read
    const auto permission = source.invoker()->permit(call);
    if (permission.decision == call_permission::verdict::denied) {
      outcome = tool_outcome::error(tool_error_kind::denied, permission.reason);
    } else {
      std::promise<tool_outcome> answered;
      auto answer = answered.get_future();
      source.invoker()->invoke(call, {}, [&answered](tool_outcome out) { answered.set_value(std::move(out)); });
      outcome = answer.get();
    }
  }
  if (outcome.ok) return py::make_tuple(true, outcome.value_json);
  return py::make_tuple(false, std::string(name_of(outcome.kind)), outcome.message);
}

}  // namespace

void register_tools(py::module_& module) {
  py::class_<std::stop_token>(module, "StopToken").def("stop_requested", &std::stop_token::stop_requested);

  py::class_<tool_source, std::shared_ptr<tool_source>>(module, "ToolSource")
      .def(py::init<const py::list&, py::object, std::string_view, const py::dict&, std::string_view,
                    std::string_view>(),
           py::arg("tools"), py::arg("dispatch"), py::arg("mcp_servers_json"), py::arg("tokens"),
           py::arg("a2a_peers_json") = "[]", py::arg("http_tools_json") = "")
      .def("offered_json",
           [](tool_source& self) {
             if (self.catalogue() == nullptr) return std::string("[]");
             std::vector<binding> offered;
             {
               py::gil_scoped_release unlocked;
               offered = self.catalogue()->offered_now();
             }
             std::string json = "[";
             for (const auto& tool : offered) {
               if (json.size() > 1) json += ',';
               json += fmt::format(R"({{"name":{},"description":{},"input_schema":{},"deferred":{}}})",
                                   protocol::encode_json(tool.name), protocol::encode_json(tool.description),
                                   tool.input_schema_json, tool.deferred ? "true" : "false");
             }
             return json + "]";
           })
      .def("connected_servers", &tool_source::servers)
      .def("call", &call_directly)
      .def("close", &tool_source::close);
}

}  // namespace psych::python

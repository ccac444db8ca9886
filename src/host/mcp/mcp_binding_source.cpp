// Several MCP servers as one binding source (include/psych/host/mcp.hpp): each server's tool `t`
// is the binding `server__t`, listed from the server and cached until it says its list changed,
// and called on a small pool of threads of its own.
#include "psych/host/mcp.hpp"

#include <mutex>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "psych/host/blocking_invoker.hpp"

namespace psych {
namespace {

auto mcp_failure(mcp_error_kind kind, std::string detail) {
  return boost::outcome_v2::failure(mcp_error{kind, std::move(detail)});
}

/// What a program sees of an MCP error: the kinds it can branch on (docs/bindings.md).
tool_outcome outcome_of(const mcp_error& e) {
  switch (e.kind) {
    case mcp_error_kind::tool_failed: return tool_outcome::error(tool_error_kind::tool_failed, e.detail);
    case mcp_error_kind::rpc_error:
      return tool_outcome::error(tool_error_kind::tool_failed, fmt::format("JSON-RPC error {}: {}", e.rpc_code, e.detail));
    case mcp_error_kind::timeout: return tool_outcome::error(tool_error_kind::timeout, e.message());
    case mcp_error_kind::cancelled: return tool_outcome::error(tool_error_kind::cancelled, e.message());
    case mcp_error_kind::invalid_arguments: return tool_outcome::error(tool_error_kind::malformed_call, e.message());
    // Nothing reached the server, or it answered without acting (a redirect, a refused credential,
    // a session it no longer knows): the call did not happen.
    case mcp_error_kind::unusable:
    case mcp_error_kind::unreachable:
    case mcp_error_kind::no_credential:
    case mcp_error_kind::refused:
    case mcp_error_kind::unauthorized:
    case mcp_error_kind::session_expired:
      return tool_outcome::error(tool_error_kind::unavailable_binding, e.message());
    // The call may have reached the server and been acted on: it is never sent again.
    case mcp_error_kind::server_exited:
    case mcp_error_kind::protocol_violation:
    case mcp_error_kind::connection_lost:
    case mcp_error_kind::http_error: return tool_outcome::error(tool_error_kind::unknown_outcome, e.message());
    case mcp_error_kind::invalid_config:
    case mcp_error_kind::spawn_failed: break;
  }
  return tool_outcome::error(tool_error_kind::tool_failed, e.message());
}

}  // namespace

struct mcp_binding_source::impl {
  std::vector<std::unique_ptr<mcp_client>> clients;
  std::mutex cache_mutex;
  std::vector<std::optional<std::vector<binding>>> cache;  ///< per client; nullopt: to be listed
  std::set<std::string> destructive;  ///< binding names of the listed tools their server marks destructive
  std::unique_ptr<blocking_invoker> invoker;               ///< reset first: its pool calls the clients

  [[nodiscard]] std::optional<target> resolve(std::string_view binding_name) const {
    const std::size_t split = binding_name.find("__");
    if (split == std::string_view::npos) return std::nullopt;
    const std::string_view server = binding_name.substr(0, split);
    for (const auto& client : clients)
      if (client->name() == server) return target{client.get(), std::string(binding_name.substr(split + 2))};
    return std::nullopt;
  }

  tool_outcome call(const owned_tool_call& call, std::stop_token stop) const {
    const auto found = resolve(call.tool);
    if (!found) return tool_outcome::error(tool_error_kind::unknown_tool, fmt::format("no MCP server offers {}", call.tool));
    auto answer = found->client->call_tool(found->tool, call.arguments_json, std::move(stop));
    if (!answer) return outcome_of(answer.error());
    return tool_outcome::value(std::move(answer).value().json);
  }
};

mcp_binding_source::mcp_binding_source(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

mcp_binding_source::~mcp_binding_source() { impl_->invoker.reset(); }

mcp_result<std::unique_ptr<mcp_binding_source>> mcp_binding_source::create(
    std::vector<std::unique_ptr<mcp_client>> clients, std::size_t threads) {
  std::set<std::string_view> names;
  for (const auto& client : clients) {
    if (!client) return mcp_failure(mcp_error_kind::invalid_config, "a null client");
    const std::string& name = client->name();
    if (name.empty()) return mcp_failure(mcp_error_kind::invalid_config, "a server with an empty name");
    if (name.find("__") != std::string::npos)
      return mcp_failure(mcp_error_kind::invalid_config,
                  fmt::format("the server name {} contains \"__\", which separates it from its tools", name));
    if (!names.insert(name).second)
      return mcp_failure(mcp_error_kind::invalid_config, fmt::format("two servers are named {}", name));
  }
  auto i = std::make_unique<impl>();
  i->cache.resize(clients.size());
  i->clients = std::move(clients);
  impl* raw = i.get();
  i->invoker = std::make_unique<blocking_invoker>(
      [](const tool_call&) { return call_permission::allow(); },
      [raw](const owned_tool_call& call, std::stop_token stop) { return raw->call(call, std::move(stop)); }, threads);
  return std::unique_ptr<mcp_binding_source>{new mcp_binding_source{std::move(i)}};
}

std::vector<binding> mcp_binding_source::offered_now() {
  std::lock_guard lock{impl_->cache_mutex};
  std::vector<binding> offered;
  for (std::size_t i = 0; i < impl_->clients.size(); ++i) {
    mcp_client& client = *impl_->clients[i];
    auto& cached = impl_->cache[i];
    if (!client.usable()) {
      cached.reset();
      continue;
    }
    if (client.take_tools_changed()) cached.reset();
    if (!cached) {
      auto tools = client.list_tools();
      if (!tools) continue;  // offers nothing now; listed again at the next read
      std::vector<binding> bindings;
      std::set<std::string> seen;
      const auto prefix = client.name() + "__";
      std::erase_if(impl_->destructive, [&](const std::string& name) { return name.starts_with(prefix); });
      for (mcp_tool& t : tools.value()) {
        if (t.name.empty() || !seen.insert(t.name).second) continue;
        if (t.destructive) impl_->destructive.insert(prefix + t.name);
        bindings.push_back({.name = client.name() + "__" + t.name, .description = std::move(t.description),
                            .input_schema_json = std::move(t.input_schema_json), .deferred = false,
                            .origin = binding_origin::mcp});
      }
      cached = std::move(bindings);
    }
    offered.insert(offered.end(), cached->begin(), cached->end());
  }
  return offered;
}

call_permission mcp_binding_source::permit(const tool_call& call) {
  std::lock_guard lock{impl_->cache_mutex};
  if (impl_->destructive.contains(std::string(call.tool)))
    return call_permission::approval("its MCP server marks it destructive (destructiveHint)");
  return call_permission::allow();
}

void mcp_binding_source::invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) {
  impl_->invoker->invoke(call, std::move(stop), std::move(done));
}

std::optional<mcp_binding_source::target> mcp_binding_source::resolve(std::string_view binding_name) const {
  return impl_->resolve(binding_name);
}

}  // namespace psych

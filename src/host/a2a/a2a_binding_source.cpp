// Several A2A peers as one binding source (include/psych/host/a2a.hpp): each skill `s` of peer `p`'s
// card is the binding `p__s`, and a call of it runs on a small pool of threads of its own.
#include "psych/host/a2a.hpp"

#include <set>
#include <utility>

#include <fmt/format.h>

#include "a2a/a2a_peer.hpp"
#include "psych/host/blocking_invoker.hpp"

namespace psych {

struct a2a_binding_source::impl {
  std::vector<std::unique_ptr<host::a2a_peer>> peers;
  std::unique_ptr<blocking_invoker> invoker;  ///< reset first: its pool calls the peers

  tool_outcome call(const owned_tool_call& call, std::stop_token stop) const {
    const std::size_t split = call.tool.find("__");
    if (split != std::string::npos)
      for (const auto& peer : peers)
        if (peer->name() == std::string_view(call.tool).substr(0, split))
          return peer->call(std::string_view(call.tool).substr(split + 2), call.arguments_json, std::move(stop));
    return tool_outcome::error(tool_error_kind::unknown_tool, fmt::format("no A2A peer offers {}", call.tool));
  }
};

a2a_binding_source::a2a_binding_source(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

a2a_binding_source::~a2a_binding_source() { impl_->invoker.reset(); }

result<std::unique_ptr<a2a_binding_source>> a2a_binding_source::create(std::vector<a2a_peer_config> peers,
                                                                       std::size_t threads) {
  std::set<std::string> names;
  auto i = std::make_unique<impl>();
  for (auto& config : peers) {
    if (config.name.empty()) return fail_with(error_kind::invalid_argument, "an A2A peer with an empty name");
    if (config.name.find("__") != std::string::npos)
      return fail_with(error_kind::invalid_argument,
                       fmt::format("the A2A peer name {} contains \"__\", which separates it from its skills", config.name));
    if (!names.insert(config.name).second)
      return fail_with(error_kind::invalid_argument, fmt::format("two A2A peers are named {}", config.name));
    if (config.timeout.count() <= 0 || config.start_timeout.count() <= 0)
      return fail_with(error_kind::invalid_argument, fmt::format("A2A peer {}: a timeout must be positive", config.name));
    PSYCH_TRY(auto peer, host::a2a_peer::create(std::move(config)));
    i->peers.push_back(std::move(peer));
  }
  impl* raw = i.get();
  i->invoker = std::make_unique<blocking_invoker>(
      [](const tool_call&) { return call_permission::allow(); },
      [raw](const owned_tool_call& call, std::stop_token stop) { return raw->call(call, std::move(stop)); }, threads);
  return std::unique_ptr<a2a_binding_source>{new a2a_binding_source{std::move(i)}};
}

result<void> a2a_binding_source::read_cards() {
  for (const auto& peer : impl_->peers) {
    auto known = peer->card();
    if (!known) return error{known.error().kind, fmt::format("peer {}: {}", peer->name(), known.error().detail)};
  }
  return success();
}

std::vector<binding> a2a_binding_source::offered_now() {
  std::vector<binding> offered;
  for (const auto& peer : impl_->peers) {
    auto known = peer->card();
    if (!known) continue;  // offers nothing now; read again at the next offer
    for (const auto& skill : known.value().card.skills) {
      std::string description = skill.description.empty() ? skill.name : skill.description;
      offered.push_back({.name = peer->name() + "__" + skill.id, .description = std::move(description),
                         .input_schema_json = "{}", .deferred = false, .origin = binding_origin::a2a});
    }
  }
  return offered;
}

call_permission a2a_binding_source::permit(const tool_call&) { return call_permission::allow(); }

void a2a_binding_source::invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) {
  impl_->invoker->invoke(call, std::move(stop), std::move(done));
}

}  // namespace psych

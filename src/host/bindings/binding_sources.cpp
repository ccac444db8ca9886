// Several binding sources as one catalogue and invoker (include/psych/host/binding_sources.hpp).
#include "psych/host/binding_sources.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace psych {

binding_sources::binding_sources(std::vector<binding_source> sources) : sources_(std::move(sources)) {}

std::vector<binding> binding_sources::offered_now() {
  // Read every source outside the lock: a source may be slow (an MCP server listing its tools).
  std::map<std::string, std::vector<std::pair<std::size_t, binding>>, std::less<>> by_name;
  for (std::size_t i = 0; i < sources_.size(); ++i)
    for (auto& offered : sources_[i].catalogue->offered_now()) {
      auto name = offered.name;
      by_name[std::move(name)].emplace_back(i, std::move(offered));
    }
  std::vector<binding> merged;
  std::vector<route> routes;
  std::vector<std::string> conflicts;
  for (auto& [name, offers] : by_name) {
    if (offers.size() == 1) {
      routes.push_back({name, offers.front().first});
      merged.push_back(std::move(offers.front().second));
      continue;
    }
    std::string from;
    for (const auto& [source, ignored] : offers) from.append(from.empty() ? "" : ", ").append(sources_[source].label);
    conflicts.push_back(fmt::format("{} ({})", name, from));
  }
  const std::lock_guard lock(mutex_);
  routes_ = std::move(routes);
  conflicts_ = std::move(conflicts);
  return merged;
}

std::vector<std::string> binding_sources::conflicts() const {
  const std::lock_guard lock(mutex_);
  return conflicts_;
}

std::size_t binding_sources::source_of(std::string_view name) const {
  const std::lock_guard lock(mutex_);
  const auto found = std::ranges::lower_bound(routes_, name, {}, &route::name);
  return found != routes_.end() && found->name == name ? found->source : sources_.size();
}

call_permission binding_sources::permit(const tool_call& call) {
  const auto source = source_of(call.tool);
  if (source == sources_.size()) return call_permission::deny(fmt::format("no source offers {}", call.tool));
  return sources_[source].invoker->permit(call);
}

void binding_sources::invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) {
  const auto source = source_of(call.tool);
  if (source == sources_.size())
    return done(tool_outcome::error(tool_error_kind::unknown_tool, fmt::format("no source offers {}", call.tool)));
  sources_[source].invoker->invoke(call, std::move(stop), std::move(done));
}

}  // namespace psych

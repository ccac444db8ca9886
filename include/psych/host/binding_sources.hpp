#pragma once
// Several binding sources (function tools, MCP servers, a runtime's own registry) offered as one
// catalogue and reached through one invoker: what runtime_setup's `catalogue` and `invoker` take
// when an agent's tools come from more than one place. Each call goes to the source that offered
// its name at the last read of the catalogue.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "psych/host/bindings.hpp"

namespace psych {

/// One source: its catalogue and the invoker that runs what it offers (often one object that is
/// both, as function_tools and mcp_binding_source are). Not owned: each must outlive the
/// binding_sources that names it.
struct binding_source {
  tool_catalogue* catalogue = nullptr;
  tool_invoker* invoker = nullptr;
  std::string label;  ///< for messages: "functions", "mcp"

  template <class Both>
  static binding_source of(Both& both, std::string label) {
    return {&both, &both, std::move(label)};
  }
};

class binding_sources final : public tool_catalogue, public tool_invoker {
 public:
  explicit binding_sources(std::vector<binding_source> sources);

  /// Every source's tools, sorted by name. A name two sources offer is offered by neither (which
  /// one the program would reach must never depend on the order of a list), and conflicts() says
  /// so; a program that lists it gets unavailable_binding, never one of the two at random.
  std::vector<binding> offered_now() override;
  /// The names the last offered_now() withheld, each with the sources that offered it:
  /// "lookup (functions, mcp)".
  std::vector<std::string> conflicts() const;

  /// The permission and the call go to the source that offered the name; a name no source offered
  /// at the last read is unknown_tool (denied at permit, for the same reason).
  call_permission permit(const tool_call& call) override;
  void invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) override;

 private:
  struct route {
    std::string name;
    std::size_t source;
  };
  /// The source of `name` at the last read, or sources_.size() when none offered it.
  std::size_t source_of(std::string_view name) const;

  std::vector<binding_source> sources_;
  mutable std::mutex mutex_;
  std::vector<route> routes_;  ///< sorted by name
  std::vector<std::string> conflicts_;
};

}  // namespace psych

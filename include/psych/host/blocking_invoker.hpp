#pragma once
// For a runtime whose tools block: an invoker that runs each call on a pool of its own threads, so
// the host goes on reading frames, metering, and holding the wall clock while a tool works.
// Composition, not inheritance: the pool is joined before the functions it calls are destroyed.
#include <cstddef>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "psych/host/bindings.hpp"

namespace psych {

/// A call whose strings outlive invoke(): what a pool thread receives.
struct owned_tool_call {
  std::string call_id;
  std::string execution_id;
  std::string tool;
  std::string arguments_json;
};

class blocking_invoker final : public tool_invoker {
 public:
  using permit_function = std::function<call_permission(const tool_call&)>;
  /// Runs on a pool thread; `stop` is requested when the program no longer waits for the answer.
  using call_function = std::function<tool_outcome(const owned_tool_call&, std::stop_token)>;

  blocking_invoker(permit_function permit, call_function call, std::size_t threads = 4);
  /// Waits for every call in progress to return (each was asked to stop when its execution ended).
  ~blocking_invoker() override;

  call_permission permit(const tool_call& call) override { return permit_(call); }
  void invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) override;

 private:
  struct pool;
  permit_function permit_;
  call_function call_;
  std::unique_ptr<pool> pool_;
};

}  // namespace psych

#pragma once
// A runtime's tools, as the host's invoker and catalogue reach them, for the bindings cases and
// the crash worker. Every tool answers with its name and arguments, except:
//   fails       fails as a tool does (tool_failed);
//   slow        answers after 300 ms on a thread of its own, or `cancelled` when asked to stop;
//   hang        answers only when asked to stop (`cancelled`), after writing `hang_marker` if set;
//   deaf        as hang, but ignores the stop request too (a worker's tool that never returns);
//   delete_all  needs a person's approval; `deleted` counts the times its effect happened;
//   forbidden   is refused by the tenant's policy;
//   big         answers with a string of arguments["size"] bytes;
//   rows        answers {"rows": [{"i": 0, "name": "row 0"}, ...]} with arguments["count"] rows;
//   timeout, unknown_outcome  fail with those kinds, as a runtime's transport would.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "psych/host/bindings.hpp"

namespace conformance {

/// A program that calls `echo` `calls` times and returns, per call, the echoed index or the
/// ToolError's kind: how the cases see a budget run out from inside.
inline std::string echo_calls_program(int calls) {
  return "out = []\nfor i in range(" + std::to_string(calls) +
         "):\n    try:\n        out.append((await call_tool(\"echo\", {\"i\": i}))[\"arguments\"][\"i\"])\n"
         "    except ToolError as error:\n        out.append(error.kind)\nreturn out\n";
}

class recording_invoker final : public psych::tool_invoker {
 public:
  ~recording_invoker() override {
    std::lock_guard lock(mutex_);
    threads_.clear();  // jthreads: each asked to stop and joined
  }

  psych::call_permission permit(const psych::tool_call& call) override {
    if (call.tool == "delete_all") return psych::call_permission::approval("it deletes every record");
    if (call.tool == "forbidden") return psych::call_permission::deny("the tenant's policy forbids forbidden");
    return psych::call_permission::allow();
  }

  void invoke(const psych::tool_call& call, std::stop_token stop,
              std::function<void(psych::tool_outcome)> done) override {
    ++calls;
    const std::string tool(call.tool), arguments(call.arguments_json);
    if (tool == "slow" || tool == "hang" || tool == "deaf") {
      std::lock_guard lock(mutex_);
      threads_.emplace_back([this, tool, arguments, stop, done = std::move(done)](std::stop_token own) {
        const int now = ++in_flight;
        for (int seen = max_in_flight; now > seen && !max_in_flight.compare_exchange_weak(seen, now);) {
        }
        if (tool != "slow" && !hang_marker.empty()) std::ofstream(hang_marker) << "in call\n";
        std::mutex m;
        std::condition_variable_any woken;
        std::unique_lock held(m);
        const auto limit = tool == "slow" ? std::chrono::milliseconds(300) : std::chrono::hours(1);
        woken.wait_for(held, tool == "deaf" ? own : stop, limit, [] { return false; });
        --in_flight;
        if (tool != "slow" || stop.stop_requested()) {
          ++stopped;
          done(psych::tool_outcome::error(psych::tool_error_kind::cancelled, "stopped"));
          return;
        }
        done(echo(tool, arguments));
      });
      return;
    }
    if (tool == "delete_all") ++deleted;  // never reached: the policy asks for approval first
    if (tool == "fails") return done(psych::tool_outcome::error(psych::tool_error_kind::tool_failed, "boom"));
    if (tool == "timeout") return done(psych::tool_outcome::error(psych::tool_error_kind::timeout, "no answer"));
    if (tool == "unknown_outcome")
      return done(psych::tool_outcome::error(psych::tool_error_kind::unknown_outcome, "transport lost"));
    if (tool == "big") {
      const auto at = arguments.find("\"size\":");
      const auto size = at == std::string::npos ? 0 : std::stoul(arguments.substr(at + 7));
      return done(psych::tool_outcome::value("\"" + std::string(size, 'x') + "\""));
    }
    if (tool == "rows") {
      const auto at = arguments.find("\"count\":");
      const auto count = at == std::string::npos ? 0 : std::stoul(arguments.substr(at + 8));
      std::string rows = "{\"rows\":[";
      for (unsigned long i = 0; i < count; ++i)
        rows += (i ? ",{\"i\":" : "{\"i\":") + std::to_string(i) + ",\"name\":\"row " + std::to_string(i) + "\"}";
      return done(psych::tool_outcome::value(rows + "]}"));
    }
    done(echo(tool, arguments));
  }

  static psych::tool_outcome echo(const std::string& tool, const std::string& arguments) {
    return psych::tool_outcome::value("{\"tool\":\"" + tool + "\",\"arguments\":" + arguments + "}");
  }

  std::atomic<int> calls{0}, deleted{0}, stopped{0}, in_flight{0}, max_in_flight{0};
  std::string hang_marker;

 private:
  std::mutex mutex_;
  std::vector<std::jthread> threads_;
};

/// The runtime's catalogue: a list the test changes between turns, as a policy would.
class listed_catalogue final : public psych::tool_catalogue {
 public:
  explicit listed_catalogue(std::vector<psych::binding> tools) : tools_(std::move(tools)) {}
  std::vector<psych::binding> offered_now() override {
    std::lock_guard lock(mutex_);
    return tools_;
  }
  void withdraw(const std::string& name) {
    std::lock_guard lock(mutex_);
    std::erase_if(tools_, [&](const psych::binding& b) { return b.name == name; });
  }

 private:
  std::mutex mutex_;
  std::vector<psych::binding> tools_;
};

}  // namespace conformance

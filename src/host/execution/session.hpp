#pragma once
// One execution, start to finish: directories, the launcher (session_launch), the conversation of
// the contract (session_conversation, over frame_transport.hpp, with the calls in call_dispatcher
// and the network probe's target in loopback_probe), output capture, the clock and cancellation
// (session_clock), grading and the result (session_result, decide_failure, finish_result).
// Blocking; Asio inside.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "psych/core.hpp"
#include "psych/host/bindings.hpp"
#include "psych/host/call_relay.hpp"
#include "psych/host/sandbox.hpp"
#include "bindings/binding_gateway.hpp"
#include "execution/launcher_process.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::host {

class claim_point;

struct session_plan {
  std::string launcher_path;
  std::string interpreter;
  execution_terms terms;
  /// What the launcher is asked to build; the terms' level is what grading
  /// demands of the result. The launcher always builds its best, and a
  /// shortfall is an abort after the child's report, never a guess before it.
  isolation_level attempt = isolation_level::process;
  std::string program;
  std::string filename = "<program>";
  std::optional<protocol::identity> run_as;  ///< nullopt: the child keeps the worker's uid
  bool allow_same_uid = false;
  /// Built from nothing by the caller; the session adds HOME and TMPDIR.
  std::map<std::string, std::string> environment;
  std::string temp_root = default_temp_root;  ///< psych/host/sandbox.hpp
  /// describe(): report containment, then abort; never runs a program.
  bool probe_only = false;
  gateway_setup bindings;  ///< what the program may call, the path to it, its budget and its Run
  blob_store* blobs = nullptr;  ///< where outputs and artifacts are preserved; none: previews only
  std::string tenant = "default";
  /// Where the program's calls go instead of `bindings`' gateway (call_relay.hpp); null: answered here.
  call_relay* relay = nullptr;
  /// Where the output goes as it is read (live_output.hpp); null: to the result only.
  output_sink* live_output = nullptr;
  /// Starts the launcher elsewhere (a container); null: a local_launcher of launcher_path.
  launcher_starter* starter = nullptr;
  /// A prepared session (docs/pools.md): launched with `terms` as its ceiling, graded, then it
  /// waits here for the request that claims it, runs that request's plan, and ends. Null: the
  /// program above runs at once.
  claim_point* claim = nullptr;
  /// Where the outcome goes as soon as it is whole: at the launcher's `exit` report once the tree
  /// is gone and the output drained, before the launcher has removed its cgroup and exited and
  /// before the directories are swept, which then happen on the session's thread, off the
  /// caller's path (a prepared sandbox's claimant, docs/pools.md). Called exactly once. Null:
  /// run_session() returns the outcome after all of that.
  std::function<void(struct session_outcome&&)> hand_over;
};

/// Where a prepared session and the request that claims it meet. The session is on its own
/// thread; claim() and retire() may come from any other. Exactly one of: claimed once, or retired.
class claim_point {
 public:
  explicit claim_point(std::chrono::steady_clock::duration max_age) : max_age_(max_age) {}

  // ---- the pool's side ----
  /// Blocks until the session is graded and waiting (true), or ended before it got there (false).
  bool wait_ready();
  /// Hands the waiting session `request` (a plan with the same launch; its terms at most the
  /// ceiling's). False when it is not waiting any more (it expired, or was retired). The plan must
  /// outlive the session.
  bool claim(const session_plan& request);
  /// The unclaimed session aborts its child and ends; a claimed one is not affected.
  void retire();
  /// Whether the session is still graded and waiting (neither claimed, retired nor ended).
  bool waiting() const;
  /// Why the session never became ready, once wait_ready() returned false.
  std::string failure() const;

  // ---- the session's side ----
  std::chrono::steady_clock::duration max_age() const { return max_age_; }
  /// Graded and waiting: `wake` posts to the session's event loop, and is called once on claim or retire.
  void ready(std::function<void()> wake);
  /// After the wake (or max_age): the claiming plan, or null, and then the session is retired.
  const session_plan* take();
  /// The session ended; `why` is empty once it was claimed.
  void ended(std::string why);

 private:
  enum class state { preparing, ready, claimed, retired, ended };
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  state state_ = state::preparing;
  const session_plan* request_ = nullptr;
  std::function<void()> wake_;
  std::string failure_;
  std::chrono::steady_clock::duration max_age_;
};

struct session_outcome {
  sandbox_result result;
  std::optional<mechanism_report> mechanisms;  ///< what the launcher applied, if it got that far
  /// The launcher's `error` frame, when its setup failed: its stage and errno, for a backend that
  /// can say more about them than the failure's message does.
  std::optional<protocol::launch_error_frame> launch_error;
  bool program_started = false;                ///< a `run` frame was sent
  /// A claimed prepared sandbox had ended (or its child had) before it could be narrowed: nothing
  /// of the program reached it, and the request may run on a fresh one.
  bool prepared_lost = false;
  /// The outcome went to the plan's hand_over; this one holds only what came after (problems
  /// sweeping the directories).
  bool handed_over = false;
};

/// One execution. For a prepared plan (`claim` set) it returns once the claiming request ran, or
/// once the sandbox was retired unclaimed; the outcome, artifacts and attachments are the claim's.
/// With `hand_over` set the outcome goes there (early when it can) and what is returned is only
/// the rest (`handed_over`).
session_outcome run_session(const session_plan& plan, std::stop_token stop);

/// 128 random bits as hex: execution tokens and ids.
std::string random_token();

}  // namespace psych::host

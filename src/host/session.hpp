#pragma once
// One execution, start to finish: directories, the launcher, the conversation of
// the contract (over frame_transport.hpp, with the calls in call_dispatcher and
// the network probe's target in loopback_probe), output capture, the clock,
// cancellation, grading and the result (decide_failure). Blocking; Asio inside.
#include <cstdint>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "psych/core.hpp"
#include "psych/host/bindings.hpp"
#include "psych/host/call_relay.hpp"
#include "binding_gateway.hpp"
#include "launcher_process.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::host {

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
  std::string temp_root = "/tmp";
  /// describe(): report containment, then abort; never runs a program.
  bool probe_only = false;
  gateway_setup bindings;  ///< what the program may call, the path to it, its budget and its Run
  blob_store* blobs = nullptr;  ///< where outputs and artifacts are preserved; none: previews only
  std::string tenant = "default";
  /// Where the program's calls go instead of `bindings`' gateway (call_relay.hpp); null: answered here.
  call_relay* relay = nullptr;
  /// Starts the launcher elsewhere (a container); null: a local_launcher of launcher_path.
  launcher_starter* starter = nullptr;
};

struct session_outcome {
  sandbox_result result;
  std::optional<mechanism_report> mechanisms;  ///< what the launcher applied, if it got that far
  bool program_started = false;                ///< a `run` frame was sent
};

session_outcome run_session(const session_plan& plan, std::stop_token stop);

/// 128 random bits as hex: execution tokens and ids.
std::string random_token();

}  // namespace psych::host

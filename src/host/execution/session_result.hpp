#pragma once
// A session's result: what grading expects of the child, the outcome made from what happened (the
// grade, the launcher's problems, the clock, the streams and the failure decision), its tail
// (finish_result.hpp) once the tree is gone, and the sweep of its directories.
#include "psych/core.hpp"
#include "bindings/binding_gateway.hpp"
#include "execution/execution_dirs.hpp"
#include "execution/finish_result.hpp"
#include "execution/session.hpp"
#include "execution/session_state.hpp"

namespace psych::host {

/// What grading expects the child to observe under the plan that runs.
grading_expectation expectation_of(const session_state& state);

/// An outcome whose failure is decided, and what its tail still adds (complete_result).
struct finished_session {
  session_outcome outcome;
  result_tail tail;
};

/// The outcome from what happened; `gateway`: what the program's calls went through, if any.
finished_session finish_session(session_state& state, const binding_gateway* gateway);

/// The rest of a result once the tree is gone: its artifacts, then its tail.
session_outcome complete_result(const session_plan& plan, const execution_dirs& dirs, finished_session finished);

/// The execution's directories removed and, below ISOLATED, what it left in the shared temp
/// directories swept; a problem doing so goes into `outcome`.
void sweep_after(const session_plan& plan, const execution_dirs& dirs, session_outcome& outcome);

}  // namespace psych::host

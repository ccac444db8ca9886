#pragma once
// psych's readable report: what an operator reads on a terminal. Every piece
// of text a program made or could influence (previews, the value, failure
// messages and tracebacks, artifact names, problems) goes through
// terminal_text(), so a program cannot drive the operator's terminal. The
// exact bytes are what `--json` prints.
#include <string>
#include <vector>

#include "psych/core.hpp"
#include "psych/host/sandbox.hpp"

namespace psych::cli {

/// `output_shown`: the output was printed as it arrived (--stream), so the report gives its sizes only.
std::string result_report(const sandbox_result& result, bool output_shown = false);
std::string refusal_report(const refusal& refused);
std::string description_report(const description& described, const std::vector<backend_info>& backends);

}  // namespace psych::cli

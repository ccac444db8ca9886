#pragma once
// How a launcher step fails. The value a step fails with *is* the contract's
// `error` frame (stage, syscall, errno, message), so nothing is lost between
// the call that failed and the host that reads about it: no string to parse
// back into a syscall name, no errno folded into prose.
#include <string>
#include <string_view>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>
#include <boost/outcome/success_failure.hpp>
#include <boost/outcome/try.hpp>

#include "psych/error.hpp"
#include "psych/result.hpp"  // PSYCH_TRY
#include "psych/protocol/frames.hpp"

namespace psych::launcher {

using setup_error = protocol::launch_error_frame;

/// A step's outcome; reading the value of a failed one is a bug and traps.
template <class T>
using setup_result = boost::outcome_v2::basic_result<T, setup_error, boost::outcome_v2::policy::terminate>;

using boost::outcome_v2::success;

/// `call` failed with `error_number` while doing `what` (for example "RLIMIT_AS, 536870912").
/// The message reads "setrlimit(RLIMIT_AS, 536870912): Operation not permitted".
setup_error system_failure(std::string_view stage, std::string_view call, int error_number,
                           std::string_view what = {});

/// A request the launcher will not carry out (bad input, a refused identity). No syscall failed.
setup_error refusal(std::string_view stage, std::string message);

/// A psych::error (a protocol or validation failure) as an error frame at `stage`.
setup_error from_error(std::string_view stage, const psych::error& error);

inline auto fail(setup_error error) { return boost::outcome_v2::failure(std::move(error)); }

}  // namespace psych::launcher

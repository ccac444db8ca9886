#pragma once
// How a launcher step fails, on every system. The value a step fails with *is* the contract's
// `error` frame (stage, syscall, error number, message), so nothing is lost between the call that
// failed and the host that reads about it: no string to parse back into a syscall name, no error
// number folded into prose. Each system's setup_error.hpp adds how its own calls fail.
#include <string>
#include <string_view>
#include <utility>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>
#include <boost/outcome/success_failure.hpp>
#include <boost/outcome/try.hpp>

#include "psych/error.hpp"
#include "psych/protocol/frames.hpp"
#include "psych/result.hpp"  // PSYCH_TRY

namespace psych::launch_setup {

using setup_error = protocol::launch_error_frame;
using protocol::launch_stage;

/// A step's outcome; reading the value of a failed one is a bug and traps.
template <class T>
using setup_result = boost::outcome_v2::basic_result<T, setup_error, boost::outcome_v2::policy::terminate>;

using boost::outcome_v2::success;

/// A request the launcher will not carry out (bad input, a refused identity). No call failed.
inline setup_error refusal(launch_stage stage, std::string message) {
  return setup_error{stage, "", 0, std::move(message)};
}

/// A psych::error (a protocol or validation failure) as an error frame at `stage`.
inline setup_error from_error(launch_stage stage, const psych::error& error) {
  return setup_error{stage, "", 0, error.message()};
}

inline auto fail(setup_error error) { return boost::outcome_v2::failure(std::move(error)); }

}  // namespace psych::launch_setup

#pragma once
// How a step of the Windows launcher fails: the value is the contract's `error` frame, as on Linux
// (launchers/linux/failure.hpp), with the Win32 error code (GetLastError, or a WSA code) as
// error_number and the call that returned it as syscall.
#include <string>
#include <string_view>

#include <windows.h>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>
#include <boost/outcome/success_failure.hpp>
#include <boost/outcome/try.hpp>

#include "psych/error.hpp"
#include "psych/protocol/frames.hpp"
#include "psych/result.hpp"  // PSYCH_TRY

namespace psych::windows {

using setup_error = protocol::launch_error_frame;

/// A step's outcome; reading the value of a failed one is a bug and traps.
template <class T>
using setup_result = boost::outcome_v2::basic_result<T, setup_error, boost::outcome_v2::policy::terminate>;

using boost::outcome_v2::success;

/// `call` failed with Win32 `error` while doing `what`. The message reads
/// "SetInformationJobObject(JobObjectExtendedLimitInformation): Access is denied."
setup_error system_failure(std::string_view stage, std::string_view call, DWORD error, std::string_view what = {});

/// The same with GetLastError() as the error.
setup_error last_error(std::string_view stage, std::string_view call, std::string_view what = {});

/// A request the launcher will not carry out. No call failed.
setup_error refusal(std::string_view stage, std::string message);

/// A psych::error (a protocol or validation failure) as an error frame at `stage`.
setup_error from_error(std::string_view stage, const psych::error& error);

inline auto fail(setup_error error) { return boost::outcome_v2::failure(std::move(error)); }

}  // namespace psych::windows

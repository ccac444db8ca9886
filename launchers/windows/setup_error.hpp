#pragma once
// How a Windows launcher's call fails: launchers/setup_result.hpp's error frame with the Win32
// error code (GetLastError, or a WSA code) as error_number and the call that returned it as
// syscall.
#include <string_view>

#include <windows.h>

#include "launchers/setup_result.hpp"

namespace psych::windows {

using launch_setup::fail;
using launch_setup::from_error;
using launch_setup::launch_stage;
using launch_setup::refusal;
using launch_setup::setup_error;
using launch_setup::setup_result;
using launch_setup::success;

/// `call` failed with Win32 `error` while doing `what`. The message reads
/// "SetInformationJobObject(JobObjectExtendedLimitInformation): Access is denied."
setup_error system_failure(launch_stage stage, std::string_view call, DWORD error, std::string_view what = {});

/// The same with GetLastError() as the error.
setup_error last_error(launch_stage stage, std::string_view call, std::string_view what = {});

}  // namespace psych::windows

#pragma once
// Windows only: security attributes with a protected DACL that grants the worker's own account and
// SYSTEM alone, "D:P(A;OICI;FA;;;<the worker's SID>)(A;OICI;FA;;;SY)", inherited by what is made
// inside a directory made with them: what mode 0700 (or 0600 for a file) is on POSIX. Handles opened
// with them are not inheritable. Used for the execution's directories, the run log and the BlobStore.
#include <windows.h>

#include "psych/result.hpp"

namespace psych::host {

/// The attributes, for CreateFileW and CreateDirectoryW (their lpSecurityDescriptor for
/// NtCreateFile). Made once per process, on first use: the account a process runs as does not
/// change. The system only reads them, so every thread may pass the same ones. system_call_failed,
/// naming the call, when they could not be made.
result<SECURITY_ATTRIBUTES*> owner_only_attributes();

}  // namespace psych::host

#pragma once
// Windows only: one name opened relative to a directory's handle (NtCreateFile with a
// RootDirectory, the openat of Windows), as itself: with FILE_OPEN_REPARSE_POINT a symbolic link or
// junction is opened, never followed. What the artifact walk and the BlobStore reach entries with.
#include <windows.h>
#include <winternl.h>

#include <string>
#include <string_view>
#include <vector>

#include "os/os_handle.hpp"

namespace psych::host {

struct beneath_request {
  ACCESS_MASK access = 0;
  ULONG share = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;
  ULONG disposition = FILE_OPEN;  ///< FILE_OPEN, FILE_CREATE, ...
  ULONG options = 0;              ///< added to FILE_OPEN_REPARSE_POINT | FILE_SYNCHRONOUS_IO_NONALERT
  PSECURITY_DESCRIPTOR security = nullptr;  ///< for what FILE_CREATE makes
};

struct opened_beneath {
  unique_os_handle handle;  ///< none when the open failed
  NTSTATUS status = 0;
  /// The Win32 error the status maps to (ERROR_FILE_NOT_FOUND, ERROR_FILE_EXISTS, ...).
  [[nodiscard]] DWORD error() const { return ::RtlNtStatusToDosError(status); }
};

/// `name` beneath `dir`. A name that is not one component (empty, a separator, a stream's ':') is
/// refused, STATUS_OBJECT_NAME_INVALID, rather than resolved.
opened_beneath open_beneath(HANDLE dir, std::wstring_view name, const beneath_request& request);

/// The names in the directory `dir` ("." and ".." left out), listed from its handle from the
/// start whatever was read from it before. A listing that failed part way keeps what it read.
struct names_listed {
  std::vector<std::wstring> names;
  DWORD error = ERROR_SUCCESS;  ///< why the listing stopped early, if it did
};
names_listed names_beneath(HANDLE dir);

}  // namespace psych::host

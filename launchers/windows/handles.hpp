#pragma once
// Handles the launcher owns, and the few it lets the child inherit. The child gets exactly the
// handles of inherited_handles, named in PROC_THREAD_ATTRIBUTE_HANDLE_LIST (spawn.cpp): any other
// handle of the launcher, inheritable or not (one it inherited from its own parent included),
// stays out.
#include <cstddef>
#include <vector>

#include <windows.h>

#include "setup_error.hpp"
#include "platform/windows/unique_handle.hpp"

namespace psych::windows {

/// The child's standard handles and the read end of its handover pipe, each an inheritable handle
/// of the launcher's own.
struct inherited_handles {
  unique_handle input;     ///< NUL: the program reads nothing
  unique_handle output;    ///< a duplicate of the launcher's stdout
  unique_handle error;     ///< a duplicate of the launcher's stderr
  unique_handle handover;  ///< the pipe the channel arrives on (channel.hpp)

  /// Every handle above, in the order the attribute list names them.
  [[nodiscard]] std::vector<HANDLE> list() const;
};

struct prepared_handles {
  inherited_handles inherited;
  unique_handle handover_writer;  ///< the launcher's end of the handover pipe, not inheritable
};

/// NUL for stdin, inheritable duplicates of the launcher's stdout and stderr, and the handover
/// pipe, of which only the child's end is inheritable, asked to buffer `handover_bytes` (Windows
/// takes the size as a suggestion).
setup_result<prepared_handles> prepare_inherited_handles(std::size_t handover_bytes);

/// Closes the launcher's own stdout and stderr once the child holds its duplicates, so the host
/// reads end of file on the program's output as soon as the program's tree is gone.
void release_standard_output();

}  // namespace psych::windows

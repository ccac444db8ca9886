#pragma once
// Starting the child: created suspended with exactly the handles of inherited_handles (the
// explicit handle list), the environment block, the workspace as its directory and no window; put
// in the job; only then resumed. Nothing of the program runs outside the job.
#include <cstdint>
#include <string>
#include <vector>

#include "platform/windows/command_line.hpp"
#include "setup_error.hpp"
#include "handles.hpp"
#include "job.hpp"

namespace psych::windows {

struct child_plan {
  std::string executable;          ///< launch.interpreter
  std::vector<std::string> arguments;  ///< after argv[0]
  std::wstring environment_block;  ///< environment.hpp
  std::string workspace;
};

struct started_child {
  unique_handle process;
  std::int64_t pid = 0;
};

setup_result<started_child> spawn_in_job(const child_plan& plan, const inherited_handles& handles,
                                         const execution_job& job);

}  // namespace psych::windows

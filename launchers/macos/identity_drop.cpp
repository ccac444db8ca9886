// The identity drop on macOS, which has neither setresuid nor getresuid: as root, setgid() and
// setuid() set the real, effective and saved ids together. The saved ids cannot be read back, so
// the drop is proven by trying to take root back, which must fail.
#include "identity.hpp"

#include <cerrno>
#include <vector>

#include <grp.h>
#include <unistd.h>

#include <fmt/format.h>

namespace psych::launcher {

setup_result<void> become(const identity_plan& plan) {
  if (!plan.drop) return success();
  // Groups first: setgroups needs the privilege the uid change gives up.
  if (::setgroups(0, nullptr) != 0) return fail(system_failure(launch_stage::identity, "setgroups", errno, "0, NULL"));
  if (::setgid(plan.gid) != 0) return fail(system_failure(launch_stage::identity, "setgid", errno, fmt::format("{}", plan.gid)));
  if (::setuid(plan.uid) != 0) return fail(system_failure(launch_stage::identity, "setuid", errno, fmt::format("{}", plan.uid)));
  // A saved uid or gid of 0 left behind would let these succeed.
  if (plan.uid != 0 && ::setuid(0) == 0)
    return fail(refusal(launch_stage::identity, "the identity drop did not stick: setuid(0) succeeded afterwards"));
  if (plan.gid != 0 && ::setgid(0) == 0)
    return fail(refusal(launch_stage::identity, "the identity drop did not stick: setgid(0) succeeded afterwards"));
  // BSD keeps the effective gid as the first supplementary group: at most that one may remain.
  std::vector<gid_t> groups(16);
  const int count = ::getgroups(static_cast<int>(groups.size()), groups.data());
  bool groups_ok = count >= 0;
  for (int i = 0; groups_ok && i < count; ++i) groups_ok = groups[static_cast<std::size_t>(i)] == plan.gid;
  if (::getuid() != plan.uid || ::geteuid() != plan.uid || ::getgid() != plan.gid || ::getegid() != plan.gid ||
      !groups_ok)
    return fail(refusal(launch_stage::identity, fmt::format("the identity drop did not stick: uid {}/{} gid {}/{} groups {}",
                                                ::getuid(), ::geteuid(), ::getgid(), ::getegid(), count)));
  return success();
}

}  // namespace psych::launcher

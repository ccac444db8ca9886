// The identity drop with the calls only Linux has (setresuid, getresuid): every id, saved ones
// included, is set and read back.
#include "identity.hpp"

#include <cerrno>

#include <grp.h>
#include <unistd.h>

#include <fmt/format.h>

namespace psych::launcher {

setup_result<void> become(const identity_plan& plan) {
  if (!plan.drop) return success();
  // Groups first: setgroups needs the privilege the uid change gives up.
  if (::setgroups(0, nullptr) != 0) return fail(system_failure(launch_stage::identity, "setgroups", errno, "0, NULL"));
  if (::setresgid(plan.gid, plan.gid, plan.gid) != 0)
    return fail(system_failure(launch_stage::identity, "setresgid", errno, fmt::format("{0}, {0}, {0}", plan.gid)));
  if (::setresuid(plan.uid, plan.uid, plan.uid) != 0)
    return fail(system_failure(launch_stage::identity, "setresuid", errno, fmt::format("{0}, {0}, {0}", plan.uid)));
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (::getresuid(&ruid, &euid, &suid) != 0) return fail(system_failure(launch_stage::identity, "getresuid", errno));
  if (::getresgid(&rgid, &egid, &sgid) != 0) return fail(system_failure(launch_stage::identity, "getresgid", errno));
  const int groups = ::getgroups(0, nullptr);
  if (ruid != plan.uid || euid != plan.uid || suid != plan.uid || rgid != plan.gid ||
      egid != plan.gid || sgid != plan.gid || groups != 0)
    return fail(refusal(launch_stage::identity, fmt::format("the identity drop did not stick: uid {}/{}/{} gid "
                                                "{}/{}/{} groups {}",
                                                ruid, euid, suid, rgid, egid, sgid, groups)));
  return success();
}

}  // namespace psych::launcher

#include "identity.hpp"

#include <cerrno>
#include <limits>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace psych::launcher {

setup_result<identity_plan> plan_identity(const std::optional<protocol::identity>& run_as,
                                          bool allow_same_uid) {
  const uid_t worker = ::getuid();
  if (!run_as) {
    if (!allow_same_uid)
      return fail(refusal(launch_stage::identity, fmt::format("run_as is null, so the child would keep the worker's "
                                                  "uid {}; refused unless allow_same_uid",
                                                  worker)));
    return identity_plan{.uid = worker, .gid = ::getgid(), .drop = false};
  }
  // (uid_t)-1 means "unchanged" to setresuid, so it can never be a target.
  constexpr std::int64_t id_max = std::numeric_limits<uid_t>::max() - 1;
  if (run_as->uid < 0 || run_as->uid > id_max || run_as->gid < 0 || run_as->gid > id_max)
    return fail(refusal(launch_stage::identity, fmt::format("run_as {}:{} is not a valid uid:gid", run_as->uid,
                                                run_as->gid)));
  const auto uid = static_cast<uid_t>(run_as->uid);
  const auto gid = static_cast<gid_t>(run_as->gid);
  // uid 0 keeps every capability and gid 0 keeps root's group files: neither is a drop.
  if ((uid == worker || uid == 0 || gid == 0) && !allow_same_uid)
    return fail(refusal(launch_stage::identity, fmt::format("run_as {}:{} is the worker's uid or root's; refused "
                                                "unless allow_same_uid",
                                                uid, gid)));
  return identity_plan{.uid = uid, .gid = gid, .drop = true};
}

setup_result<void> hand_over(const std::string& directory, const identity_plan& plan) {
  if (!plan.drop) return success();
  // O_NOFOLLOW: the host made these directories; a symlink in their place is not ours to chown.
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fail(system_failure(launch_stage::workspace, "open", errno, directory));
  const int rc = ::fchown(fd, plan.uid, plan.gid);
  const int saved = errno;
  ::close(fd);
  if (rc != 0)
    return fail(system_failure(launch_stage::workspace, "fchown", saved,
                               fmt::format("{}, {}, {}", directory, plan.uid, plan.gid)));
  return success();
}

}  // namespace psych::launcher

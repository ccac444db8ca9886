// Which of Linux's switches for user namespaces explains a failed ISOLATED launch
// (src/host/os/userns_settings): AppArmor's restriction (Ubuntu 23.10+), Debian's
// unprivileged_userns_clone and user.max_user_namespaces, each named only for the errno it gives
// and for the identity it refuses; the files read from a copy of /proc/sys's layout.
#include <doctest/doctest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "execution/session.hpp"
#include "os/userns_settings.hpp"
#include "temp_dir.hpp"

using namespace psych;
using namespace psych::host;

namespace {

constexpr std::string_view launcher = "/usr/local/libexec/psych/psych-launch-linux";

std::optional<std::string> cause(const userns_settings& settings, int error_number, bool root = false) {
  return userns_restriction(settings, {.error_number = error_number, .root = root, .launcher = launcher});
}

bool names(const std::optional<std::string>& message, std::string_view what) {
  return message && message->find(what) != std::string::npos;
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("userns: AppArmor's restriction is named, with the profile and the launcher it is for") {
  const userns_settings restricted{.apparmor_restrict_unprivileged_userns = "1\n"};
  SUBCASE("EPERM (a capability the namespace's profile denies) and EACCES (the namespace itself)") {
    for (int error_number : {EPERM, EACCES}) {
      CAPTURE(error_number);
      const auto message = cause(restricted, error_number);
      REQUIRE(message);
      CHECK(*message ==
            "user namespaces are restricted by AppArmor (kernel.apparmor_restrict_unprivileged_userns=1): install "
            "deploy/apparmor/psych-launch-linux for the launcher at /usr/local/libexec/psych/psych-launch-linux and "
            "load it with apparmor_parser -r (docs/deploy.md, \"AppArmor (Ubuntu 23.10+)\"), or run as root");
    }
  }
  SUBCASE("the launcher named is the one that ran") {
    const auto message = userns_restriction(restricted, {.error_number = EPERM, .root = false, .launcher = "/opt/p/l"});
    CHECK(names(message, "for the launcher at /opt/p/l and"));
  }
  SUBCASE("root holds CAP_SYS_ADMIN on the host, which the restriction does not take") {
    CHECK_FALSE(cause(restricted, EPERM, true));
  }
  SUBCASE("another errno is another cause") {
    CHECK_FALSE(cause(restricted, ENOMEM));
    CHECK_FALSE(cause(restricted, ENOSPC));
    CHECK_FALSE(cause(restricted, 0));
  }
}

TEST_CASE("userns: where the settings permit, or the kernel has none of them, nothing is said") {
  SUBCASE("absent files: a kernel without AppArmor's patch or Debian's") {
    CHECK_FALSE(cause({}, EPERM));
    CHECK_FALSE(cause({}, EACCES));
    CHECK_FALSE(cause({}, ENOSPC));
  }
  SUBCASE("each switch at its permitting value") {
    const userns_settings open{.apparmor_restrict_unprivileged_userns = "0\n",
                               .unprivileged_userns_clone = "1\n",
                               .max_user_namespaces = "63471\n"};
    for (int error_number : {EPERM, EACCES, ENOSPC}) {
      CAPTURE(error_number);
      CHECK_FALSE(cause(open, error_number));
    }
  }
  SUBCASE("text that is not a number is not taken for one") {
    CHECK_FALSE(cause({.apparmor_restrict_unprivileged_userns = ""}, EPERM));
    CHECK_FALSE(cause({.apparmor_restrict_unprivileged_userns = "yes\n"}, EPERM));
    CHECK_FALSE(cause({.unprivileged_userns_clone = "0x\n"}, EPERM));
    CHECK_FALSE(cause({.max_user_namespaces = "\n"}, ENOSPC));
  }
}

TEST_CASE("userns: Debian's unprivileged_userns_clone=0 refuses clone() itself with EPERM, to all but root") {
  const userns_settings off{.unprivileged_userns_clone = "0\n"};
  const auto message = cause(off, EPERM);
  CHECK(names(message, "user namespaces are disabled for users other than root (kernel.unprivileged_userns_clone=0)"));
  CHECK(names(message, "sysctl -w kernel.unprivileged_userns_clone=1"));
  CHECK_FALSE(names(message, "AppArmor"));
  CHECK_FALSE(cause(off, EPERM, true));
  CHECK_FALSE(cause(off, EACCES));
}

TEST_CASE("userns: user.max_user_namespaces=0 refuses every new namespace with ENOSPC, root's too") {
  const userns_settings none{.max_user_namespaces = "0\n"};
  for (bool root : {false, true}) {
    CAPTURE(root);
    CHECK(names(cause(none, ENOSPC, root), "user namespaces are disabled (user.max_user_namespaces=0)"));
  }
  CHECK_FALSE(cause(none, EPERM));
}

TEST_CASE("userns: each setting that explains the errno is named, in one sentence each") {
  const userns_settings both{.apparmor_restrict_unprivileged_userns = "1\n", .unprivileged_userns_clone = "0\n"};
  const auto message = cause(both, EPERM);
  REQUIRE(message);
  CHECK(names(message, "(kernel.unprivileged_userns_clone=0)"));
  CHECK(names(message, "; user namespaces are restricted by AppArmor"));
}

TEST_CASE("userns: the stages where a restriction shows are those that make or enter the namespaces") {
  using protocol::launch_stage;
  for (auto stage : {launch_stage::namespaces, launch_stage::identity, launch_stage::filesystem,
                     launch_stage::capabilities}) {
    CAPTURE(name_of(stage));
    CHECK(namespace_setup_stage(stage));
  }
  // An unprivileged worker's cgroup (EACCES on a hierarchy it may not write) is not a namespace's.
  for (auto stage : {launch_stage::cgroup, launch_stage::workspace, launch_stage::exec, launch_stage::seccomp,
                     launch_stage::landlock, launch_stage::launch}) {
    CAPTURE(name_of(stage));
    CHECK_FALSE(namespace_setup_stage(stage));
  }
}

TEST_CASE("userns: the settings are read from /proc/sys's layout, a missing file as none") {
  const psych::testing::temp_dir proc_sys("psych-userns");
  SUBCASE("none of the files") {
    const auto read = read_userns_settings(proc_sys.path());
    CHECK_FALSE(read.apparmor_restrict_unprivileged_userns);
    CHECK_FALSE(read.unprivileged_userns_clone);
    CHECK_FALSE(read.max_user_namespaces);
  }
  SUBCASE("all three, as the kernel writes them") {
    write(proc_sys.path() / "kernel/apparmor_restrict_unprivileged_userns", "1\n");
    write(proc_sys.path() / "kernel/unprivileged_userns_clone", "1\n");
    write(proc_sys.path() / "user/max_user_namespaces", "0\n");
    const auto read = read_userns_settings(proc_sys.path());
    CHECK(read.apparmor_restrict_unprivileged_userns == "1\n");
    CHECK(read.unprivileged_userns_clone == "1\n");
    CHECK(read.max_user_namespaces == "0\n");
    CHECK(names(cause(read, EPERM), "kernel.apparmor_restrict_unprivileged_userns=1"));
    CHECK(names(cause(read, ENOSPC), "user.max_user_namespaces=0"));
  }
  SUBCASE("this host's own: whatever it holds, each file read is the kernel's text") {
    const auto read = read_userns_settings();
    CHECK(read.max_user_namespaces.has_value() == std::filesystem::exists("/proc/sys/user/max_user_namespaces"));
    CHECK(read.apparmor_restrict_unprivileged_userns.has_value() ==
          std::filesystem::exists("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"));
  }
}

TEST_CASE("userns: a session keeps the launcher's error frame, stage and errno, beside the failure it words") {
  const psych::testing::temp_dir root("psych-userns-session");
  // A launcher that reads the launch and answers as one refused by AppArmor's restriction does.
  const auto launcher_path = root.path() / "refusing-launcher";
  write(launcher_path,
        "#!/bin/sh\n"
        "head -n 1 <&3 >/dev/null\n"
        "printf '%s\\n' '{\"type\":\"error\",\"stage\":\"namespaces\",\"syscall\":\"sethostname\",\"error_number\":1,"
        "\"message\":\"sethostname(psych): Operation not permitted\"}' >&3\n");
  std::filesystem::permissions(launcher_path, std::filesystem::perms::owner_all);
  host::session_plan plan;
  plan.launcher_path = launcher_path.string();
  plan.interpreter = "/usr/bin/python3";
  plan.attempt = isolation_level::isolated;
  plan.terms.isolation = isolation_level::isolated;
  plan.temp_root = root.path().string();
  plan.probe_only = true;
  const auto outcome = host::run_session(plan, {});
  REQUIRE(outcome.result.failure);
  CHECK(outcome.result.failure->kind == failure_kind::launch_failed);
  CHECK(outcome.result.failure->message ==
        "namespaces: sethostname(Operation not permitted): sethostname(psych): Operation not permitted");
  REQUIRE(outcome.launch_error);
  CHECK(outcome.launch_error->stage == protocol::launch_stage::namespaces);
  CHECK(outcome.launch_error->error_number == EPERM);
}

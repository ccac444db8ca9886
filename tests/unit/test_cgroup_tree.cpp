// Where a process's cgroups are, parsed from /proc text (platform/linux/cgroup_tree.hpp): the
// launcher and the host both start their walk from what this finds.
#include <doctest/doctest.h>

#include "platform/linux/cgroup_tree.hpp"

using namespace psych::platform::cgroup_tree;

namespace {

// A pure cgroup v2 host (Debian 13 as installed), and a v1 host with a hybrid v2 mount beside.
constexpr std::string_view unified_mountinfo =
    "25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "28 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";
constexpr std::string_view hybrid_mountinfo =
    "31 25 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
    "44 31 0:41 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "45 31 0:42 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n";

}  // namespace

TEST_CASE("cgroup tree: the own v2 cgroup on a unified host, with the mount point a walk stops at") {
  const auto seen = parse_view(unified_mountinfo, "0::/system.slice/psych-serve.service/psych-host\n");
  const auto own = own_cgroup(seen, "");
  REQUIRE(own);
  CHECK(own->directory == "/sys/fs/cgroup/system.slice/psych-serve.service/psych-host");
  CHECK(own->mount_point == "/sys/fs/cgroup");
  CHECK_FALSE(own_cgroup(seen, "memory"));  // no v1 hierarchy here
}

TEST_CASE("cgroup tree: the root cgroup is the mount point itself") {
  const auto own = own_cgroup(parse_view(unified_mountinfo, "0::/\n"), "");
  REQUIRE(own);
  CHECK(own->directory == "/sys/fs/cgroup");
}

TEST_CASE("cgroup tree: a hybrid host has v1 controllers by name and an empty v2 hierarchy") {
  const auto seen = parse_view(hybrid_mountinfo, "8:memory:/user.slice\n4:cpu,cpuacct:/user.slice\n0::/user.slice\n");
  CHECK(own_cgroup(seen, "memory")->directory == "/sys/fs/cgroup/memory/user.slice");
  CHECK(own_cgroup(seen, "cpuacct")->directory == "/sys/fs/cgroup/cpu,cpuacct/user.slice");
  CHECK(own_cgroup(seen, "")->directory == "/sys/fs/cgroup/unified/user.slice");
  CHECK_FALSE(own_cgroup(seen, "pids"));
}

TEST_CASE("cgroup tree: a namespace or bind mount shows a subtree; a cgroup outside it is not shown") {
  constexpr std::string_view container_mount =
      "28 25 0:26 /machine.slice/libpod-1.scope /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  CHECK(own_cgroup(parse_view(container_mount, "0::/machine.slice/libpod-1.scope/psych-host\n"), "")->directory ==
        "/sys/fs/cgroup/psych-host");
  CHECK_FALSE(own_cgroup(parse_view(container_mount, "0::/machine.slice/libpod-10.scope\n"), ""));
}

TEST_CASE("cgroup tree: escaped characters in mountinfo, colons in a cgroup path") {
  const auto seen = parse_view("28 25 0:26 / /sys/fs/cgroup\\040v2 rw - cgroup2 cgroup2 rw\n", "0::/a:b/c\n");
  CHECK(own_cgroup(seen, "")->directory == "/sys/fs/cgroup v2/a:b/c");
  CHECK_FALSE(parse_mount("not a mount line"));
  CHECK_FALSE(parse_membership("no colons"));
}

TEST_CASE("cgroup tree: controller lists") {
  CHECK(has_item("cpuset cpu io memory pids\n", "pids", ' '));
  CHECK_FALSE(has_item("memory pids", "cpu", ' '));
  CHECK_FALSE(has_item("", "memory", ' '));
}

#include "process_confinement.hpp"

#include <iterator>
#include <utility>

#include "mount_root.hpp"

namespace psych::launcher {

namespace {

/// What the C library's resolver and TLS clients read; only with a network grant, which is
/// useless without them. A symlink (a systemd stub resolv.conf) is followed: the rule binds its target.
constexpr const char* resolver_files[] = {"/etc/hosts",    "/etc/resolv.conf", "/etc/nsswitch.conf",
                                          "/etc/host.conf", "/etc/gai.conf",   "/etc/services",
                                          "/etc/protocols", "/etc/ssl"};

}  // namespace

landlock_paths process_landlock_paths(const protocol::launch_frame& launch, bool inside_container) {
  // The same read-only set the ISOLATED root binds: the interpreter's prefix, the library
  // directories and /etc/ld.so.cache. Nothing else of /etc, no home, no /tmp of the host.
  const root_plan interpreter_only{.interpreter = launch.interpreter};
  std::vector<std::string> read_only{"/proc"};
  if (launch.network == network_access::unrestricted)
    read_only.insert(read_only.end(), std::begin(resolver_files), std::end(resolver_files));
  if (inside_container) read_only.emplace_back("/sys/fs/cgroup");
  return landlock_paths{
      .read_execute = read_only_binds(interpreter_only),
      // In a container /tmp is the container's own tmpfs (container_starter.cpp), as at ISOLATED.
      .read_write = inside_container ? std::vector<std::string>{launch.workspace, launch.tmp_dir, "/tmp"}
                                     : std::vector<std::string>{launch.workspace, launch.tmp_dir},
      .devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"},
      // The bootstrap observes itself through /proc/self (status, limits, namespaces) and
      // CPython's subprocess lists /proc/self/fd. Landlock cannot name "this process's own entry":
      // a rule binds an inode, and procfs makes a new inode for /proc/<pid> whenever its dentry
      // is evicted. So /proc is readable as a whole; another uid's sensitive entries (fd, cwd,
      // environ, mem) stay behind the kernel's ptrace access check.
      .read_only = std::move(read_only),
      // Nothing is listed through "/": path lookup is not a Landlock right, so the interpreter
      // reaches its prefix without it, and the host's directory names stay unlisted.
      .list_only = inside_container ? std::vector<std::string>{"/"} : std::vector<std::string>{},
      .network = launch.network,
      .egress_port = launch.network == network_access::allowlist ? static_cast<std::uint16_t>(launch.egress_proxy_port)
                                                                 : std::uint16_t{0}};
}

}  // namespace psych::launcher

#include "psych/host/cgroup_leaf.hpp"

#ifdef __linux__
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "os/kernel_text.hpp"
#include "platform/linux/cgroup_tree.hpp"
#endif

namespace psych::host {

#ifdef __linux__
namespace {

namespace tree = platform::cgroup_tree;

constexpr std::string_view leaf_name = "psych-host";
constexpr std::string_view handed_down[] = {"memory", "pids"};

/// 0, or the errno of the failed write (a cgroup file takes one write of the whole value).
int write_text(const std::string& path, std::string_view value) {
  std::FILE* file = std::fopen(path.c_str(), "we");
  if (file == nullptr) return errno;
  const bool written = std::fwrite(value.data(), 1, value.size(), file) == value.size();
  int error = written ? 0 : errno;
  if (std::fclose(file) != 0 && error == 0) error = errno;
  return error;
}

}  // namespace

cgroup_settlement settle_in_cgroup_leaf() {
  cgroup_settlement out;
  const auto own_cgroups = read_kernel_text("/proc/self/cgroup");
  const auto mountinfo = read_kernel_text("/proc/self/mountinfo");
  if (!own_cgroups || !mountinfo) return out;
  const auto own = tree::own_cgroup(tree::parse_view(*mountinfo, *own_cgroups), "");
  if (!own) return out;  // no cgroup v2 hierarchy shows this process: nothing to settle
  const auto& cgroup = own->directory;
  // Settled already (psych serve's main hands over to psych-remote by exec, which asks again).
  if (cgroup.ends_with("/" + std::string(leaf_name))) return out;
  const auto enabled = read_kernel_text(cgroup + "/cgroup.subtree_control");
  const auto offered = read_kernel_text(cgroup + "/cgroup.controllers");
  if (!enabled || !offered) return out;
  std::string missing;
  for (const auto controller : handed_down) {
    if (tree::has_item(*enabled, controller, ' ')) continue;
    if (!tree::has_item(*offered, controller, ' ')) {
      out.why_not = fmt::format("the {} controller is not delegated to {}", controller, cgroup);
      return out;
    }
    missing += fmt::format("{}+{}", missing.empty() ? "" : " ", controller);
  }
  if (missing.empty()) return out;
  const auto members = tree::pieces(read_kernel_text(cgroup + "/cgroup.procs").value_or(""), '\n');
  const auto self = std::to_string(::getpid());
  if (members.size() != 1 || members.front() != self) {
    out.why_not = fmt::format("{} holds other processes than this one ({}): they are not psych's to move", cgroup,
                              members.size());
    return out;
  }
  if (::access(cgroup.c_str(), W_OK) != 0) {
    out.why_not = fmt::format("{} is not writable by uid {}", cgroup, ::geteuid());
    return out;
  }
  const auto leaf = cgroup + "/" + std::string(leaf_name);
  if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
    out.why_not = fmt::format("mkdir {}: {}", leaf, std::strerror(errno));
    return out;
  }
  if (const int error = write_text(leaf + "/cgroup.procs", self); error != 0) {
    out.why_not = fmt::format("moving into {}: {}", leaf, std::strerror(error));
    return out;
  }
  if (const int error = write_text(cgroup + "/cgroup.subtree_control", missing); error != 0) {
    // Nothing gained: back where it was, and the leaf gone.
    (void)write_text(cgroup + "/cgroup.procs", self);
    ::rmdir(leaf.c_str());
    out.why_not = fmt::format("enabling {} in {}: {}", missing, cgroup, std::strerror(error));
    return out;
  }
  out.moved = true;
  out.leaf = leaf;
  return out;
}
#else
cgroup_settlement settle_in_cgroup_leaf() { return {}; }
#endif

}  // namespace psych::host

#include "os/userns_settings.hpp"

#include <cerrno>
#include <charconv>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "os/kernel_text.hpp"

namespace psych::host {
namespace {

/// The number a sysctl file holds ("1\n"); nullopt when it is absent or holds anything else.
std::optional<long long> value_of(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  std::string_view digits(*text);
  while (!digits.empty() && (digits.back() == '\n' || digits.back() == ' ' || digits.back() == '\t'))
    digits.remove_suffix(1);
  long long value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc{} || end != digits.data() + digits.size() || digits.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::string> userns_restriction(const userns_settings& settings, const userns_failure& failure) {
  const int e = failure.error_number;
  std::vector<std::string> causes;
  if (value_of(settings.max_user_namespaces) == 0 && e == ENOSPC)
    causes.push_back("user namespaces are disabled (user.max_user_namespaces=0): raise it (sysctl -w "
                     "user.max_user_namespaces=N, N above 0, and the same in /etc/sysctl.d/ to keep it)");
  if (!failure.root && value_of(settings.unprivileged_userns_clone) == 0 && e == EPERM)
    causes.push_back("user namespaces are disabled for users other than root "
                     "(kernel.unprivileged_userns_clone=0): set it to 1 (sysctl -w "
                     "kernel.unprivileged_userns_clone=1, and the same in /etc/sysctl.d/ to keep it), "
                     "or run as root");
  const auto apparmor = value_of(settings.apparmor_restrict_unprivileged_userns).value_or(0);
  if (!failure.root && apparmor != 0 && (e == EPERM || e == EACCES))
    causes.push_back(fmt::format(
        "user namespaces are restricted by AppArmor (kernel.apparmor_restrict_unprivileged_userns={}): "
        "install deploy/apparmor/psych-launch-linux for the launcher at {} and load it with apparmor_parser -r "
        "(docs/deploy.md, \"AppArmor (Ubuntu 23.10+)\"), or run as root",
        apparmor, failure.launcher));
  if (causes.empty()) return std::nullopt;
  return fmt::format("{}", fmt::join(causes, "; "));
}

bool namespace_setup_stage(protocol::launch_stage stage) {
  using protocol::launch_stage;
  // clone() and the maps; becoming the namespace's root; its mounts and pivot_root; dropping the
  // capabilities it gave. Each asks the kernel for a capability in the new namespace.
  return stage == launch_stage::namespaces || stage == launch_stage::identity || stage == launch_stage::filesystem ||
         stage == launch_stage::capabilities;
}

userns_settings read_userns_settings(const std::filesystem::path& proc_sys) {
  return {.apparmor_restrict_unprivileged_userns = read_kernel_text(proc_sys / "kernel/apparmor_restrict_unprivileged_userns"),
          .unprivileged_userns_clone = read_kernel_text(proc_sys / "kernel/unprivileged_userns_clone"),
          .max_user_namespaces = read_kernel_text(proc_sys / "user/max_user_namespaces")};
}

}  // namespace psych::host

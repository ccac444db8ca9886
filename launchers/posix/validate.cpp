#include "validate.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>

#include <fcntl.h>

#include <fmt/format.h>

#include "psych/failure_decision.hpp"  // interpreter_start_bytes
#include "psych/limits.hpp"
#include "psych/protocol/launch_checks.hpp"

namespace psych::launcher {

namespace {

bool absolute_path(const std::string& path) {
  return !path.empty() && path.front() == '/' && path.find('\0') == std::string::npos;
}

}  // namespace

setup_result<void> validate_launch(const protocol::launch_frame& launch, isolation_level reachable,
                                   bool network_of_its_own) {
  if (launch.version != protocol::contract_version)
    return fail(refusal(launch_stage::launch, fmt::format("contract version {} is not the launcher's {}", launch.version,
                                              protocol::contract_version)));
  if (launch.isolation > reachable)
    return fail(refusal(launch_stage::isolation, fmt::format("isolation={} is beyond this launcher, which reaches {}",
                                                 name_of(launch.isolation), name_of(reachable))));
  if (launch.isolation == isolation_level::isolated && launch.network == network_access::unrestricted)
    return fail(refusal(launch_stage::isolation, "isolation=isolated with a network grant is not offered: the sandbox's "
                                     "network namespace holds only a downed loopback (network_not_offered)"));
  if (launch.network == network_access::allowlist) {
    if (launch.isolation != isolation_level::isolated && !network_of_its_own)
      return fail(refusal(launch_stage::isolation, "network=allowlist is offered at isolation=isolated only: at the "
                                                   "process level the program shares the host's network"));
    if (launch.prepared)
      return fail(refusal(launch_stage::launch, "a prepared launch carries no network=allowlist"));
    if (launch.egress_proxy_port <= 0 || launch.egress_proxy_port > 65535)
      return fail(refusal(launch_stage::launch, fmt::format("egress_proxy_port {} is not a port", launch.egress_proxy_port)));
    if (::fcntl(protocol::egress_handover_fd, F_GETFD) < 0)
      return fail(system_failure(launch_stage::fds, "fcntl", errno,
                                 fmt::format("{}, F_GETFD: network=allowlist needs its handover socket",
                                             protocol::egress_handover_fd)));
  }
  for (const auto& refused : {protocol::check_token(launch.token), protocol::check_limits(launch.limits, {62})})
    if (refused) return fail(refusal(refused->stage, refused->message));
  if (launch.open_files <= 0 || launch.open_files > (std::int64_t{1} << 30))
    return fail(refusal(launch_stage::limits, "open_files must be a positive count"));

  for (const auto& [name, path] : {std::pair{"interpreter", &launch.interpreter},
                                   std::pair{"workspace", &launch.workspace},
                                   std::pair{"tmp_dir", &launch.tmp_dir}, std::pair{"canary", &launch.canary}})
    if (!absolute_path(*path))
      return fail(refusal(launch_stage::launch, fmt::format("{} must be an absolute path, not {:?}", name, *path)));
  for (const auto port : {launch.probe.ipv4_port, launch.probe.ipv6_port})
    if (port < 0 || port > 65535) return fail(refusal(launch_stage::launch, fmt::format("probe port {} is not a port", port)));
  return success();
}

setup_result<void> validate_narrowing(const sandbox_limits& narrowed, const sandbox_limits& launched) {
  if (auto valid = validate_limits(narrowed); !valid) return fail(from_error(launch_stage::narrow, valid.error()));
  auto capped = narrowed;
  narrow(capped, launched);
  if (!(capped == narrowed))
    return fail(refusal(launch_stage::narrow, "a narrowing may only lower limits, and one of these is above the launch's"));
  // The prepared interpreter already holds what starting took; below that, a program that
  // allocated nothing would seem to run within a limit it is already past.
  if (narrowed.address_space_bytes.value < interpreter_start_bytes)
    return fail(refusal(launch_stage::narrow,
                        fmt::format("a memory limit of {} bytes is below what the interpreter running here already "
                                    "holds (about {} MiB)",
                                    narrowed.address_space_bytes.value, interpreter_start_bytes >> 20)));
  return success();
}

}  // namespace psych::launcher

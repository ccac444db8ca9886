#include "validate.hpp"

#include <cctype>

#include <fmt/format.h>

#include "psych/protocol/launch_checks.hpp"

namespace psych::windows {

namespace {

// 2^46 bytes: what 64-bit Windows' user address space can hold, far inside the job's SIZE_T fields.
constexpr protocol::byte_ceiling windows_bytes{46};

/// "C:\dir" (or "C:/dir"), or a UNC or device path "\\server\share", "\\?\C:\dir".
bool absolute_windows_path(const std::string& path) {
  if (path.find('\0') != std::string::npos) return false;
  const bool drive = path.size() >= 3 && std::isalpha(static_cast<unsigned char>(path[0])) != 0 && path[1] == ':' &&
                     (path[2] == '\\' || path[2] == '/');
  return drive || path.starts_with("\\\\");
}

}  // namespace

setup_result<void> validate_launch(const protocol::launch_frame& launch) {
  if (launch.version != protocol::contract_version)
    return fail(refusal(launch_stage::launch, fmt::format("contract version {} is not the launcher's {}", launch.version,
                                              protocol::contract_version)));
  if (launch.isolation != isolation_level::process)
    return fail(refusal(launch_stage::isolation, "the Windows launcher reaches isolation=process only: a Job Object contains "
                                     "the tree and its limits, but nothing gives the child a boundary of its own"));
  if (launch.prepared)
    return fail(refusal(launch_stage::launch, "prepared launches are not offered by the Windows launcher"));
  if (launch.run_as)
    return fail(refusal(launch_stage::identity, "the Windows launcher runs the child as the worker's own account; run_as "
                                    "must be null"));
  if (!launch.allow_same_uid)
    return fail(refusal(launch_stage::identity, "the child would run as the worker's own account, which the launch does not "
                                    "allow (allow_same_uid)"));
  for (const auto& refused : {protocol::check_token(launch.token), protocol::check_limits(launch.limits, windows_bytes)})
    if (refused) return fail(refusal(refused->stage, refused->message));

  for (const auto& [name, path] : {std::pair{"interpreter", &launch.interpreter},
                                   std::pair{"workspace", &launch.workspace}, std::pair{"tmp_dir", &launch.tmp_dir},
                                   std::pair{"canary", &launch.canary}})
    if (!absolute_windows_path(*path))
      return fail(refusal(launch_stage::launch, fmt::format("{} must be an absolute Windows path, not {:?}", name, *path)));
  if (launch.interpreter.find('"') != std::string::npos)
    return fail(refusal(launch_stage::launch, "the interpreter's path cannot hold a quote on Windows"));
  for (const auto port : {launch.probe.ipv4_port, launch.probe.ipv6_port})
    if (port < 0 || port > 65535) return fail(refusal(launch_stage::launch, fmt::format("probe port {} is not a port", port)));
  return success();
}

}  // namespace psych::windows

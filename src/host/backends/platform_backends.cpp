#include "backends/platform_backends.hpp"

#include <fmt/format.h>

namespace psych::host {

std::vector<backend_info> other_platforms_backends() {
  const std::string_view here = host_platform().empty() ? std::string_view("not a platform psych has a launcher for")
                                                          : host_platform();
  std::vector<backend_info> rows;
  for (const auto& kind : local_backend_kinds) {
    if (kind.platform == host_platform()) continue;
    rows.push_back({.name = std::string(kind.name),
                    .isolation = kind.isolation,
                    .available = false,
                    .reason = fmt::format("this host is {}; {} runs only on {}", here, kind.launcher, kind.platform)});
  }
  return rows;
}

}  // namespace psych::host

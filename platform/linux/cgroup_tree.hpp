#pragma once
// Where a process's cgroups are, from the text of /proc/self/mountinfo and /proc/self/cgroup.
// Pure parsing, shared by the launcher (which makes each execution's cgroup) and the host (which
// may settle itself in a leaf of its cgroup v2 subtree, so that the subtree can hand controllers
// down to the executions beside it: docs/cgroups.md).
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace psych::platform::cgroup_tree {

inline std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\n");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
}

/// The non-empty pieces of `text` between separators.
inline std::vector<std::string_view> pieces(std::string_view text, char separator) {
  std::vector<std::string_view> result;
  while (!text.empty()) {
    const auto end = text.find(separator);
    if (end != 0) result.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return result;
}

inline bool has_item(std::string_view list, std::string_view item, char separator) {
  const auto items = pieces(trimmed(list), separator);
  return std::find(items.begin(), items.end(), item) != items.end();
}

/// mountinfo writes a space, tab, newline or backslash in a path as \ooo.
inline std::string unescaped(std::string_view field) {
  const auto octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string result;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && octal(field[i + 1]) && octal(field[i + 2]) &&
        octal(field[i + 3])) {
      result.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0')));
      i += 3;
    } else {
      result.push_back(field[i]);
    }
  }
  return result;
}

struct cgroup_mount {
  bool version2 = false;
  std::string root;     ///< the cgroup the mount shows at its mount point (a bind or a namespace may show a subtree)
  std::string point;
  std::string options;  ///< super options: a v1 mount names its controllers there
};

struct membership {
  bool version2 = false;  ///< hierarchy id 0
  std::string controllers;
  std::string path;
};

struct view {
  std::vector<cgroup_mount> mounts;
  std::vector<membership> memberships;
};

/// "id parent major:minor root mount_point options [optional fields] - type source super_options"
inline std::optional<cgroup_mount> parse_mount(std::string_view line) {
  const auto fields = pieces(line, ' ');
  const auto dash = std::find(fields.begin(), fields.end(), std::string_view("-"));
  if (dash - fields.begin() < 6 || fields.end() - dash < 4) return std::nullopt;
  if (dash[1] != "cgroup" && dash[1] != "cgroup2") return std::nullopt;
  return cgroup_mount{dash[1] == "cgroup2", unescaped(fields[3]), unescaped(fields[4]), std::string(dash[3])};
}

/// "id:controllers:path"; the path may itself hold colons.
inline std::optional<membership> parse_membership(std::string_view line) {
  const auto first = line.find(':');
  const auto second = line.find(':', first == std::string_view::npos ? first : first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  return membership{line.substr(0, first) == "0", std::string(line.substr(first + 1, second - first - 1)),
                    std::string(line.substr(second + 1))};
}

inline view parse_view(std::string_view mountinfo, std::string_view own_cgroups) {
  view parsed;
  for (const auto line : pieces(mountinfo, '\n'))
    if (auto mount = parse_mount(line)) parsed.mounts.push_back(std::move(*mount));
  for (const auto line : pieces(own_cgroups, '\n'))
    if (auto member = parse_membership(line)) parsed.memberships.push_back(std::move(*member));
  return parsed;
}

/// `path` (a cgroup as /proc/self/cgroup names it) as a directory under `mount`, if the mount shows it.
inline std::optional<std::string> under_mount(const cgroup_mount& mount, std::string_view path) {
  const std::string_view root = mount.root == "/" ? std::string_view{} : std::string_view(mount.root);
  if (path.substr(0, root.size()) != root) return std::nullopt;
  const auto rest = path.substr(root.size());
  if (!rest.empty() && rest.front() != '/') return std::nullopt;  // "/ab" is not inside "/a"
  return rest == "/" ? mount.point : mount.point + std::string(rest);
}

/// A cgroup as a host directory, and the mount point that shows it (the highest directory a walk
/// upwards may reach).
struct located {
  std::string directory;
  std::string mount_point;
};

/// The process's own cgroup: in the v1 hierarchy that holds `controller`, or in the v2 hierarchy
/// when `controller` is empty. nullopt when no mount shows it.
inline std::optional<located> own_cgroup(const view& seen, std::string_view controller) {
  const bool v2 = controller.empty();
  const auto holds = [&](bool version2, std::string_view controllers) {
    return version2 == v2 && (v2 || has_item(controllers, controller, ','));
  };
  for (const auto& member : seen.memberships) {
    if (!holds(member.version2, member.controllers)) continue;
    for (const auto& mount : seen.mounts)
      if (holds(mount.version2, mount.options))
        if (auto directory = under_mount(mount, member.path)) return located{std::move(*directory), mount.point};
  }
  return std::nullopt;
}

}  // namespace psych::platform::cgroup_tree

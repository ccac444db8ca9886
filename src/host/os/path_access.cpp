#include "os/path_access.hpp"

#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace psych::host {
namespace {

bool holds_group(const accessor& who, std::int64_t gid) {
  return std::find(who.gids.begin(), who.gids.end(), gid) != who.gids.end();
}

/// The mode alone: owner, group or other, the first class that matches (the kernel never
/// falls through to a more generous class).
unsigned mode_bits(const file_facts& file, const accessor& who) {
  if (who.uid == file.owner) return (file.mode >> 6) & 7u;
  if (holds_group(who, file.group)) return (file.mode >> 3) & 7u;
  return file.mode & 7u;
}

/// POSIX.1e: owner, named user (masked), then the group class (masked; any matching group
/// entry that grants suffices, a match that grants nothing denies), then other.
unsigned acl_bits(const file_facts& file, const accessor& who) {
  unsigned mask = 7u;
  for (const auto& e : file.acl)
    if (e.tag == acl_entry::mask) mask = e.perm & 7u;
  const auto entry_bits = [&](acl_entry::tag_kind tag) -> std::optional<unsigned> {
    for (const auto& e : file.acl)
      if (e.tag == tag) return e.perm & 7u;
    return std::nullopt;
  };
  if (who.uid == file.owner) return entry_bits(acl_entry::user_obj).value_or((file.mode >> 6) & 7u);
  for (const auto& e : file.acl)
    if (e.tag == acl_entry::user && e.id == who.uid) return e.perm & mask;
  bool group_matched = false;
  unsigned group_union = 0;
  for (const auto& e : file.acl) {
    const bool matches = (e.tag == acl_entry::group_obj && holds_group(who, file.group)) ||
                         (e.tag == acl_entry::group && holds_group(who, e.id));
    if (!matches) continue;
    group_matched = true;
    group_union |= e.perm & mask;
  }
  // What the class holds together, for the message; whether a request is granted is decided
  // per entry (acl_group_grants), as the kernel does.
  if (group_matched) return group_union;
  return entry_bits(acl_entry::other).value_or(file.mode & 7u);
}

std::string describe_bits(unsigned bits) {
  std::string text;
  text += bits & may_read ? 'r' : '-';
  text += bits & may_write ? 'w' : '-';
  text += bits & may_execute ? 'x' : '-';
  return text;
}

std::string needed_words(const access_step& step) {
  if (!step.facts.directory) return "execute";
  if (step.needs & may_read) return "list and search";
  return "search";
}

/// Whether one matching group-class entry grants all of `needs` (the kernel's rule), rather
/// than the union of several.
bool acl_group_grants(const file_facts& file, const accessor& who, unsigned needs) {
  unsigned mask = 7u;
  for (const auto& e : file.acl)
    if (e.tag == acl_entry::mask) mask = e.perm & 7u;
  for (const auto& e : file.acl) {
    const bool matches = (e.tag == acl_entry::group_obj && holds_group(who, file.group)) ||
                         (e.tag == acl_entry::group && holds_group(who, e.id));
    if (matches && (e.perm & mask & needs) == needs) return true;
  }
  return false;
}

bool allowed(const file_facts& file, const accessor& who, unsigned needs) {
  const unsigned bits = granted_bits(file, who);
  if ((bits & needs) != needs) return false;
  if (file.acl.empty() || who.uid == file.owner) return true;
  for (const auto& e : file.acl)
    if (e.tag == acl_entry::user && e.id == who.uid) return true;
  const bool in_group_class =
      std::any_of(file.acl.begin(), file.acl.end(), [&](const acl_entry& e) {
        return (e.tag == acl_entry::group_obj && holds_group(who, file.group)) ||
               (e.tag == acl_entry::group && holds_group(who, e.id));
      });
  return !in_group_class || acl_group_grants(file, who, needs);
}

}  // namespace

unsigned granted_bits(const file_facts& file, const accessor& who) {
  return file.acl.empty() ? mode_bits(file, who) : acl_bits(file, who);
}

std::optional<std::string> first_denial(const std::vector<access_step>& steps, const accessor& who) {
  for (const auto& step : steps) {
    if (allowed(step.facts, who, step.needs)) continue;
    const auto& f = step.facts;
    return fmt::format("{} is mode {:04o}, owner {}, group {}{}, which gives uid {} {} where it needs to {} it",
                       f.path, f.mode & 07777u, f.owner, f.group, f.acl.empty() ? "" : ", with an ACL", who.uid,
                       describe_bits(granted_bits(f, who)), needed_words(step));
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, unsigned>> interpreter_needs(const std::string& binary,
                                                                const std::vector<std::string>& stdlib_dirs) {
  std::vector<std::pair<std::string, unsigned>> needs;
  const auto add = [&](const std::string& path, unsigned bits) {
    for (auto& [known, known_bits] : needs)
      if (known == path) {
        known_bits |= bits;
        return;
      }
    needs.emplace_back(path, bits);
  };
  const auto add_parents = [&](const std::filesystem::path& path) {
    std::filesystem::path walked;
    for (auto it = path.begin(); it != path.end(); ++it) {
      if (std::next(it) == path.end()) break;
      walked /= *it;
      add(walked.string(), may_execute);
    }
  };
  add_parents(binary);
  add(binary, may_execute);
  for (const auto& dir : stdlib_dirs) {
    add_parents(dir);
    add(dir, may_read | may_execute);
  }
  return needs;
}

facts_or_error read_file_facts(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {std::nullopt, fmt::format("{}: {}", path, std::strerror(errno))};
  file_facts facts{.path = path,
                   .directory = S_ISDIR(st.st_mode),
                   .mode = st.st_mode & 07777u,
                   .owner = static_cast<std::int64_t>(st.st_uid),
                   .group = static_cast<std::int64_t>(st.st_gid),
                   .acl = {}};
  // The kernel's xattr form: a 4-byte version (2), then 8-byte entries {tag, perm, id}, little-endian.
  std::array<unsigned char, 4 + 8 * 64> raw{};
  const ssize_t n = ::lgetxattr(path.c_str(), "system.posix_acl_access", raw.data(), raw.size());
  if (n < 0) {
    if (errno == ENODATA || errno == ENOTSUP) return {facts, {}};
    return {std::nullopt, fmt::format("{}: reading its ACL: {}", path, std::strerror(errno))};
  }
  const auto u16 = [&](std::size_t at) { return static_cast<std::uint16_t>(raw[at] | raw[at + 1] << 8); };
  const auto u32 = [&](std::size_t at) {
    return static_cast<std::uint32_t>(raw[at] | raw[at + 1] << 8 | raw[at + 2] << 16 |
                                      static_cast<std::uint32_t>(raw[at + 3]) << 24);
  };
  if (n < 4 || (n - 4) % 8 != 0 || u32(0) != 2)
    return {std::nullopt, fmt::format("{}: an ACL this check does not understand", path)};
  for (std::size_t at = 4; at + 8 <= static_cast<std::size_t>(n); at += 8)
    facts.acl.push_back({.tag = u16(at), .perm = u16(at + 2), .id = u32(at + 4)});
  return {facts, {}};
}

std::optional<std::string> interpreter_obstacle(const std::string& binary, const std::vector<std::string>& stdlib_dirs,
                                                const accessor& who) {
  std::vector<access_step> steps;
  for (const auto& [path, bits] : interpreter_needs(binary, stdlib_dirs)) {
    auto read = read_file_facts(path);
    if (!read.facts) return "cannot examine " + read.error;
    steps.push_back({std::move(*read.facts), bits});
  }
  return first_denial(steps, who);
}

}  // namespace psych::host

#pragma once
// Whether another identity can reach a path, decided from what stat() and the POSIX ACL say,
// never by switching this process's uid: the worker is root, and the question is what the
// sandbox's uid can do. The decision is pure (facts in, verdict out); reading the facts off
// the filesystem is a separate step.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace psych::host {

/// Permission bits, as in a mode's rwx triple.
inline constexpr unsigned may_read = 4, may_write = 2, may_execute = 1;

/// One entry of a POSIX access ACL (the kernel's system.posix_acl_access layout).
struct acl_entry {
  enum tag_kind : std::uint16_t { user_obj = 0x01, user = 0x02, group_obj = 0x04, group = 0x08, mask = 0x10,
                                  other = 0x20 };
  std::uint16_t tag = other;
  std::uint16_t perm = 0;  ///< rwx bits
  std::uint32_t id = 0;    ///< user and group entries only
};

/// What the decision needs to know about one file or directory.
struct file_facts {
  std::string path;
  bool directory = false;
  std::uint32_t mode = 0;  ///< permission bits (07777)
  std::int64_t owner = 0;
  std::int64_t group = 0;
  std::vector<acl_entry> acl;  ///< empty: no ACL, the mode alone decides
};

/// Who is asking: a uid and every group it holds (the sandbox's child holds exactly one).
struct accessor {
  std::int64_t uid = 0;
  std::vector<std::int64_t> gids;
};

/// The rwx bits `who` holds on the file, by the kernel's rule: the owner class if it owns it,
/// else a named-user ACL entry, else the group class (any matching group that grants), else
/// other; ACL entries of the group class are limited by the mask. Never uid 0's override.
unsigned granted_bits(const file_facts& file, const accessor& who);

/// One path the interpreter's start needs, and what it needs there.
struct access_step {
  file_facts facts;
  unsigned needs = may_execute;  ///< directories: search (x), listing (r); the binary: execute
};

/// The first step `who` is refused, as a sentence: "/root is mode 0700, owner 0, group 0".
/// nullopt: every step is allowed.
std::optional<std::string> first_denial(const std::vector<access_step>& steps, const accessor& who);

/// The paths and needs to run the interpreter `binary` (absolute, canonical) whose standard
/// library lives in `stdlib_dirs` (absolute, canonical): every directory above each of them
/// searchable, the binary executable, each stdlib directory searchable and listable (the
/// import system lists it). In walking order, each path once.
std::vector<std::pair<std::string, unsigned>> interpreter_needs(const std::string& binary,
                                                                const std::vector<std::string>& stdlib_dirs);

/// Reads the facts of `path` (lstat and its access ACL). An error says why it could not.
struct facts_or_error {
  std::optional<file_facts> facts;
  std::string error;
};
facts_or_error read_file_facts(const std::string& path);

/// interpreter_needs, read and decided: the first obstacle for `who`, or nullopt.
std::optional<std::string> interpreter_obstacle(const std::string& binary, const std::vector<std::string>& stdlib_dirs,
                                                const accessor& who);

}  // namespace psych::host

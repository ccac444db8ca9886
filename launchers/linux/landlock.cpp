#include "landlock.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

// What an older <linux/landlock.h> may lack. The values are the kernel's UAPI and never change.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  // ABI 3
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)  // ABI 5
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)  // ABI 4
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)  // ABI 4
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)  // ABI 6
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)  // ABI 6
#endif
// The system calls have the same numbers on every architecture but alpha.
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

namespace psych::launcher {

namespace {

constexpr auto landlock_stage = launch_stage::landlock;

/// The newest ABI this file knows: ABI 7 added audit logging flags, no access right.
constexpr int newest_known_abi = 7;

/// struct landlock_ruleset_attr as of ABI 6; an older header stops after handled_access_fs.
/// The kernel is given only the prefix its ABI knows (ABI 1-3: 8 bytes, 4-5: 16, 6 on: 24).
struct psych_landlock_ruleset_attr {
  std::uint64_t handled_access_fs = 0;
  std::uint64_t handled_access_net = 0;
  std::uint64_t scoped = 0;
};

/// struct landlock_net_port_attr (ABI 4), which an older header lacks; packed, as the kernel's.
struct __attribute__((packed)) psych_landlock_net_port_attr {
  std::uint64_t allowed_access = 0;
  std::uint64_t port = 0;
};
constexpr int psych_landlock_rule_net_port = 2;  // LANDLOCK_RULE_NET_PORT

constexpr std::uint64_t fs_rights_abi1 =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
    LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
    LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
    LANDLOCK_ACCESS_FS_MAKE_SYM;

/// The rights a rule on a file (not a directory) may carry; the kernel refuses any other (EINVAL).
constexpr std::uint64_t file_rights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                      LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                                      LANDLOCK_ACCESS_FS_IOCTL_DEV;

std::uint64_t handled_fs(int abi) {
  std::uint64_t rights = fs_rights_abi1;
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return rights;
}

std::size_t attr_size(int abi) {
  if (abi >= 6) return sizeof(psych_landlock_ruleset_attr);
  if (abi >= 4) return offsetof(psych_landlock_ruleset_attr, scoped);
  return offsetof(psych_landlock_ruleset_attr, handled_access_net);
}

/// The rights of one category, before they are narrowed to what the ABI handles.
struct category {
  const std::vector<std::string>* paths;
  std::uint64_t rights;
};

/// Adds the rule for one path. false: the path does not exist.
setup_result<bool> add_path_rule(int ruleset_fd, const std::string& path, std::uint64_t rights) {
  const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return fail(system_failure(landlock_stage, "open", errno, path + ", O_PATH"));
  }
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    const int saved = errno;
    ::close(fd);
    return fail(system_failure(landlock_stage, "fstat", saved, path));
  }
  if (!S_ISDIR(status.st_mode)) rights &= file_rights;
  const landlock_path_beneath_attr rule{.allowed_access = rights, .parent_fd = fd};
  const long added = ::syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0U);
  const int saved = errno;
  ::close(fd);
  if (added != 0) return fail(system_failure(landlock_stage, "landlock_add_rule", saved, path));
  return true;
}

}  // namespace

int landlock_abi() noexcept {
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

int landlock_abi_used() noexcept { return std::min(landlock_abi(), newest_known_abi); }

setup_result<landlock_ruleset> landlock_ruleset::prepare(const landlock_paths& paths) {
  landlock_ruleset ruleset;
  ruleset.abi_ = landlock_abi_used();
  if (ruleset.abi_ == 0) return ruleset;

  const int abi = ruleset.abi_;
  psych_landlock_ruleset_attr attr;
  attr.handled_access_fs = handled_fs(abi);
  if (abi >= 4 && paths.network != network_access::unrestricted)
    attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
  if (abi >= 6) attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
  const long fd = ::syscall(SYS_landlock_create_ruleset, &attr, attr_size(abi), 0U);
  if (fd < 0) return fail(system_failure(landlock_stage, "landlock_create_ruleset", errno, "handled rights, 0"));
  ruleset.fd_ = static_cast<int>(fd);  // O_CLOEXEC: the kernel always sets it on a ruleset fd

  const std::uint64_t handled = attr.handled_access_fs;
  const std::uint64_t read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  const category categories[] = {
      {&paths.read_execute, read | LANDLOCK_ACCESS_FS_EXECUTE},
      {&paths.read_write, handled & ~(LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK)},
      {&paths.devices,
       LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_IOCTL_DEV},
      {&paths.read_only, read},
      {&paths.list_only, LANDLOCK_ACCESS_FS_READ_DIR},
  };
  for (const auto& [list, rights] : categories) {
    for (const auto& path : *list) {
      PSYCH_TRY(const bool added, add_path_rule(ruleset.fd_, path, rights & handled));
      if (!added) ruleset.skipped_.push_back(path);
    }
  }
  if (attr.handled_access_net != 0 && paths.network == network_access::allowlist && paths.egress_port != 0) {
    // A port, not an address: inside the sandbox's namespace the only listener is the proxy's.
    const psych_landlock_net_port_attr rule{.allowed_access = LANDLOCK_ACCESS_NET_CONNECT_TCP, .port = paths.egress_port};
    if (::syscall(SYS_landlock_add_rule, ruleset.fd_, psych_landlock_rule_net_port, &rule, 0U) != 0)
      return fail(system_failure(landlock_stage, "landlock_add_rule", errno,
                                 fmt::format("LANDLOCK_RULE_NET_PORT, connect {}", paths.egress_port)));
  }
  return ruleset;
}

landlock_ruleset::landlock_ruleset(landlock_ruleset&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), abi_(std::exchange(other.abi_, 0)), skipped_(std::move(other.skipped_)) {}

landlock_ruleset& landlock_ruleset::operator=(landlock_ruleset&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    abi_ = std::exchange(other.abi_, 0);
    skipped_ = std::move(other.skipped_);
  }
  return *this;
}

landlock_ruleset::~landlock_ruleset() {
  if (fd_ >= 0) ::close(fd_);
}

setup_result<void> landlock_ruleset::restrict_self() const {
  if (fd_ < 0) return success();
  if (::syscall(SYS_landlock_restrict_self, fd_, 0U) != 0)
    return fail(system_failure(landlock_stage, "landlock_restrict_self", errno, "ruleset, 0"));
  return success();
}

std::string describe_landlock(int abi, network_access network) {
  if (abi <= 0) return "landlock: unavailable";
  std::string text = "landlock: ABI " + std::to_string(abi) + " (filesystem";
  if (abi >= 4 && network == network_access::none) text += ", TCP bind/connect denied";
  if (abi >= 4 && network == network_access::allowlist) text += ", TCP bind denied, connect to the egress proxy only";
  if (abi >= 6) text += ", abstract unix sockets and signals scoped";
  return text + ")";
}

}  // namespace psych::launcher

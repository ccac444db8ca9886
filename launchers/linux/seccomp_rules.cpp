#include "seccomp_rules.hpp"

#include <cerrno>
#include <initializer_list>
#include <memory>

#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <seccomp.h>

#include "platform/posix/retry.hpp"

namespace psych::launcher {

namespace {

// Denied with EPERM: each one either reaches another process (ptrace, process_vm_*), builds or
// enters a kernel boundary the sandbox does not own (unshare, setns, mount and the new mount
// API, pivot_root, chroot), opens kernel attack surface no sandboxed program needs (keyrings,
// bpf, perf, userfaultfd, kexec, modules, io_uring, file handles, swap, reboot, accounting), or
// creates kernel objects that outlive every process of the execution and that the next
// execution of the same uid could read (System V IPC, POSIX message queues).
constexpr const char* denied_calls[] = {
    "ptrace",         "process_vm_readv", "process_vm_writev", "unshare",       "setns",
    "mount",          "umount2",          "pivot_root",        "chroot",        "fsopen",
    "fsconfig",       "fsmount",          "fspick",            "move_mount",    "open_tree",
    "mount_setattr",  "keyctl",           "add_key",           "request_key",   "bpf",
    "perf_event_open", "userfaultfd",     "kexec_load",        "kexec_file_load", "init_module",
    "finit_module",   "delete_module",    "io_uring_setup",    "io_uring_enter", "io_uring_register",
    "open_by_handle_at", "name_to_handle_at", "swapon",        "swapoff",       "reboot",
    "acct",           "shmget",           "shmat",             "shmctl",        "msgget",
    "msgsnd",         "msgrcv",           "msgctl",            "semget",        "semop",
    "semtimedop",     "semctl",           "mq_open",           "mq_unlink",     "mq_timedsend",
    "mq_timedreceive", "mq_notify",       "mq_getsetattr",
};

// clone() can create the same namespaces unshare() can; one rule per flag, since a filter
// cannot say "any of these bits".
constexpr unsigned long long namespace_flags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
                                                  CLONE_NEWIPC, CLONE_NEWUSER,   CLONE_NEWPID,
                                                  CLONE_NEWNET};

// libseccomp's SCMP_A0() macros are C compound literals; this is the same comparison in C++.
constexpr scmp_arg_cmp arg(unsigned index, scmp_compare op, scmp_datum_t a, scmp_datum_t b = 0) {
  return scmp_arg_cmp{.arg = index, .op = op, .datum_a = a, .datum_b = b};
}

setup_result<void> add_rule(scmp_filter_ctx context, std::uint32_t action, const char* call,
                            std::initializer_list<scmp_arg_cmp> args = {}) {
  const int number = seccomp_syscall_resolve_name(call);
  if (number == __NR_SCMP_ERROR) return success();  // this architecture has no such call: nothing to deny
  const int rc = seccomp_rule_add_array(context, action, number, static_cast<unsigned>(args.size()),
                                        args.size() == 0 ? nullptr : std::data(args));
  if (rc != 0) return fail(system_failure(launch_stage::seccomp, "seccomp_rule_add", -rc, call));
  return success();
}

struct context_deleter {
  void operator()(scmp_filter_ctx context) const noexcept { seccomp_release(context); }
};

/// The BPF program libseccomp generates for `context`. libseccomp 2.5 exports only to an fd.
setup_result<std::vector<sock_filter>> export_program(scmp_filter_ctx context) {
  const int fd = ::memfd_create("psych-seccomp", MFD_CLOEXEC);
  if (fd < 0) return fail(system_failure(launch_stage::seccomp, "memfd_create", errno, "psych-seccomp, MFD_CLOEXEC"));
  const auto read_back = [&]() -> setup_result<std::vector<sock_filter>> {
    if (const int rc = seccomp_export_bpf(context, fd); rc != 0)
      return fail(system_failure(launch_stage::seccomp, "seccomp_export_bpf", -rc));
    const off_t size = ::lseek(fd, 0, SEEK_END);
    constexpr auto unit = static_cast<off_t>(sizeof(sock_filter));
    if (size <= 0 || size % unit != 0 || size / unit > BPF_MAXINSNS)
      return fail(refusal(launch_stage::seccomp, "libseccomp exported no usable BPF program"));
    std::vector<sock_filter> program(static_cast<std::size_t>(size / unit));
    if (const auto got = posix::pread_all(fd, program.data(), static_cast<std::size_t>(size), 0);
        got.done < static_cast<std::size_t>(size))
      return fail(system_failure(launch_stage::seccomp, "pread", got.error != 0 ? got.error : EIO, "psych-seccomp"));
    return program;
  };
  auto program = read_back();
  ::close(fd);
  return program;
}

}  // namespace

setup_result<std::vector<sock_filter>> compile_rules(network_access network) {
  scmp_filter_ctx raw = seccomp_init(SCMP_ACT_ALLOW);
  if (raw == nullptr) return fail(system_failure(launch_stage::seccomp, "seccomp_init", ENOMEM, "SCMP_ACT_ALLOW"));
  const std::unique_ptr<void, context_deleter> owned{raw};

  // Only the native architecture is in the filter. A call through another ABI (i386 via
  // int 0x80, or x32 numbers >= 0x40000000, which libseccomp checks on x86_64) has its own
  // syscall table where none of the rules below would match, so it kills the process.
  if (const int rc = seccomp_attr_set(raw, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc != 0)
    return fail(system_failure(launch_stage::seccomp, "seccomp_attr_set", -rc, "SCMP_FLTATR_ACT_BADARCH"));

  for (const char* call : denied_calls) {
    PSYCH_TRY(add_rule(raw, SCMP_ACT_ERRNO(EPERM), call));
  }
  for (const auto flag : namespace_flags) {
    PSYCH_TRY(add_rule(raw, SCMP_ACT_ERRNO(EPERM), "clone", {arg(0, SCMP_CMP_MASKED_EQ, flag, flag)}));
  }

  // clone3 passes its flags in memory a filter cannot read, so it is refused as absent: libc
  // then falls back to clone(), where the rules above apply.
  PSYCH_TRY(add_rule(raw, SCMP_ACT_ERRNO(ENOSYS), "clone3"));

  // The kernel reads ioctl's request as 32 bits; compare only those, or a request with junk in
  // the upper half would slip past an equality test and still reach the terminal.
  for (const unsigned long long request : {TIOCSTI, TIOCLINUX}) {
    PSYCH_TRY(add_rule(raw, SCMP_ACT_ERRNO(EPERM), "ioctl",
                       {arg(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFFULL, request)}));
  }

  // The program never needs a socket of its own to reach the host: its channel is inherited.
  // So socket() is refused for every family (AF_UNIX too: a world-writable socket of the host,
  // or an abstract one, which has no permissions at all, would otherwise be one connect() away),
  // and a network grant opens exactly TCP/UDP over IPv4 and IPv6. socketpair() stays, for
  // AF_UNIX only: asyncio's event loop wakes itself through one. EACCES rather than EPERM so the
  // child's probe reads it as "denied by policy"; Python raises PermissionError for either.
  // The rules compare all 64 bits while the kernel reads 32: a domain with junk in its upper
  // half matches "greater than AF_INET6" and is refused, which errs on the safe side.
  if (network == network_access::none) {
    PSYCH_TRY(add_rule(raw, SCMP_ACT_ERRNO(EACCES), "socket"));
  } else {
    static_assert(AF_INET < AF_INET6);
    PSYCH_TRY(add_rule(raw, SCMP_ACT_ERRNO(EACCES), "socket", {arg(0, SCMP_CMP_LT, AF_INET)}));
    PSYCH_TRY(add_rule(raw, SCMP_ACT_ERRNO(EACCES), "socket", {arg(0, SCMP_CMP_GT, AF_INET6)}));
    for (scmp_datum_t family = AF_INET + 1; family < AF_INET6; ++family) {
      PSYCH_TRY(add_rule(raw, SCMP_ACT_ERRNO(EACCES), "socket", {arg(0, SCMP_CMP_EQ, family)}));
    }
  }
  PSYCH_TRY(add_rule(raw, SCMP_ACT_ERRNO(EACCES), "socketpair", {arg(0, SCMP_CMP_NE, AF_UNIX)}));
  return export_program(raw);
}

}  // namespace psych::launcher

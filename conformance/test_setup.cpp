// Setting a backend up: a host that does not allow user namespaces gets a sandbox_setup error
// with guidance for isolation=isolated, never something weaker; the PROCESS backend still works.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends.hpp"

namespace {

/// In this process: unshare() fails with EPERM, as on a host (or container) that forbids new
/// namespaces. Everything else is allowed.
bool forbid_unshare() {
  sock_filter program[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog filter{.len = static_cast<unsigned short>(sizeof program / sizeof program[0]), .filter = program};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &filter) == 0;
}

}  // namespace

TEST_CASE("without user namespaces, isolation=isolated is a setup error with guidance") {
#if !defined(__x86_64__)
  psych::testing::skip_case("the filter that forbids unshare here is written for x86_64");
  return;
#else
  // In a child, so the filter never touches the test process.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (!forbid_unshare()) ::_exit(10);
    psych::local_sandbox_options options;
    options.isolation = psych::isolation_level::isolated;
    auto isolated = psych::local_sandbox(options);
    if (isolated) ::_exit(11);  // something was handed back: weaker, or the probe lied
    if (isolated.error().kind != psych::error_kind::sandbox_setup) ::_exit(12);
    const auto message = isolated.error().message();
    if (message.find("user namespaces") == std::string::npos) ::_exit(13);
    if (message.find("container or a remote sandbox") == std::string::npos) ::_exit(14);
    options.isolation = psych::isolation_level::process;
    options.allow_same_uid = ::geteuid() != 0;
    auto process = psych::local_sandbox(options);
    if (!process) ::_exit(15);
    if (process.value()->offer().isolation != psych::isolation_level::process) ::_exit(16);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK_MESSAGE(WEXITSTATUS(status) == 0, "step " << WEXITSTATUS(status) << " of the child failed");
#endif
}

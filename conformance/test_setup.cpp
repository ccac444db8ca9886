// Setting a backend up: a host that does not allow user namespaces gets a sandbox_setup error
// with guidance for isolation=isolated, never something weaker; the PROCESS backend still works.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends_posix.hpp"

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

TEST_CASE("detect_local_backends lists every platform's backends, another platform's with why not here") {
  const auto backends = psych::detect_local_backends();
  const auto row = [&](std::string_view name) -> const psych::backend_info* {
    for (const auto& b : backends)
      if (b.name == name) return &b;
    return nullptr;
  };
#if defined(__linux__)
  const std::string here = "Linux";
  const std::vector<std::pair<std::string, std::string>> elsewhere = {{"macos-process", "psych-launch-macos runs only on macOS"},
                                                                      {"windows-process", "psych-launch-windows runs only on Windows"}};
  for (const auto* own : {"linux-process", "linux-namespaces"}) CHECK_MESSAGE(row(own) != nullptr, own);
#elif defined(__APPLE__)
  const std::string here = "macOS";
  const std::vector<std::pair<std::string, std::string>> elsewhere = {
      {"linux-process", "psych-launch-linux runs only on Linux"},
      {"linux-namespaces", "psych-launch-linux runs only on Linux"},
      {"windows-process", "psych-launch-windows runs only on Windows"}};
  CHECK(row("macos-process") != nullptr);
#endif
  CHECK(backends.size() == 4);
  for (const auto& [name, why] : elsewhere) {
    CAPTURE(name);
    const auto* found = row(name);
    REQUIRE(found != nullptr);
    CHECK_FALSE(found->available);
    CHECK(found->reason.find("this host is " + here) != std::string::npos);
    CHECK(found->reason.find(why) != std::string::npos);
  }
  SUBCASE("pinning another platform's backend is a setup error that says why") {
    psych::local_sandbox_options options;
    options.backend = elsewhere.front().first;
    options.allow_same_uid = true;
    const auto pinned = psych::local_sandbox(options);
    REQUIRE_FALSE(pinned);
    CHECK(pinned.error().kind == psych::error_kind::sandbox_setup);
    CHECK(pinned.error().message().find("this host is " + here) != std::string::npos);
  }
}

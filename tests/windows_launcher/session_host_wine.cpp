// psych's session on Linux starting psych-launch-windows.exe under Wine (session_host.hpp): a
// starter of its own runs the launcher through wine64 with the shared prefix's environment and
// names the launch's paths as the launcher sees them (Wine's Z: drive).
#include <doctest/doctest.h>

#include "os/child_process.hpp"
#include "host_os.hpp"
#include "psych/protocol/attach.hpp"
#include "session_host.hpp"

namespace psych::testing::windows::os {
namespace {

class wine_starter final : public host::launcher_starter {
 public:
  result<host::launcher_process> start(const host::launcher_fds& fds, const host::execution_dirs&) override {
    REQUIRE(fds.attach);
    CHECK(fds.control == -1);
    CHECK(fds.channel == -1);
    auto environment = wine_environment();
    environment.push_back(std::string(protocol::host_port_variable) + "=" + std::to_string(fds.attach->port));
    environment.push_back(std::string(protocol::host_secret_variable) + "=" + fds.attach->secret);
    auto spawned = host::child_process::spawn(
        {.argv = wine_launcher_command(), .environment = environment, .descriptors = {-1, fds.stdout_write, fds.stderr_write}});
    if (!spawned) return fail_with(error_kind::launcher_unavailable, spawned.error().message());
    const auto held = spawned.value().release();
    return host::launcher_process{held.pid, held.pidfd};
  }
  [[nodiscard]] bool attaches_over_loopback() const override { return true; }
  void adapt_launch(protocol::launch_frame& frame) const override {
    for (auto* path : {&frame.workspace, &frame.tmp_dir, &frame.canary}) *path = launcher_path_of(*path);
    for (const char* name : {"HOME", "TMPDIR"})
      if (auto found = frame.environment.find(name); found != frame.environment.end())
        found->second = launcher_path_of(found->second);
    frame.environment["TEMP"] = frame.environment["TMP"] = frame.tmp_dir;
  }
};

}  // namespace

session_launch launch_for_session() {
  return {.starter = std::make_unique<wine_starter>(),
          .launcher_path = {},
          .temp_root = "/tmp",
          .interpreter = launcher_path_of(test_child()),
          .system_root = "C:\\windows"};
}

}  // namespace psych::testing::windows::os

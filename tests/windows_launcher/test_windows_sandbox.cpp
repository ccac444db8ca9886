// psych's public face on Windows (psych/host/sandbox.hpp), as a runtime that embeds psych meets
// it: detect_local_backends() and local_sandbox() choosing windows-process with
// psych-launch-windows.exe, describe() and run() through it, and the execution's directories in
// the account's temporary directory by default, gone afterwards. Only in
// psych-windows-launcher-tests.exe: the Linux test host has the Linux backends. The interpreter is
// the contract-speaking test child (no Windows CPython under Wine); the cases with a real CPython
// are test_windows_python.cpp's.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cases.hpp"
#include "host_os.hpp"
#include "backends/platform_backends.hpp"
#include "psych/host/sandbox.hpp"

using namespace psych;
using namespace psych::testing::windows;
namespace fs = std::filesystem;

namespace {

local_sandbox_options options_here() {
  local_sandbox_options options;
  options.python_bin = os::launcher_path_of(os::test_child());
  options.launcher_path = os::launcher_path_of(os::test_child().parent_path() / "psych-launch-windows.exe");
  options.allow_same_uid = true;
  options.env_allowlist = {"SystemRoot"};
  return options;
}

/// The psych- directories in the account's temporary directory (the execution's and its canary's).
std::vector<std::string> psych_dirs_in_temp() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(fs::temp_directory_path()))
    if (const auto name = entry.path().filename().string(); name.starts_with("psych-")) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

const backend_info* row(const std::vector<backend_info>& rows, std::string_view name) {
  const auto found = std::find_if(rows.begin(), rows.end(), [&](const backend_info& info) { return info.name == name; });
  return found == rows.end() ? nullptr : &*found;
}

}  // namespace

TEST_CASE("local sandbox on Windows: detect_local_backends lists windows-process here and the others as elsewhere") {
  if (!can_run()) return;
  const auto rows = detect_local_backends(options_here());
  const auto* windows = row(rows, "windows-process");
  REQUIRE(windows);
  CHECK(windows->available);
  CHECK(windows->isolation == isolation_level::process);
  CHECK(windows->reason.find("psych-launch-windows.exe") != std::string::npos);
  for (const char* elsewhere : {"linux-process", "linux-namespaces", "macos-process"}) {
    const auto* other = row(rows, elsewhere);
    REQUIRE(other);
    CHECK_FALSE(other->available);
    CHECK(other->reason.find("this host is Windows") != std::string::npos);
  }
  // Without allow_same_uid the Windows backend says why, with the way out.
  auto strict = options_here();
  strict.allow_same_uid = false;
  const auto* refused = row(detect_local_backends(strict), "windows-process");
  REQUIRE(refused);
  CHECK_FALSE(refused->available);
  CHECK(refused->reason.find("allow_same_uid") != std::string::npos);
}

TEST_CASE("local sandbox on Windows: describe() and run() go through psych-launch-windows.exe and leave no directory") {
  if (!can_run()) return;
  auto options = options_here();
  options.probe_at_open = false;  // the sandbox is handed back; its first run is graded like any
  CHECK(options.temp_root.empty());  // the default on Windows: the account's temporary directory
  const auto before = psych_dirs_in_temp();
  auto opened = local_sandbox(options);
  REQUIRE_MESSAGE(opened, (opened ? std::string() : opened.error().message()));
  auto& box = *opened.value();

  const auto described = box.describe();
  INFO("problems: " << joined(described.problems));
  CHECK(described.backend == "windows-process");
  CHECK(described.launcher == options.launcher_path);
  CHECK(described.guarantees.identity == enforcement::unavailable);
  CHECK(described.guarantees.filesystem == enforcement::unavailable);
  CHECK(described.guarantees.file_size == enforcement::unavailable);

  run_request request;
  request.program = "print hello through local_sandbox";
  request.terms.limits.wall_seconds.value = 30;
  request.terms.limits.process_count.value = 8;
  request.terms.limits.address_space_bytes.value = std::uint64_t{256} << 20;
  const auto result = box.run(request, {});
  INFO("failure: " << (result.failure ? result.failure->message : "none") << "; problems: " << joined(result.problems));
  // What Windows can give at best travels with the result (no file size cap, no other account).
  CHECK(result.strongest_grades == host::strongest_on_windows);
  // A probe below the floor says why from the grade, not that the child never reported.
  if (!described.ready) {
    const auto said = joined(described.problems);
    CHECK(said.find("isolation_unavailable: requested isolation=process") != std::string::npos);
    CHECK(said.find("ended before it reported") == std::string::npos);
  }
  if (described.ready) {
    // Windows itself: the job holds its limits, the program ran at PROCESS.
    CHECK(result.ok());
    CHECK(result.isolation == isolation_level::process);
    CHECK(result.stdout_data == "hello through local_sandbox\n");
  } else {
    // Wine keeps no job limits: the run is refused at PROCESS, saying why, and nothing ran.
    MESSAGE("the job read back no limits (Wine): local_sandbox's run was refused at isolation=process");
    REQUIRE(result.failure);
    CHECK(result.failure->kind == failure_kind::isolation_unavailable);
    CHECK_FALSE(result.isolation);
    CHECK(result.stdout_data.empty());
  }
  CHECK(psych_dirs_in_temp() == before);
}

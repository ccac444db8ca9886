// psych's host on Windows, its file side: the execution's directories (execution_dirs_windows.cpp),
// the artifact walk (artifact_walk_windows.cpp) and run_command (run_command.cpp, one
// implementation on Asio for every system). Part of psych-windows-host-parts-tests.exe.
#include <doctest/doctest.h>

#include <windows.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>

#include "execution/artifact_walk.hpp"
#include "execution/execution_dirs.hpp"
#include "platform/windows/text.hpp"
#include "parts.hpp"
#include "psych/host/sandbox.hpp"
#include "os/random_hex.hpp"
#include "os/run_command.hpp"
#include "skip.hpp"

using namespace psych;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  std::wstring path(MAX_PATH + 1, L'\0');
  path.resize(::GetTempPathW(static_cast<DWORD>(path.size()), path.data()));
  return fs::path(path);
}

/// A directory of the test's own under %TEMP%, removed with what is in it.
struct scratch {
  fs::path path = temp_dir() / ("psych-host-parts-" + host::random_hex(6));
  scratch() { fs::create_directory(path); }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// A directory symbolic link at `link` to `target`, as a program may plant one. False when there
/// is none to test with: under Wine, which makes none a listing shows, the case is skipped; on
/// Windows itself the case fails.
bool plant_directory_link(const fs::path& link, const fs::path& target) {
  const bool made = ::CreateSymbolicLinkW(link.c_str(), target.c_str(),
                                          SYMBOLIC_LINK_FLAG_DIRECTORY | SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE);
  const DWORD error = made ? ERROR_SUCCESS : ::GetLastError();
  const DWORD attributes = ::GetFileAttributesW(link.c_str());
  if (made && attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_REPARSE_POINT) != 0) return true;
  if (testing::windows_host::under_wine()) {
    testing::skip_case(testing::allowed_in_ci::no_symbolic_links_under_wine,
                       "Wine makes no symbolic link a directory listing shows");
    return false;
  }
  FAIL_CHECK("no symbolic link could be made: " << (made ? "CreateSymbolicLinkW succeeded but made no reparse point"
                                                         : windows::error_text(error)));
  return false;
}

}  // namespace

TEST_CASE("an execution's directories: a workspace, a temp dir and a canary with random content, all removed") {
  const scratch root;
  auto made = host::make_execution_dirs(windows::narrow(root.path.native()));
  REQUIRE_MESSAGE(made, (made ? "" : made.error().message()));
  const auto& dirs = made.value();
  CHECK(fs::is_directory(windows::widen(dirs.workspace)));
  CHECK(fs::is_directory(windows::widen(dirs.tmp)));
  CHECK(fs::path(windows::widen(dirs.workspace)).parent_path() == fs::path(windows::widen(dirs.base)));
  CHECK_FALSE(fs::path(windows::widen(dirs.canary)).native().starts_with(fs::path(windows::widen(dirs.base)).native()));
  const auto canary = read(windows::widen(dirs.canary));
  CHECK(canary.starts_with("psych canary "));
  CHECK(canary.size() == std::string("psych canary \n").size() + 32);
  // Private to the worker's account: the DACL of owner_only_attributes().
  psych::testing::windows_host::check_private({dirs.base, dirs.workspace, dirs.tmp, dirs.canary_dir, dirs.canary});

  // What a program may leave: a tree deeper than MAX_PATH, a read-only file, a read-only directory.
  fs::path deep = windows::widen(dirs.workspace);
  for (int level = 0; level < 40; ++level) {
    deep /= "nested-directory-" + std::to_string(level);
    REQUIRE(::CreateDirectoryW((L"\\\\?\\" + deep.native()).c_str(), nullptr));
  }
  const std::wstring deep_file = L"\\\\?\\" + (deep / "file.txt").native();
  const HANDLE file = ::CreateFileW(deep_file.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_NEW, FILE_ATTRIBUTE_READONLY, nullptr);
  REQUIRE(file != INVALID_HANDLE_VALUE);
  ::CloseHandle(file);
  const auto read_only_dir = fs::path(windows::widen(dirs.tmp)) / "locked";
  fs::create_directory(read_only_dir);
  ::SetFileAttributesW(read_only_dir.c_str(), FILE_ATTRIBUTE_READONLY);

  CHECK(host::remove_execution_dirs(dirs));
  CHECK_FALSE(fs::exists(windows::widen(dirs.base)));
  CHECK_FALSE(fs::exists(windows::widen(dirs.canary_dir)));
  CHECK(fs::is_empty(root.path));
}

TEST_CASE("an execution's directories under GetTempPath's own path, trailing separator and all") {
  const auto root = windows::narrow(temp_dir().native());
  REQUIRE(root.ends_with("\\"));
  auto made = host::make_execution_dirs(root);
  REQUIRE_MESSAGE(made, (made ? "" : made.error().message()));
  CHECK(made.value().base.find("\\\\") == std::string::npos);
  write(fs::path(windows::widen(made.value().workspace)) / "left.txt", "by the program");
  CHECK(host::remove_execution_dirs(made.value()));
  CHECK_FALSE(fs::exists(windows::widen(made.value().base)));
  CHECK_FALSE(fs::exists(windows::widen(made.value().canary_dir)));
}

TEST_CASE("an execution's directories by default (an empty temp root) are in the account's temporary directory") {
  CHECK(std::string(default_temp_root).empty());  // psych/host/sandbox.hpp: "/tmp" would be C:\tmp
  auto made = host::make_execution_dirs(default_temp_root);
  REQUIRE_MESSAGE(made, (made ? "" : made.error().message()));
  const auto expected = fs::path(temp_dir()).lexically_normal().native();
  const auto base = fs::path(windows::widen(made.value().base));
  // GetTempPath's path ends in a separator, the base's parent does not.
  CHECK(base.parent_path().native() + L"\\" == expected);
  CHECK(fs::path(windows::widen(made.value().canary_dir)).parent_path() == base.parent_path());
  CHECK(host::remove_execution_dirs(made.value()));
  CHECK_FALSE(fs::exists(base));
}

TEST_CASE("removing an execution's directories removes a link the program planted, never what it points at") {
  const scratch root;
  const scratch outside;
  write(outside.path / "keep.txt", "the host's");
  auto made = host::make_execution_dirs(windows::narrow(root.path.native()));
  REQUIRE(made);
  const auto link = fs::path(windows::widen(made.value().workspace)) / "link";
  if (!plant_directory_link(link, outside.path)) {
    (void)host::remove_execution_dirs(made.value());
    return;
  }
  CHECK(host::remove_execution_dirs(made.value()));
  CHECK_FALSE(fs::exists(windows::widen(made.value().base)));
  CHECK(read(outside.path / "keep.txt") == "the host's");
}

TEST_CASE("the artifact walk keeps regular files by the policy and counts what it leaves out, by reason") {
  const scratch workspace;
  write(workspace.path / "b.txt", "bee");
  write(workspace.path / "a.txt", "ay");
  fs::create_directories(workspace.path / "dir" / "deeper" / "deepest");
  write(workspace.path / "dir" / "c.txt", "sea");
  write(workspace.path / "dir" / "deeper" / "deepest" / "hidden.txt", "too deep");
  write(workspace.path / "big.bin", std::string(2048, 'x'));
  write(workspace.path / "linked.txt", "two names");
  REQUIRE(::CreateHardLinkW((workspace.path / "other-name.txt").c_str(), (workspace.path / "linked.txt").c_str(), nullptr));

  artifact_policy policy;
  policy.collection = artifact_collection::collect;
  policy.max_file_bytes = 1024;
  policy.max_depth = 2;  // dir/deeper is walked; dir/deeper/deepest is not
  auto collected = host::collect_artifacts(windows::narrow(workspace.path.native()), policy);
  REQUIRE_MESSAGE(collected, (collected ? "" : collected.error().message()));
  const auto& harvest = collected.value();
  std::vector<std::string> paths;
  for (const auto& file : harvest.files) paths.push_back(file.path);
  CHECK(paths == std::vector<std::string>{"a.txt", "b.txt", "dir/c.txt"});
  CHECK(harvest.files[0].bytes == "ay");
  CHECK(harvest.omitted.at(omission_reason::too_large) == 1);
  CHECK(harvest.omitted.at(omission_reason::hardlink) == 2);  // both names of the same file
  CHECK(harvest.omitted.at(omission_reason::too_deep) == 1);
  CHECK(harvest.omitted_total() == 4);

  policy.max_files = 1;
  auto one = host::collect_artifacts(windows::narrow(workspace.path.native()), policy);
  REQUIRE(one);
  REQUIRE(one.value().files.size() == 1);
  CHECK(one.value().files[0].path == "a.txt");  // sorted before the limit applies
  CHECK(one.value().omitted.at(omission_reason::too_many) == 2);
}

TEST_CASE("the artifact walk never follows a link out of the workspace, and refuses a workspace that is one") {
  const scratch workspace;
  const scratch outside;
  write(outside.path / "secret.txt", "the host's");
  write(workspace.path / "own.txt", "mine");
  artifact_policy policy;
  policy.collection = artifact_collection::collect;
  const auto link = workspace.path / "escape";
  if (!plant_directory_link(link, outside.path)) return;
  auto collected = host::collect_artifacts(windows::narrow(workspace.path.native()), policy);
  REQUIRE(collected);
  std::string omitted;
  for (const auto& [reason, count] : collected.value().omitted) omitted += fmt::format("{} {}; ", name_of(reason), count);
  INFO("omitted: " << omitted);
  REQUIRE(collected.value().files.size() == 1);
  CHECK(collected.value().files[0].path == "own.txt");
  CHECK(collected.value().omitted == std::map<omission_reason, std::uint64_t>{{omission_reason::symlink, 1}});

  auto through_link = host::collect_artifacts(windows::narrow(link.native()), policy);
  CHECK_FALSE(through_link);
}

TEST_CASE("run_command: output and status, and a command past its limit is ended") {
  const auto self = testing::windows_host::own_path();
  auto ran = host::run_command({self, "--child", "output", "out", "err", "4"}, {}, 20s);
  REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().message()));
  CHECK(ran.value().exit_code == 4);
  CHECK(ran.value().stdout_text == "out");
  CHECK(ran.value().stderr_text == "err");

  const auto started = std::chrono::steady_clock::now();
  auto slow = host::run_command({self, "--child", "sleep"}, {}, 500ms);
  REQUIRE(slow);
  CHECK(slow.value().exit_code == -1);
  CHECK(std::chrono::steady_clock::now() - started < 10s);

  auto missing = host::run_command({"C:\\nonexistent\\program.exe"}, {}, 1s);
  CHECK_FALSE(missing);
}

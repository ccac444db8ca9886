#include "backends/local/interpreter.hpp"

#ifndef _WIN32
#include <unistd.h>  // access
#endif

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <fmt/format.h>

#include "os/host_environment.hpp"
#include "platform/utf8_path.hpp"

namespace psych::host {
namespace {

namespace fs = std::filesystem;

enum class file_kind { missing, not_executable, script, binary };

/// The first bytes of an executable this system runs directly: ELF on Linux, Mach-O (64-bit or
/// universal) on macOS, a PE's "MZ" on Windows. Anything else that is executable is a script, such
/// as a pyenv shim (on Windows, presumably also the Store's zero-byte python.exe alias: not observed).
bool native_executable_magic(std::string_view magic) {
#if defined(_WIN32)
  return magic.starts_with("MZ");
#elif defined(__APPLE__)
  return magic == "\xcf\xfa\xed\xfe" || magic == "\xca\xfe\xba\xbe";
#else
  return magic == "\x7f" "ELF";
#endif
}

file_kind classify(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return file_kind::missing;
#ifndef _WIN32  // Windows has no execute bit: what CreateProcess runs is decided by the file's format
  if (::access(path.c_str(), X_OK) != 0) return file_kind::not_executable;
#endif
  std::array<char, 4> magic{};
  std::ifstream in(path, std::ios::binary);
  in.read(magic.data(), magic.size());
  const auto got = static_cast<std::size_t>(in.gcount());
  if (native_executable_magic(std::string_view(magic.data(), got))) return file_kind::binary;
  return file_kind::script;
}

std::string resolved_path(const fs::path& path) {
  std::error_code ec;
  auto resolved = fs::canonical(path, ec);
  return ec ? path.string() : resolved.string();
}

/// The installation prefix, as the launcher binds it: /usr for /usr/bin/python3.11.
fs::path prefix_of(const fs::path& binary) { return binary.parent_path().parent_path(); }

/// The prefix's standard library directories (lib/python3.*), resolved.
[[maybe_unused]] std::vector<std::string> stdlib_dirs_of(const fs::path& binary) {  // not on Windows
  std::vector<std::string> dirs;
  std::error_code ec;
  for (auto it = fs::directory_iterator(prefix_of(binary) / "lib", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const auto name = it->path().filename().string();
    std::error_code dir_ec;
    if (name.starts_with("python3") && it->is_directory(dir_ec)) dirs.push_back(resolved_path(it->path()));
  }
  return dirs;
}

#ifdef _WIN32
/// What a search tries in each directory of PATH, and where it looks when PATH has none. Windows'
/// CPython is python.exe (python.org's installer and the Store's add python3.exe too); there is
/// no system-wide place every installation shares.
constexpr std::array<const char*, 2> interpreter_names{"python.exe", "python3.exe"};
constexpr std::array<const char*, 0> system_interpreters{};
constexpr char path_separator = ';';
constexpr const char* default_search_path = "";
constexpr const char* install_advice = "install CPython from python.org";
#else
constexpr std::array<const char*, 1> interpreter_names{"python3"};
constexpr std::array<const char*, 2> system_interpreters{"/usr/bin/python3", "/usr/local/bin/python3"};
constexpr char path_separator = ':';
constexpr const char* default_search_path = "/usr/local/bin:/usr/bin:/bin";
constexpr const char* install_advice = "install one (apt-get install python3)";
#endif

/// The first system interpreter `child` can run: what the guidance suggests instead.
std::optional<std::string> reachable_system_interpreter(const accessor& child) {
  for (const char* fallback : system_interpreters)
    if (classify(fallback) == file_kind::binary && !unreachable_interpreter(resolved_path(fallback), child))
      return std::string(fallback);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> unreachable_interpreter([[maybe_unused]] const std::string& binary,
                                                   [[maybe_unused]] const accessor& child) {
#ifdef _WIN32
  // The child is the worker's own account on Windows: what the worker found, the child can reach.
  return std::nullopt;
#else
  const auto obstacle = interpreter_obstacle(binary, stdlib_dirs_of(binary), child);
  if (!obstacle) return std::nullopt;
  return fmt::format("{} is not reachable by uid {}: {}", prefix_of(binary).string(), child.uid, *obstacle);
#endif
}

result<interpreter_choice> resolve_interpreter(const std::optional<std::string>& requested,
                                               const std::optional<accessor>& child) {
  if (requested) {
    const auto path = resolved_path(platform::utf8_path(*requested));
    switch (classify(platform::utf8_path(path))) {
      case file_kind::binary: break;
      case file_kind::missing:
        return fail_with(error_kind::interpreter_unavailable, fmt::format("python_bin {} does not exist", *requested));
      case file_kind::not_executable:
        return fail_with(error_kind::interpreter_unavailable, fmt::format("python_bin {} is not executable", *requested));
      case file_kind::script:
        return fail_with(error_kind::interpreter_unavailable,
                       fmt::format("python_bin {} is a script (a shim such as pyenv's?), which cannot run in a "
                                   "sandbox; pass the real interpreter, the path that `{} -c \"import sys; "
                                   "print(sys.executable)\"` prints",
                                   *requested, *requested));
    }
    if (child)
      if (auto why = unreachable_interpreter(path, *child)) {
        const auto instead = reachable_system_interpreter(*child);
        return fail_with(error_kind::interpreter_unavailable,
                       fmt::format("python_bin {}: {}; {}put the interpreter where uid {} can reach it", *requested,
                                   *why, instead ? fmt::format("set python_bin to {} or ", *instead) : "",
                                   child->uid));
      }
    return interpreter_choice{path, {}};
  }
  interpreter_choice choice;
  std::vector<fs::path> tried;
  const auto usable = [&](const fs::path& candidate) {
    if (std::find(tried.begin(), tried.end(), candidate) != tried.end()) return false;  // PATH named it twice
    tried.push_back(candidate);
    switch (classify(candidate)) {
      case file_kind::binary: break;
      case file_kind::script:
        choice.notes.push_back(fmt::format("interpreter: skipped {}: a script (shim), not an interpreter",
                                           candidate.string()));
        return false;
      default: return false;
    }
    const auto path = resolved_path(candidate);
    if (child)
      if (auto why = unreachable_interpreter(path, *child)) {
        choice.notes.push_back(fmt::format("interpreter: skipped {}: {}", candidate.string(), *why));
        return false;
      }
    choice.path = path;
    return true;
  };
  const auto path_env = environment_value("PATH");
  std::string_view dirs = path_env ? std::string_view(*path_env) : default_search_path;
  while (!dirs.empty()) {
    const auto separator = dirs.find(path_separator);
    const auto dir = dirs.substr(0, separator);
    dirs = separator == std::string_view::npos ? std::string_view{} : dirs.substr(separator + 1);
    if (dir.empty()) continue;
    for (const char* name : interpreter_names)
      if (usable(platform::utf8_path(dir) / name)) return choice;
  }
  for (const char* fallback : system_interpreters)
    if (usable(fallback)) return choice;
  std::string skipped;
  for (const auto& note : choice.notes) skipped.append("; ").append(note);
  return fail_with(error_kind::interpreter_unavailable,
                 fmt::format("no usable python3 interpreter found on PATH{}{}; {} or pass python_bin",
                             system_interpreters.empty() ? "" : " or in /usr/bin", skipped, install_advice));
}

}  // namespace psych::host

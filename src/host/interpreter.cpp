#include "interpreter.hpp"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <fmt/format.h>

namespace psych::host {
namespace {

namespace fs = std::filesystem;

enum class file_kind { missing, not_executable, script, binary };

file_kind classify(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return file_kind::missing;
  if (::access(path.c_str(), X_OK) != 0) return file_kind::not_executable;
  std::array<char, 4> magic{};
  std::ifstream in(path, std::ios::binary);
  in.read(magic.data(), magic.size());
  if (std::string_view(magic.data(), 4) == "\x7f" "ELF") return file_kind::binary;
  return file_kind::script;
}

std::string resolved_path(const fs::path& path) {
  std::error_code ec;
  auto resolved = fs::canonical(path, ec);
  return ec ? path.string() : resolved.string();
}

}  // namespace

result<interpreter_choice> resolve_interpreter(const std::optional<std::string>& requested) {
  if (requested) {
    const auto path = resolved_path(*requested);
    switch (classify(path)) {
      case file_kind::binary: return interpreter_choice{path, {}};
      case file_kind::missing:
        return failure(error_kind::interpreter_unavailable, fmt::format("python_bin {} does not exist", *requested));
      case file_kind::not_executable:
        return failure(error_kind::interpreter_unavailable, fmt::format("python_bin {} is not executable", *requested));
      case file_kind::script:
        return failure(error_kind::interpreter_unavailable,
                       fmt::format("python_bin {} is a script (a shim such as pyenv's?), which cannot run in a "
                                   "sandbox; pass the real interpreter, the path that `{} -c \"import sys; "
                                   "print(sys.executable)\"` prints",
                                   *requested, *requested));
    }
  }
  interpreter_choice choice;
  const char* path_env = std::getenv("PATH");
  std::string_view dirs = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const auto dir = dirs.substr(0, colon);
    dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
    if (dir.empty()) continue;
    const auto candidate = fs::path(dir) / "python3";
    switch (classify(candidate)) {
      case file_kind::binary: choice.path = resolved_path(candidate); return choice;
      case file_kind::script:
        choice.notes.push_back(fmt::format("skipped {}: a script (shim), not an interpreter", candidate.string()));
        break;
      default: break;
    }
  }
  for (const char* fallback : {"/usr/bin/python3", "/usr/local/bin/python3"}) {
    if (classify(fallback) == file_kind::binary) {
      choice.path = resolved_path(fallback);
      return choice;
    }
  }
  return failure(error_kind::interpreter_unavailable,
                 "no python3 interpreter found on PATH or in /usr/bin; install one (apt-get install python3) "
                 "or pass python_bin");
}

}  // namespace psych::host

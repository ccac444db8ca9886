#include "files.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "platform/utf8_path.hpp"

namespace psych::cli {

result<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(platform::utf8_path(path), std::ios::binary);
  if (!in) return fail_with(error_kind::unreadable_file, fmt::format("{}: {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return fail_with(error_kind::unreadable_file, fmt::format("{}: read error", path));
  return text.str();
}

result<std::string> read_standard_input() {
  // On Windows main() has put standard input in binary mode: the program's bytes as they are.
  std::ostringstream text;
  text << std::cin.rdbuf();
  if (std::cin.bad()) return fail_with(error_kind::unreadable_file, "standard input could not be read");
  return text.str();
}

}  // namespace psych::cli

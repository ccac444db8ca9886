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
  // A directory opens as a stream on POSIX and reads as nothing: an empty file, silently.
  std::error_code ec;
  if (std::filesystem::is_directory(platform::utf8_path(path), ec))
    return fail_with(error_kind::unreadable_file, fmt::format("{}: is a directory, not a file", path));
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

result<std::string> read_program(const std::string& path) {
  auto text = path == "-" ? read_standard_input() : read_whole_file(path);
  if (!text) return text;
  // Python refuses a NUL in source, and such a file is some other kind of file (a binary, UTF-16
  // text) given by mistake: it is not the program's syntax error. Invalid UTF-8 is the library's
  // to refuse, as Python does (a syntax_error naming the byte's offset), on every backend.
  if (const auto nul = text.value().find('\0'); nul != std::string::npos)
    return fail_with(error_kind::unreadable_file,
                     fmt::format("{}: not a text file (a NUL byte at offset {}); PROGRAM is Python source, UTF-8",
                                 path == "-" ? "standard input" : path, nul));
  return text;
}

}  // namespace psych::cli

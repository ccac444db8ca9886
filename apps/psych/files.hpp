#pragma once
// Reading what psych is given: a program or a config file, named by a UTF-8 path on every system
// (on Windows never through the ANSI code page), or standard input.
#include <string>

#include "psych/result.hpp"

namespace psych::cli {

/// The whole of the file at `path`, or unreadable_file "<path>: <why>".
result<std::string> read_whole_file(const std::string& path);

/// The whole of standard input, as bytes.
result<std::string> read_standard_input();

/// The program's source from `path` ("-": standard input), or unreadable_file for a directory and
/// for a file holding a NUL byte (not a text file, named as such rather than as a syntax error).
result<std::string> read_program(const std::string& path);

}  // namespace psych::cli

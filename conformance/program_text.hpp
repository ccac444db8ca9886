#pragma once
// Hostile programs are written with `{NAME}` placeholders for what only the test knows (pids,
// paths, ports); fill() puts the values in.
#include <initializer_list>
#include <string>
#include <utility>

namespace conformance {

/// Replaces every `{NAME}` in a program with its value.
inline std::string fill(std::string program, std::initializer_list<std::pair<const char*, std::string>> values) {
  for (const auto& [key, value] : values) {
    const std::string placeholder = std::string("{") + key + "}";
    for (auto at = program.find(placeholder); at != std::string::npos;
         at = program.find(placeholder, at + value.size()))
      program.replace(at, placeholder.size(), value);
  }
  return program;
}

}  // namespace conformance

#include "environment.hpp"

#include <fmt/format.h>

namespace psych::launcher {

string_vector::string_vector(std::vector<std::string> strings) : strings_(std::move(strings)) {
  pointers_.reserve(strings_.size() + 1);
  for (auto& text : strings_) pointers_.push_back(text.data());
  pointers_.push_back(nullptr);
}

setup_result<string_vector> build_environment(const std::map<std::string, std::string>& variables) {
  std::vector<std::string> entries;
  entries.reserve(variables.size());
  for (const auto& [key, value] : variables) {
    if (key.empty() || key.find_first_of(std::string_view("=\0", 2)) != std::string::npos)
      return fail(refusal(launch_stage::environment, fmt::format("environment key {:?} cannot be passed to a process", key)));
    if (value.find('\0') != std::string::npos)
      return fail(refusal(launch_stage::environment, fmt::format("the value of {} holds a NUL byte", key)));
    entries.push_back(key + '=' + value);
  }
  return string_vector(std::move(entries));
}

}  // namespace psych::launcher

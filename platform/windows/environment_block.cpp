#include "platform/windows/environment_block.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <windows.h>

#include <fmt/format.h>

#include "platform/windows/text.hpp"

namespace psych::windows {

namespace {

/// Windows compares variable names as upper-case UTF-16 code units, without a locale.
std::wstring upper(std::wstring text) {
  if (!text.empty()) ::CharUpperBuffW(text.data(), static_cast<DWORD>(text.size()));
  return text;
}

}  // namespace

bool same_variable_name(const std::string& a, const std::string& b) { return upper(widen(a)) == upper(widen(b)); }

result<std::wstring> build_environment_block(const std::map<std::string, std::string>& variables) {
  std::vector<std::pair<std::wstring, std::wstring>> entries;  // {upper-case name, "NAME=value"}
  for (const auto& [name, value] : variables) {
    if (name.empty() || name.find_first_of(std::string_view("=\0", 2)) != std::string::npos)
      return fail_with(error_kind::invalid_argument, fmt::format("{:?} is not an environment variable name", name));
    if (value.find('\0') != std::string::npos)
      return fail_with(error_kind::invalid_argument, fmt::format("the value of {} holds a NUL", name));
    entries.emplace_back(upper(widen(name)), widen(name) + L"=" + widen(value));
  }
  std::sort(entries.begin(), entries.end());
  const auto same = std::adjacent_find(entries.begin(), entries.end(),
                                       [](const auto& a, const auto& b) { return a.first == b.first; });
  if (same != entries.end())
    return fail_with(error_kind::invalid_argument, fmt::format("{} is set twice but for case; on Windows that is one variable",
                                                   narrow(same->first)));
  std::wstring block;
  for (const auto& entry : entries) block.append(entry.second).push_back(L'\0');
  // An empty block is still two NULs: one ending the (absent) last entry, one ending the block.
  if (entries.empty()) block.push_back(L'\0');
  block.push_back(L'\0');
  return block;
}

}  // namespace psych::windows

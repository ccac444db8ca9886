#pragma once
// What the cases of psych-windows-host-parts-tests.exe share: the binary's own path (it is its own
// child, `--child ACTION`), whether it runs under Wine, and who a file's DACL lets in.
#include <windows.h>
#include <aclapi.h>
#include <sddl.h>

#include <algorithm>
#include <initializer_list>
#include <regex>
#include <source_location>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "platform/windows/text.hpp"
#include "skip.hpp"
#include "under_wine.hpp"

namespace psych::testing::windows_host {

inline std::string own_path() {
  std::wstring path(32768, L'\0');
  path.resize(::GetModuleFileNameW(nullptr, path.data(), static_cast<DWORD>(path.size())));
  return psych::windows::narrow(path);
}

using psych::testing::under_wine;

/// The MCP test server of test_mcp_windows.cpp, run as `--child mcp-server`; its exit status.
int mcp_server_main();

/// This process's account, as a SID string ("S-1-5-21-..."). Read here, not through
/// owner_only_attributes(): a check must not share the code it checks.
inline std::string own_sid() {
  HANDLE token = nullptr;
  if (!::OpenProcessToken(::GetCurrentProcess(), TOKEN_QUERY, &token)) return {};
  DWORD size = 0;
  ::GetTokenInformation(token, TokenUser, nullptr, 0, &size);
  std::vector<char> user(size);
  wchar_t* sid = nullptr;
  const bool ok = ::GetTokenInformation(token, TokenUser, user.data(), size, &size) &&
                  ::ConvertSidToStringSidW(reinterpret_cast<TOKEN_USER*>(user.data())->User.Sid, &sid);
  ::CloseHandle(token);
  if (!ok) return {};
  std::string text = psych::windows::narrow(sid);
  ::LocalFree(sid);
  return text;
}

/// A file's DACL as read back: whether it is protected (inherits nothing from its directory), and
/// who each of its entries allows (SDDL trustees: a SID string, or "SY" for SYSTEM), with the
/// rights each grants ("FA": all); "unreadable" when it cannot be read.
struct dacl_view {
  bool is_protected = false;
  std::vector<std::string> entries;  ///< "A FA S-1-5-21-...": kind, rights, trustee
};

inline dacl_view dacl_of(const std::string& path) {
  PSECURITY_DESCRIPTOR descriptor = nullptr;
  PACL dacl = nullptr;
  if (::GetNamedSecurityInfoW(psych::windows::widen(path).c_str(), SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, nullptr,
                              nullptr, &dacl, nullptr, &descriptor) != ERROR_SUCCESS)
    return {false, {"unreadable"}};
  wchar_t* sddl = nullptr;
  const bool converted = ::ConvertSecurityDescriptorToStringSecurityDescriptorW(descriptor, SDDL_REVISION_1,
                                                                               DACL_SECURITY_INFORMATION, &sddl, nullptr);
  ::LocalFree(descriptor);
  if (!converted) return {false, {"unreadable"}};
  const std::string text = psych::windows::narrow(sddl);
  ::LocalFree(sddl);
  dacl_view view{text.starts_with("D:P"), {}};
  // An entry: (kind;inheritance flags;rights;object guid;inherited object guid;trustee).
  static const std::regex entry(R"(\(([A-Z]+);[A-Z]*;([A-Z0-9x]+);[^;]*;[^;]*;([^;)]+)\))");
  for (std::sregex_iterator at(text.begin(), text.end(), entry), end; at != end; ++at)
    view.entries.push_back((*at)[1].str() + " " + (*at)[2].str() + " " + (*at)[3].str());
  return view;
}

/// What keeps `path` from being private as psych makes its files and directories on Windows (mode
/// 0600 or 0700 elsewhere): empty when its DACL is protected (inherits nothing from its directory)
/// and grants this account and SYSTEM all access and nobody anything; otherwise the DACL as read.
inline std::string privacy_problem(const std::string& path) {
  auto view = dacl_of(path);
  std::sort(view.entries.begin(), view.entries.end());
  auto expected = std::vector<std::string>{"A FA " + own_sid(), "A FA SY"};
  std::sort(expected.begin(), expected.end());
  if (view.is_protected && view.entries == expected) return {};
  std::string found = view.is_protected ? "protected:" : "not protected:";
  for (const auto& entry : view.entries) found += " (" + entry + ")";
  return found;
}

/// Checks that each of `paths` is private (privacy_problem). Under Wine, which keeps no DACL (it
/// reads back one made from the Unix mode, the same whatever psych asked for), the check cannot
/// tell and is reported as skipped instead.
inline void check_private(std::initializer_list<std::string> paths,
                          std::source_location where = std::source_location::current()) {
  if (under_wine()) {
    skip_case(allowed_in_ci::no_dacls_under_wine,
              "Wine keeps no DACL (it reads one back from the Unix mode, the same whatever was asked), so whether "
              "the files are private to the account cannot be seen",
              where);
    return;
  }
  for (const auto& path : paths) CHECK_MESSAGE(privacy_problem(path) == "", path << ": " << privacy_problem(path));
}

}  // namespace psych::testing::windows_host

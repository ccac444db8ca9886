#pragma once
// What the cases of psych-windows-host-parts-tests.exe share: the binary's own path (it is its own
// child, `--child ACTION`) and whether it runs under Wine.
#include <windows.h>

#include <string>

#include "launchers/windows/text.hpp"

namespace psych::testing::windows_host {

inline std::string own_path() {
  std::wstring path(32768, L'\0');
  path.resize(::GetModuleFileNameW(nullptr, path.data(), static_cast<DWORD>(path.size())));
  return psych::windows::narrow(path);
}

/// Wine's ntdll exports its version; Windows' does not.
inline bool under_wine() {
  return ::GetProcAddress(::GetModuleHandleW(L"ntdll.dll"), "wine_get_version") != nullptr;
}

}  // namespace psych::testing::windows_host

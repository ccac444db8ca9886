#pragma once
// Whether this Windows program runs under Wine, for the cases whose expectation only Windows itself
// can meet (skip.hpp's *_under_wine kinds). Windows only.
#include <windows.h>

namespace psych::testing {

/// Wine's ntdll exports its version; Windows' does not.
inline bool under_wine() {
  return ::GetProcAddress(::GetModuleHandleW(L"ntdll.dll"), "wine_get_version") != nullptr;
}

}  // namespace psych::testing

#pragma once
// UTF-8 (the contract's frames) to UTF-16 (every Win32 W call) and back, and the words Windows
// has for an error code. Shared by the launcher and its test child.
#include <string>
#include <string_view>

#include <windows.h>

namespace psych::windows {

/// UTF-8 to UTF-16. Invalid UTF-8 becomes U+FFFD (the frames' strings are valid already).
std::wstring widen(std::string_view utf8);

/// UTF-16 to UTF-8; an unpaired surrogate becomes U+FFFD.
std::string narrow(std::wstring_view utf16);

/// "Access is denied." for ERROR_ACCESS_DENIED: FormatMessage's text without its line break, or
/// "error 1234" where Windows has none.
std::string error_text(DWORD error);

}  // namespace psych::windows

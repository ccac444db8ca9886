#pragma once
// A path psych holds as UTF-8 (every path in its options, frames and results), as the system's
// path type. On Windows a path made from a narrow string takes each byte for a character (mingw's
// libstdc++), while path::string() gives UTF-8: a name beyond ASCII would not round-trip, and a
// file under C:\Users\Jürgen would not be found. This widens it as UTF-8 instead.
#include <filesystem>
#include <string_view>

#ifdef _WIN32
#include "platform/windows/text.hpp"  // widen
#endif

namespace psych::platform {

inline std::filesystem::path utf8_path(std::string_view utf8) {
#ifdef _WIN32
  return std::filesystem::path(windows::widen(utf8));
#else
  return std::filesystem::path(utf8);
#endif
}

}  // namespace psych::platform

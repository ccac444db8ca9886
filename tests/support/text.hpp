#pragma once
// Small text checks the tests share.
#include <string_view>

namespace psych::testing {

inline bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace psych::testing

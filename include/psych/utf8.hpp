#pragma once
// UTF-8 helpers for text the model will read: program output is arbitrary
// bytes, previews must be valid text, and a cut must never split a character.
#include <cstddef>
#include <string>
#include <string_view>

namespace psych::utf8 {

/// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid
/// (overlong forms, surrogates and code points above U+10FFFF are invalid).
constexpr std::size_t sequence_length(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) len = 2;
  else if (b0 == 0xE0) len = 3, lo = 0xA0;
  else if (b0 >= 0xE1 && b0 <= 0xEC) len = 3;
  else if (b0 == 0xED) len = 3, hi = 0x9F;
  else if (b0 >= 0xEE && b0 <= 0xEF) len = 3;
  else if (b0 == 0xF0) len = 4, lo = 0x90;
  else if (b0 >= 0xF1 && b0 <= 0xF3) len = 4;
  else if (b0 == 0xF4) len = 4, hi = 0x8F;
  else return 0;
  if (i + len > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return len;
}

/// The text with every invalid sequence replaced by U+FFFD.
inline std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (const auto n = sequence_length(s, i)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      ++i;
    }
  }
  return out;
}

constexpr bool is_continuation(char c) noexcept { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

/// The largest cut <= at that does not fall inside a multi-byte character.
constexpr std::size_t floor_boundary(std::string_view s, std::size_t at) noexcept {
  if (at >= s.size()) return s.size();
  std::size_t back = 0;
  while (at > 0 && back < 3 && is_continuation(s[at])) --at, ++back;
  return at;
}

/// The smallest cut >= at that does not fall inside a multi-byte character.
constexpr std::size_t ceil_boundary(std::string_view s, std::size_t at) noexcept {
  std::size_t forward = 0;
  while (at < s.size() && forward < 3 && is_continuation(s[at])) ++at, ++forward;
  return at;
}

}  // namespace psych::utf8

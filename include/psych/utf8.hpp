#pragma once
// UTF-8 helpers for text the model will read: program output is arbitrary
// bytes, previews must be valid text, and a cut must never split a character.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace psych::utf8 {

/// At s[i]: the length (1..4) of a well-formed UTF-8 sequence, or minus the
/// length of its maximal ill-formed subpart (Unicode §3.9, "U+FFFD substitution
/// of maximal subparts"): a lead byte plus the continuation bytes that were
/// still possible. Overlong forms, surrogates and code points above U+10FFFF
/// are ill-formed. Every replacement psych makes follows this one rule, so a
/// preview, a JSON string and a read window repair the same bytes the same way.
constexpr int step(std::string_view s, std::size_t i) noexcept {
  const auto at = [&](std::size_t k) -> unsigned {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0x100u;  // 0x100 fits no range
  };
  const unsigned lead = at(0);
  if (lead < 0x80) return 1;
  unsigned lo = 0x80, hi = 0xBF;
  int tail = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    tail = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    tail = 2;
    if (lead == 0xE0) lo = 0xA0;  // overlong
    if (lead == 0xED) hi = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    tail = 3;
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  } else {
    return -1;
  }
  for (int k = 1; k <= tail; ++k) {
    const unsigned b = at(static_cast<std::size_t>(k));
    if (b < lo || b > hi) return -k;
    lo = 0x80;
    hi = 0xBF;
  }
  return tail + 1;
}

/// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is ill-formed.
constexpr std::size_t sequence_length(std::string_view s, std::size_t i) noexcept {
  const int n = step(s, i);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

/// How many bytes to pass over at s[i]: the character, or the ill-formed subpart one U+FFFD replaces.
constexpr std::size_t advance(std::string_view s, std::size_t i) noexcept {
  const int n = step(s, i);
  return static_cast<std::size_t>(n > 0 ? n : -n);
}

inline constexpr std::string_view replacement_character = "\xEF\xBF\xBD";

/// The offset of the first ill-formed byte, or npos when `s` is valid UTF-8.
inline std::size_t first_invalid(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path, eight bytes at a time.
    while (i + 8 <= s.size()) {
      std::uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i == s.size()) break;
    const int n = step(s, i);
    if (n < 0) return i;
    i += static_cast<std::size_t>(n);
  }
  return std::string_view::npos;
}

/// Why the bytes at s[i] are ill-formed, in the words of Python's UTF-8 codec (and so of the
/// SyntaxError Python raises for such a source): a byte that cannot begin a character, a sequence
/// the data ends inside, or one broken by its next byte. `i` must be where step() is negative.
inline std::string_view ill_formed_reason(std::string_view s, std::size_t i) noexcept {
  const auto lead = static_cast<unsigned char>(s[i]);
  if (lead < 0xC2 || lead > 0xF4) return "invalid start byte";
  return i + static_cast<std::size_t>(-step(s, i)) >= s.size() ? "unexpected end of data" : "invalid continuation byte";
}

/// The text with every maximal ill-formed subpart replaced by U+FFFD.
inline std::string sanitize(std::string_view s) {
  const std::size_t bad = first_invalid(s);
  if (bad == std::string_view::npos) return std::string{s};
  std::string out;
  out.reserve(s.size() + 16);
  out.append(s.substr(0, bad));
  for (std::size_t i = bad; i < s.size(); i += advance(s, i)) {
    if (const auto n = sequence_length(s, i)) out.append(s.substr(i, n));
    else out.append(replacement_character);
  }
  return out;
}

constexpr bool is_continuation(char c) noexcept { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

/// How many bytes at the end of `text` begin a UTF-8 sequence that is not complete yet (0 to 3):
/// what a consumer of a stream in chunks holds back until the next chunk brings the rest.
constexpr std::size_t incomplete_tail(std::string_view text) noexcept {
  for (std::size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto byte = static_cast<unsigned char>(text[text.size() - back]);
    if (is_continuation(static_cast<char>(byte))) continue;  // its lead is further back
    const std::size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
    return length > back ? back : 0;
  }
  return 0;
}

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

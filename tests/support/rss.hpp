#pragma once
// Whether a process's resident set size says anything about the memory it holds. AddressSanitizer
// keeps freed memory in quarantine and adds its shadow, so RSS climbs in a sanitized build without
// any leak or any whole-input read; there a test prints its RSS figures without judging them, and
// LeakSanitizer judges leaks.

namespace psych::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool rss_is_meaningful = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool rss_is_meaningful = false;
#else
inline constexpr bool rss_is_meaningful = true;
#endif
#else
inline constexpr bool rss_is_meaningful = true;
#endif

}  // namespace psych::testing

#include "byte_size.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

namespace psych::cli {
namespace {

struct unit {
  std::string_view spelling;  ///< lower case
  std::uint64_t bytes;
};

constexpr std::uint64_t kib = 1024, kb = 1000;
constexpr std::array<unit, 14> units{{{"b", 1},
                                      {"k", kib},
                                      {"kib", kib},
                                      {"kb", kb},
                                      {"m", kib * kib},
                                      {"mib", kib * kib},
                                      {"mb", kb * kb},
                                      {"g", kib * kib * kib},
                                      {"gib", kib * kib * kib},
                                      {"gb", kb * kb * kb},
                                      {"t", kib * kib * kib * kib},
                                      {"tib", kib * kib * kib * kib},
                                      {"tb", kb * kb * kb * kb},
                                      {"", 1}}};

/// Digits of a fraction past these are dropped (a millionth of a TiB is about a MiB), which keeps
/// fraction × multiplier inside 64 bits.
constexpr std::size_t max_fraction_digits = 6;

std::optional<std::uint64_t> multiplier_of(std::string_view spelled) {
  std::string lower(spelled);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const unit& u : units)
    if (u.spelling == lower) return u.bytes;
  return std::nullopt;
}

error not_a_size(std::string_view option, std::string_view text) {
  return error{error_kind::invalid_argument,
               fmt::format("{} expects a size in bytes: a whole number, or a number and a unit: K, M, G, T or KiB, "
                           "MiB, GiB, TiB (binary, 1024 each), KB, MB, GB, TB (decimal, 1000 each), as in 300M, "
                           "300MiB, 300MB, 1.5G; got '{}'",
                           option, text)};
}

}  // namespace

result<std::uint64_t> parse_byte_size(std::string_view option, std::string_view text) {
  if (!text.empty() && text.front() == '-')
    return fail_with(error_kind::invalid_limit, fmt::format("{} must be positive, got '{}'", option, text));
  const char* const first = text.data();
  const char* const last = first + text.size();
  std::uint64_t whole = 0;
  const auto [whole_end, whole_ec] = std::from_chars(first, last, whole);
  if (whole_ec == std::errc::result_out_of_range)
    return fail_with(error_kind::invalid_argument, fmt::format("{} is too large: '{}'", option, text));
  if (whole_ec != std::errc{}) return not_a_size(option, text);

  // The fraction's digits as a numerator over 10^digits, so that 1.5G is exact.
  const char* cursor = whole_end;
  std::uint64_t fraction = 0, denominator = 1;
  if (cursor != last && *cursor == '.') {
    ++cursor;
    const char* digits_start = cursor;
    while (cursor != last && std::isdigit(static_cast<unsigned char>(*cursor))) {
      if (static_cast<std::size_t>(cursor - digits_start) < max_fraction_digits) {
        fraction = fraction * 10 + static_cast<std::uint64_t>(*cursor - '0');
        denominator *= 10;
      }
      ++cursor;
    }
    if (cursor == digits_start) return not_a_size(option, text);
  }
  const auto multiplier = multiplier_of(std::string_view(cursor, static_cast<std::size_t>(last - cursor)));
  if (!multiplier) return not_a_size(option, text);
  if (cursor != whole_end && *multiplier == 1) return not_a_size(option, text);  // a fraction of a byte

  constexpr std::uint64_t most = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t fraction_bytes = fraction * *multiplier / denominator;
  if (whole > most / *multiplier || whole * *multiplier > most - fraction_bytes)
    return fail_with(error_kind::invalid_argument, fmt::format("{} is too large: '{}'", option, text));
  const std::uint64_t bytes = whole * *multiplier + fraction_bytes;
  if (bytes == 0)
    return fail_with(error_kind::invalid_limit, fmt::format("{} must be at least one byte, got '{}'", option, text));
  return bytes;
}

}  // namespace psych::cli

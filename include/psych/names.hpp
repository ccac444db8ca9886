#pragma once
// Spellings of closed enums, shared by JSON, the CLI and the docs. An enum
// opts in by specialising enum_names with one spelling per enumerator, in
// declaration order; everything else (printing, parsing, the codec's enum
// handling) is written once, here. Use PSYCH_ENUM_NAMES inside namespace psych.
#include <array>
#include <concepts>
#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>

namespace psych {

template <class E>
struct enum_names;  // specialise: static constexpr std::array<std::string_view, N> spellings{...};

template <class E>
concept named_enum = std::is_enum_v<E> && requires { enum_names<E>::spellings; };

template <named_enum E>
constexpr std::string_view name_of(E value) noexcept {
  constexpr auto& spellings = enum_names<E>::spellings;
  const auto index = static_cast<std::size_t>(value);
  return index < spellings.size() ? spellings[index] : std::string_view{"<invalid>"};
}

template <named_enum E>
constexpr std::optional<E> parse_enum(std::string_view spelling) noexcept {
  constexpr auto& spellings = enum_names<E>::spellings;
  for (std::size_t i = 0; i < spellings.size(); ++i)
    if (spellings[i] == spelling) return static_cast<E>(i);
  return std::nullopt;
}

/// A value the codec spells as one JSON string of any content (open_enum.hpp): from_spelling takes
/// every string, so a spelling never makes a frame malformed.
template <class T>
concept spelt = requires(const T& value, std::string_view spelling) {
  { value.spelling() } -> std::convertible_to<std::string_view>;
  { T::from_spelling(spelling) } -> std::same_as<T>;
};

}  // namespace psych

#define PSYCH_ENUM_NAMES(Enum, ...)                                                   \
  template <>                                                                         \
  struct enum_names<Enum> {                                                           \
    static constexpr auto spellings = std::to_array<std::string_view>({__VA_ARGS__});     \
  }

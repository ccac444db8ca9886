#pragma once
// A named enum as another program spells it. A peer of another version (a newer service, a
// launcher built apart from its host, a run log written by a newer worker) may spell a member this
// side does not have: its frame or record is still read, and the spelling is kept as it came, so
// it is reported and passed on unchanged while this side branches only on the members it knows.
#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "psych/names.hpp"

namespace psych {

template <named_enum E>
class open_enum {
 public:
  /// No spelling at all (""): what an absent member decodes to, as an absent string did.
  open_enum() = default;
  constexpr open_enum(E known) noexcept : value_(known) {}

  /// One of E's spellings is that member; any other is kept as it is.
  static open_enum from_spelling(std::string_view spelling) {
    if (const std::optional<E> known = parse_enum<E>(spelling)) return *known;
    open_enum unknown;
    unknown.value_ = std::string(spelling);
    return unknown;
  }

  /// The member, when the spelling is one of E's.
  constexpr std::optional<E> known() const noexcept {
    if (const E* member = std::get_if<E>(&value_)) return *member;
    return std::nullopt;
  }

  std::string_view spelling() const noexcept {
    if (const E* member = std::get_if<E>(&value_)) return name_of(*member);
    return std::get<std::string>(value_);
  }

  friend bool operator==(const open_enum& a, E b) noexcept { return a.known() == b; }
  friend bool operator==(const open_enum& a, const open_enum& b) noexcept { return a.spelling() == b.spelling(); }
  /// By spelling, so that a map keyed by it iterates (and encodes) as a map keyed by the strings did.
  friend std::strong_ordering operator<=>(const open_enum& a, const open_enum& b) noexcept {
    return a.spelling() <=> b.spelling();
  }

 private:
  std::variant<std::string, E> value_;  ///< the string only for a spelling E does not have
};

}  // namespace psych

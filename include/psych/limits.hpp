#pragma once
// Limits and how they narrow.
//
// Three shapes of the same five dimensions:
//  - sandbox_limits: what one execution gets, every dimension a value (the
//    wall clock always applies). A backend's ceiling and a policy's grant are
//    these too.
//  - limit_caps: the deployment's caps (a profile's hard limits, a backend's
//    configured ceiling), each dimension optional. An unset cap leaves that
//    dimension to the terms before it; it is never a default.
//  - code_execution_limits: an agent's requests, each optional (absent means
//    "whatever the profile allows").
// Every field's type names its dimension and carries its narrowing rule, and
// narrow() walks the fields generically: a new field whose type has no
// narrow_field overload does not compile, two structs whose dimensions do not
// line up field by field do not compile either, and limit_caps must mirror
// sandbox_limits member for member.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include <boost/hana/accessors.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/equal.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/fold_left.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/zip.hpp>

#include "psych/names.hpp"
#include "psych/result.hpp"

namespace psych {

/// The five limit dimensions, spelled as CodeExecutionLimits and limit_hit spell them.
enum class limit_name { cpu_seconds, wall_seconds, memory_bytes, file_size_bytes, process_count };
PSYCH_ENUM_NAMES(limit_name, "cpu_seconds", "wall_seconds", "memory_bytes", "file_size_bytes",
                 "process_count");

/// A hard value set by a backend, a tenant policy or a profile. Narrows to the smaller.
/// Dimension is any closed enum's value: limit_name here, meter_name for binding budgets.
template <auto Dimension, class T>
struct cap {
  static constexpr auto dimension = Dimension;
  using value_type = T;
  constexpr cap(T v) noexcept : value(v) {}  // NOLINT: implicit, so `.wall_seconds = 10` reads naturally
  T value;
  friend constexpr bool operator==(const cap&, const cap&) = default;
};

/// What an agent asks for in one dimension; nullopt means "whatever the profile allows".
template <auto Dimension, class T>
struct request {
  static constexpr auto dimension = Dimension;
  using value_type = T;
  constexpr request() noexcept = default;
  constexpr request(T v) noexcept : value(v) {}  // NOLINT: implicit, as for cap
  constexpr request(std::nullopt_t) noexcept {}  // NOLINT
  std::optional<T> value;
  friend constexpr bool operator==(const request&, const request&) = default;
};


/// The spec's wall clock of an execution, in seconds: SandboxLimits' default, and the longest a
/// backend's probe of itself may run.
inline constexpr double default_wall_seconds = 30.0;

/// SandboxLimits: what a backend enforces, every dimension a value. Defaults are the spec's.
struct sandbox_limits {
  cap<limit_name::cpu_seconds, double> cpu_seconds = 10.0;
  cap<limit_name::memory_bytes, std::uint64_t> address_space_bytes = std::uint64_t{512} << 20;
  cap<limit_name::file_size_bytes, std::uint64_t> file_size_bytes = std::uint64_t{10} << 20;
  cap<limit_name::process_count, std::uint64_t> process_count = 64;
  cap<limit_name::wall_seconds, double> wall_seconds = default_wall_seconds;
  friend constexpr bool operator==(const sandbox_limits&, const sandbox_limits&) = default;
};

/// CodeExecutionLimits: the same dimensions as an agent's requests, memory spelled memory_bytes.
struct code_execution_limits {
  request<limit_name::cpu_seconds, double> cpu_seconds;
  request<limit_name::memory_bytes, std::uint64_t> memory_bytes;
  request<limit_name::file_size_bytes, std::uint64_t> file_size_bytes;
  request<limit_name::process_count, std::uint64_t> process_count;
  request<limit_name::wall_seconds, double> wall_seconds;
  friend constexpr bool operator==(const code_execution_limits&, const code_execution_limits&) = default;
};

}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::sandbox_limits, cpu_seconds, address_space_bytes, file_size_bytes,
                        process_count, wall_seconds);

namespace psych {

/// Caps on some dimensions: each member is the sandbox_limits member of the same name, optional.
/// nullopt means "no cap here": the dimension stays whatever the terms before allow (in the end,
/// the backend's ceiling). It never falls back to sandbox_limits' defaults.
struct limit_caps {
  std::optional<decltype(sandbox_limits::cpu_seconds)> cpu_seconds;
  std::optional<decltype(sandbox_limits::address_space_bytes)> address_space_bytes;
  std::optional<decltype(sandbox_limits::file_size_bytes)> file_size_bytes;
  std::optional<decltype(sandbox_limits::process_count)> process_count;
  std::optional<decltype(sandbox_limits::wall_seconds)> wall_seconds;
  friend constexpr bool operator==(const limit_caps&, const limit_caps&) = default;
};

}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::limit_caps, cpu_seconds, address_space_bytes, file_size_bytes, process_count,
                        wall_seconds);
BOOST_HANA_ADAPT_STRUCT(psych::code_execution_limits, cpu_seconds, memory_bytes, file_size_bytes,
                        process_count, wall_seconds);

namespace psych {

// --- the narrowing rules, one per field kind --------------------------------

template <auto D, class T>
constexpr void narrow_field(cap<D, T>& current, const cap<D, T>& ceiling) noexcept {
  current.value = std::min(current.value, ceiling.value);
}

template <auto D, class T>
constexpr void narrow_field(cap<D, T>& current, const request<D, T>& asked) noexcept {
  if (asked.value) current.value = std::min(current.value, *asked.value);
}

/// An unset cap narrows nothing.
template <auto D, class T>
constexpr void narrow_field(cap<D, T>& current, const std::optional<cap<D, T>>& ceiling) noexcept {
  if (ceiling) narrow_field(current, *ceiling);
}

/// Whether `Optional` mirrors `Whole`: the same member names in the same order, each typed
/// std::optional of the member it mirrors. One walk, so a dimension added to sandbox_limits and
/// not to limit_caps fails the static_assert below.
template <class Whole, class Optional>
constexpr bool mirrors_optionally() {
  namespace hana = boost::hana;
  constexpr auto whole = hana::accessors<Whole>();
  constexpr auto optional = hana::accessors<Optional>();
  if constexpr (decltype(hana::length(whole))::value != decltype(hana::length(optional))::value) {
    return false;
  } else {
    return hana::fold_left(hana::zip(whole, optional), true, [](bool so_far, auto pair) {
      using whole_field = std::remove_cvref_t<decltype(hana::second(hana::at_c<0>(pair))(std::declval<Whole&>()))>;
      using optional_field =
          std::remove_cvref_t<decltype(hana::second(hana::at_c<1>(pair))(std::declval<Optional&>()))>;
      constexpr bool same_name = decltype(hana::first(hana::at_c<0>(pair)) == hana::first(hana::at_c<1>(pair)))::value;
      return so_far && same_name && std::is_same_v<optional_field, std::optional<whole_field>>;
    });
  }
}
static_assert(mirrors_optionally<sandbox_limits, limit_caps>(),
              "limit_caps must have every sandbox_limits member, by the same name and in the same order, optional");

/// `base` with each dimension `given` sets replaced by its value, up or down; the unset ones
/// keep base's. This is not narrowing: it is how a backend's configured ceiling takes the place
/// of its built-in one. `base` is the struct `given` mirrors (a ceiling from caps), or another
/// set of caps (a config file's caps laid over the caller's).
template <class Whole, class Optional>
constexpr Whole overlay(Whole base, const Optional& given) {
  namespace hana = boost::hana;
  static_assert(std::is_same_v<Whole, Optional> || mirrors_optionally<Whole, Optional>(),
                "overlay needs a struct that mirrors the other, optional");
  hana::for_each(hana::zip(hana::accessors<Whole>(), hana::accessors<Optional>()), [&](auto pair) {
    const auto& set = hana::second(hana::at_c<1>(pair))(given);
    if (set) hana::second(hana::at_c<0>(pair))(base) = *set;
  });
  return base;
}

/// Narrow every field of `current` by the field of `by` in the same position.
/// Both structs must list the same dimensions in the same order.
template <class Current, class By>
constexpr void narrow(Current& current, const By& by) {
  namespace hana = boost::hana;
  constexpr auto mine = hana::accessors<Current>();
  constexpr auto theirs = hana::accessors<By>();
  static_assert(decltype(hana::length(mine))::value == decltype(hana::length(theirs))::value,
                "narrowing needs the same dimensions on both sides");
  hana::for_each(hana::zip(mine, theirs), [&](auto pair) {
    auto get_mine = hana::second(hana::at_c<0>(pair));
    auto get_theirs = hana::second(hana::at_c<1>(pair));
    narrow_field(get_mine(current), get_theirs(by));
  });
}

/// The value set of each dimension: positive and finite. Names the offending field.
template <class T>
constexpr bool valid_limit_value(T v) noexcept {
  if constexpr (std::is_floating_point_v<T>) return std::isfinite(v) && v > 0;
  else return v > 0;
}

/// The value a field holds, whatever its kind; nullopt for an absent request or an unset cap.
template <auto D, class T>
constexpr std::optional<T> value_of_field(const cap<D, T>& field) noexcept { return field.value; }
template <auto D, class T>
constexpr std::optional<T> value_of_field(const request<D, T>& field) noexcept { return field.value; }
template <auto D, class T>
constexpr std::optional<T> value_of_field(const std::optional<cap<D, T>>& field) noexcept {
  if (field) return field->value;
  return std::nullopt;
}

/// The dimension a field's type measures.
template <class Field>
inline constexpr auto dimension_of_type = Field::dimension;
template <class Field>
inline constexpr auto dimension_of_type<std::optional<Field>> = Field::dimension;

/// Every value present in `limits` (sandbox_limits, limit_caps or code_execution_limits) must be
/// positive and finite; the error names the first field that is not.
template <class Limits>
result<void> validate_limits(const Limits& limits) {
  namespace hana = boost::hana;
  std::string bad;
  hana::for_each(hana::accessors<Limits>(), [&](auto field) {
    const auto value = value_of_field(hana::second(field)(limits));
    if (value && !valid_limit_value(*value) && bad.empty()) bad = hana::to<char const*>(hana::first(field));
  });
  if (!bad.empty()) return fail_with(error_kind::invalid_limit, bad + " must be a positive, finite number");
  return success();
}

/// The dimension a field of a limits struct measures, by field name.
template <class Limits>
std::optional<limit_name> dimension_of_field(std::string_view field_name) {
  namespace hana = boost::hana;
  std::optional<limit_name> found;
  hana::for_each(hana::accessors<Limits>(), [&](auto field) {
    using field_type = std::remove_cvref_t<decltype(hana::second(field)(std::declval<Limits&>()))>;
    if (field_name == hana::to<char const*>(hana::first(field))) found = dimension_of_type<field_type>;
  });
  return found;
}

}  // namespace psych

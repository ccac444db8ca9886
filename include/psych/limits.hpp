#pragma once
// Limits and how they narrow.
//
// A deployment's limits are caps (always a value: the wall clock always
// applies); an agent's are requests (absent means "whatever the profile
// allows"). Every field's type names its dimension and carries its narrowing
// rule, and narrow() walks the fields generically: a new field whose type has
// no narrow_field overload does not compile, and two structs whose
// dimensions do not line up field by field do not compile either.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <boost/hana/accessors.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/second.hpp>
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


/// SandboxLimits: what a backend enforces. Defaults are the spec's.
struct sandbox_limits {
  cap<limit_name::cpu_seconds, double> cpu_seconds = 10.0;
  cap<limit_name::memory_bytes, std::uint64_t> address_space_bytes = std::uint64_t{512} << 20;
  cap<limit_name::file_size_bytes, std::uint64_t> file_size_bytes = std::uint64_t{10} << 20;
  cap<limit_name::process_count, std::uint64_t> process_count = 64;
  cap<limit_name::wall_seconds, double> wall_seconds = 30.0;
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

template <class Limits>
result<void> validate_limits(const Limits& limits) {
  namespace hana = boost::hana;
  std::string bad;
  hana::for_each(hana::accessors<Limits>(), [&](auto field) {
    const auto& value = hana::second(field)(limits).value;
    if constexpr (requires { value.has_value(); }) {
      if (value && !valid_limit_value(*value) && bad.empty()) bad = hana::to<char const*>(hana::first(field));
    } else {
      if (!valid_limit_value(value) && bad.empty()) bad = hana::to<char const*>(hana::first(field));
    }
  });
  if (!bad.empty()) return failure(error_kind::invalid_limit, bad + " must be a positive, finite number");
  return success();
}

/// The dimension a field of a limits struct measures, by field name.
template <class Limits>
std::optional<limit_name> dimension_of_field(std::string_view field_name) {
  namespace hana = boost::hana;
  std::optional<limit_name> found;
  hana::for_each(hana::accessors<Limits>(), [&](auto field) {
    using field_type = std::remove_cvref_t<decltype(hana::second(field)(std::declval<Limits&>()))>;
    if (field_name == hana::to<char const*>(hana::first(field))) found = field_type::dimension;
  });
  return found;
}

}  // namespace psych

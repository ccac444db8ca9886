#pragma once
// The JSON Schema of a C++ type, from the same field walk the codec decodes with (json.hpp), so a
// typed tool's published input schema and what its arguments are decoded into cannot disagree.
//
// Per C++ type (the codec's rules, json.hpp):
//  - struct: {"type":"object","properties":{...},"required":[...],"additionalProperties":false}.
//    "required" is the struct's `required_members`; every other member may be left out (it keeps
//    its C++ default). additionalProperties is false because the strict decode
//    (decode_json_strict) refuses unknown members. A struct may describe its members for the
//    model with
//      static constexpr std::array<std::pair<std::string_view, std::string_view>, N>
//          member_descriptions{{{"sku", "the stock-keeping unit"}, ...}};
//  - bool: boolean. Integers: integer (unsigned ones with "minimum":0). Floating point: number.
//  - std::string: string. A named enum: string with its "enum" spellings.
//  - std::optional<T>, cap<D,T>, request<D,T>: T's schema (null is accepted for an optional).
//  - std::vector<T>: array of T; std::array<T,N>: exactly N items. std::map<std::string,T>:
//    object whose values are T. json_text: {} (any value).
#include <string>
#include <string_view>

#include "psych/protocol/json.hpp"

namespace psych::protocol {

template <class T>
void write_json_schema(json_writer& w);

namespace detail {

inline void write_key(json_writer& w, std::string_view key) { write_string(w, key, /*as_key=*/true); }

template <class T>
constexpr std::string_view description_of_member(std::string_view name) {
  if constexpr (requires { T::member_descriptions; }) {
    for (const auto& [member, description] : T::member_descriptions)
      if (member == name) return description;
  }
  return {};
}

template <class T>
constexpr bool member_descriptions_exist() {
  if constexpr (requires { T::member_descriptions; }) {
    for (const auto& entry : T::member_descriptions)
      if (!has_member_named<T>(entry.first)) return false;
  }
  return true;
}

/// The members of T's schema object, without its braces, so a caller can add a description.
template <class T>
void write_schema_members(json_writer& w) {
  if constexpr (std::is_same_v<T, bool>) {
    write_key(w, "type");
    write_string(w, "boolean");
  } else if constexpr (std::is_integral_v<T>) {
    write_key(w, "type");
    write_string(w, "integer");
    if constexpr (std::is_unsigned_v<T>) {
      write_key(w, "minimum");
      w.Uint64(0);
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    write_key(w, "type");
    write_string(w, "number");
  } else if constexpr (std::is_same_v<T, std::string> || spelt<T>) {
    write_key(w, "type");
    write_string(w, "string");
  } else if constexpr (std::is_same_v<T, json_text>) {
    // any value: no constraint at all
  } else if constexpr (named_enum<T>) {
    write_key(w, "type");
    write_string(w, "string");
    write_key(w, "enum");
    w.StartArray();
    for (std::string_view spelling : enum_names<T>::spellings) write_string(w, spelling);
    w.EndArray();
  } else if constexpr (is_optional<T>::value || is_cap<T>::value || is_request<T>::value) {
    write_schema_members<typename T::value_type>(w);
  } else if constexpr (is_vector<T>::value || is_std_array<T>::value) {
    write_key(w, "type");
    write_string(w, "array");
    write_key(w, "items");
    write_json_schema<typename T::value_type>(w);
    if constexpr (is_std_array<T>::value) {
      for (const char* bound : {"minItems", "maxItems"}) {
        write_key(w, bound);
        w.Uint64(std::tuple_size_v<T>);
      }
    }
  } else if constexpr (is_string_map<T>::value) {
    write_key(w, "type");
    write_string(w, "object");
    write_key(w, "additionalProperties");
    write_json_schema<typename T::mapped_type>(w);
  } else if constexpr (is_struct<T>) {
    static_assert(required_members_exist<T>(), "required_members names a member the struct lacks");
    static_assert(member_descriptions_exist<T>(), "member_descriptions names a member the struct lacks");
    write_key(w, "type");
    write_string(w, "object");
    write_key(w, "properties");
    w.StartObject();
    hana::for_each(hana::accessors<T>(), [&](auto field) {
      constexpr std::string_view name = member_name(std::remove_cvref_t<decltype(hana::first(field))>{});
      using member = std::remove_cvref_t<decltype(hana::second(field)(std::declval<T&>()))>;
      write_key(w, name);
      w.StartObject();
      constexpr std::string_view description = description_of_member<T>(name);
      if constexpr (!description.empty()) {
        write_key(w, "description");
        write_string(w, description);
      }
      write_schema_members<member>(w);
      w.EndObject();
    });
    w.EndObject();
    if constexpr (requires { T::required_members; }) {
      write_key(w, "required");
      w.StartArray();
      for (std::string_view name : T::required_members) write_string(w, name);
      w.EndArray();
    }
    write_key(w, "additionalProperties");
    w.Bool(false);
  } else {
    static_assert(always_false<T>, "psych::protocol: no JSON Schema for this type");
  }
}

}  // namespace detail

/// Writes the schema of T (see the rules at the top of this header).
template <class T>
void write_json_schema(json_writer& w) {
  w.StartObject();
  detail::write_schema_members<T>(w);
  w.EndObject();
}

/// The schema of T as compact JSON.
template <class T>
std::string json_schema() {
  rapidjson::StringBuffer buffer;
  json_writer writer{buffer};
  write_json_schema<T>(writer);
  return std::string{buffer.GetString(), buffer.GetSize()};
}

}  // namespace psych::protocol

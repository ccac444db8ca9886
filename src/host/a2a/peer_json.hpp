#pragma once
// JSON from a peer that may be hostile: parsed without recursion after a depth check, so that
// neither `[[[[...` nor its writing back can exhaust the stack. The body's size is bounded before
// it gets here, by the egress client.
#include <cstddef>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "psych/result.hpp"

namespace psych::host {

/// Nesting deeper than this is refused: no card or task needs it.
inline constexpr std::size_t max_peer_json_depth = 64;

/// One JSON value, whole (no trailing bytes), at most max_peer_json_depth deep: json_too_deep or
/// json_malformed otherwise, with RapidJSON's reason and offset.
result<void> parse_peer_json(std::string_view text, rapidjson::Document& document);

/// The value as compact JSON text.
std::string json_of(const rapidjson::Value& value);

/// The member `name` of `object` when it is a string, else empty.
std::string_view string_member(const rapidjson::Value& object, const char* name);

}  // namespace psych::host

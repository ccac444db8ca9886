#include "a2a/peer_json.hpp"

#include <fmt/format.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace psych::host {
namespace {

/// The deepest nesting of arrays and objects, strings skipped: a linear scan, no recursion.
std::size_t nesting_of(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

}  // namespace

result<void> parse_peer_json(std::string_view text, rapidjson::Document& document) {
  if (nesting_of(text) > max_peer_json_depth)
    return fail_with(error_kind::json_too_deep, fmt::format("nested deeper than {}", max_peer_json_depth));
  document.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(text.data(), text.size());
  if (document.HasParseError())
    return fail_with(error_kind::json_malformed, fmt::format("{} at byte {}", rapidjson::GetParseError_En(document.GetParseError()),
                                                             document.GetErrorOffset()));
  return success();
}

std::string json_of(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer{buffer};
  value.Accept(writer);
  return {buffer.GetString(), buffer.GetSize()};
}

std::string_view string_member(const rapidjson::Value& object, const char* name) {
  if (!object.IsObject()) return {};
  const auto found = object.FindMember(name);
  if (found == object.MemberEnd() || !found->value.IsString()) return {};
  return {found->value.GetString(), found->value.GetStringLength()};
}

}  // namespace psych::host

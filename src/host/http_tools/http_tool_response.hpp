#pragma once
// What a program receives of an HTTP tool's response: its JSON value, its text, or its bytes in
// base64; or http_error for a status that is not 2xx. The credential the call sent is redacted from
// all of it, since a hostile server may echo what it was sent.
#include <string>
#include <string_view>

#include "psych/host/bindings.hpp"

namespace psych::host {

struct http_answer {
  unsigned status = 0;
  std::string_view content_type;
  std::string_view location;  ///< a 3xx's Location, shown when it was not followed
  std::string_view body;
};

/// `secret`: the credential's value as sent (empty when none).
tool_outcome outcome_of_answer(const http_answer& answer, std::string_view secret);

/// application/json, or any */*+json (parameters such as charset ignored), case-insensitively.
bool is_json_media_type(std::string_view content_type);

}  // namespace psych::host

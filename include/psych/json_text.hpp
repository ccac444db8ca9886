#pragma once
// A JSON value kept as its text, byte-exact: how a program's returned value
// travels, so that big integers and number spellings survive the trip.
// Parsing it is the user's choice of library; psych only guarantees the text
// was validated by the contract's codec.
#include <string>

namespace psych {

struct json_text {
  std::string text;
  friend bool operator==(const json_text&, const json_text&) = default;
};

}  // namespace psych

#pragma once
// What a terminal would obey in a piece of text: shared by the unit tests of
// the escaping and the end-to-end test of psych's readable report.
#include <cstddef>
#include <string>
#include <string_view>

#include "psych/utf8.hpp"

namespace psych::testing {

/// The first thing in `text` a terminal would act on (a C0 control other than
/// newline and tab, DEL, a C1 code point) or could decode as one (a byte
/// outside valid UTF-8), with its offset; empty when there is none.
inline std::string terminal_control_in(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const auto length = utf8::sequence_length(text, i);
    if (length == 0) return "a byte outside UTF-8 (" + std::to_string(lead) + ") at " + std::to_string(i);
    if (length == 1 && ((lead < 0x20 && lead != '\n' && lead != '\t') || lead == 0x7F))
      return "control byte " + std::to_string(lead) + " at " + std::to_string(i);
    if (length == 2 && lead == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0)
      return "C1 code point at " + std::to_string(i);
    i += length;
  }
  return {};
}

}  // namespace psych::testing

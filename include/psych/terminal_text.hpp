#pragma once
// Text a program made, made safe to print on an operator's terminal.
//
// A terminal obeys control characters: ESC opens sequences that write the
// clipboard (OSC 52), set the window title (OSC 0), plant hyperlinks (OSC 8)
// or clear the screen (CSI 2J); the C1 code point U+009B is a one-character
// CSI; BEL, backspace and carriage return ring or rewrite what was shown.
// So every control character is spelled out instead of sent: `\x1b`, `\x07`,
// `\x08`, `\r`, `\x7f`, and C1 code points as `\x80`..`\x9f`. Newline and tab
// are kept, so output still reads as lines. Bytes that are not UTF-8 are
// spelled the same way (`\xff`), so the terminal never decodes a byte the
// program chose; the result is always valid UTF-8.
//
// Backslashes are left as they are: this rendering is for a person reading a
// report (a program can print the four characters `\x1b`, and they look the
// same). The exact bytes are what machine-readable output (JSON) is for.
#include <cstddef>
#include <string>
#include <string_view>

#include "psych/utf8.hpp"

namespace psych {

namespace detail {

inline void append_hex_escape(std::string& out, unsigned value) {
  constexpr std::string_view digits = "0123456789abcdef";
  out.append("\\x");
  out.push_back(digits[(value >> 4) & 0xF]);
  out.push_back(digits[value & 0xF]);
}

}  // namespace detail

/// `text` with every C0 control but newline and tab, DEL, every C1 code point
/// and every byte outside a valid UTF-8 sequence escaped visibly.
inline std::string terminal_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = utf8::sequence_length(text, i);
    if (length == 0) {
      detail::append_hex_escape(out, lead);
      ++i;
      continue;
    }
    if (length == 1) {
      if (lead == '\r') out.append("\\r");
      else if ((lead < 0x20 && lead != '\n' && lead != '\t') || lead == 0x7F) detail::append_hex_escape(out, lead);
      else out.push_back(text[i]);
    } else if (lead == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      // U+0080..U+009F, encoded C2 80..C2 9F: the second byte is the code point.
      detail::append_hex_escape(out, static_cast<unsigned char>(text[i + 1]));
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

}  // namespace psych

#include "platform/windows/command_line.hpp"

#include "platform/windows/text.hpp"

namespace psych::windows {

namespace {

/// One argument quoted by the rules CommandLineToArgvW reverses: backslashes are literal unless
/// they precede a quote, so those before a quote (and before the closing quote) are doubled.
void append_quoted(std::wstring& line, const std::wstring& argument) {
  if (!argument.empty() && argument.find_first_of(L" \t\n\v\"") == std::wstring::npos) {
    line += argument;
    return;
  }
  line.push_back(L'"');
  std::size_t backslashes = 0;
  for (const wchar_t c : argument) {
    if (c == L'\\') {
      ++backslashes;
      continue;
    }
    line.append(c == L'"' ? backslashes * 2 + 1 : backslashes, L'\\');
    backslashes = 0;
    line.push_back(c);
  }
  line.append(backslashes * 2, L'\\');
  line.push_back(L'"');
}

}  // namespace

std::wstring command_line(const std::string& executable, const std::vector<std::string>& arguments) {
  std::wstring line;
  // argv[0] is split by simpler rules (no backslash escapes): quoted whole, and it cannot hold a quote
  // (the launcher's validate.cpp refuses one, as does the host's child_process_windows.cpp).
  line.append(L"\"").append(widen(executable)).append(L"\"");
  for (const auto& argument : arguments) {
    line.push_back(L' ');
    append_quoted(line, widen(argument));
  }
  return line;
}

}  // namespace psych::windows

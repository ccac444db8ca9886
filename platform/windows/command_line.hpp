#pragma once
// A Windows command line, which the child splits back into its arguments. Shared by the launcher
// (the interpreter's command line) and psych's host on Windows (the launcher's, an MCP server's).
#include <string>
#include <vector>

namespace psych::windows {

/// One command line that CommandLineToArgvW (and the C runtime) splits back into exactly
/// `executable` followed by `arguments`. `executable` cannot hold a quote (argv[0] has no escapes).
std::wstring command_line(const std::string& executable, const std::vector<std::string>& arguments);

}  // namespace psych::windows

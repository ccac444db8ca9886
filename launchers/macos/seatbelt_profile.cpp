#include "seatbelt_profile.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace psych::launcher {

namespace {

bool control_character(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

/// Appends `(subpath "…")` for each path, each on its own line.
setup_result<void> append_subpaths(std::string& out, const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    PSYCH_TRY(auto literal, sbpl_string(path));
    out.append("\n  (subpath ").append(literal).append(")");
  }
  return success();
}

}  // namespace

setup_result<std::string> sbpl_string(std::string_view path) {
  if (path.empty() || path.front() != '/')
    return fail(refusal(launch_stage::seatbelt, fmt::format("{:?} is not an absolute path", path)));
  if (std::any_of(path.begin(), path.end(), control_character))
    return fail(refusal(launch_stage::seatbelt, fmt::format("the path {:?} holds a control character", path)));
  std::string literal = "\"";
  for (const char c : path) {
    if (c == '"' || c == '\\') literal.push_back('\\');
    literal.push_back(c);
  }
  literal.push_back('"');
  return literal;
}

setup_result<std::string> seatbelt_profile(const seatbelt_terms& terms) {
  // The last rule that matches decides, so each narrowing follows what it narrows.
  std::string profile =
      "(version 1)\n"
      "(allow default)\n";
  if (!terms.read_denied.empty()) {
    profile.append("(deny file-read*");
    PSYCH_TRY(append_subpaths(profile, terms.read_denied));
    profile.append(")\n");
  }
  if (!terms.read_reopened.empty()) {
    profile.append("(allow file-read*");
    PSYCH_TRY(append_subpaths(profile, terms.read_reopened));
    profile.append(")\n");
  }
  // Writes: the workspace and the temp dir (reads there too, whatever was denied around them),
  // and the devices a program writes to harmlessly.
  profile.append("(deny file-write*)\n(allow file-read* file-write*");
  PSYCH_TRY(append_subpaths(profile, {terms.workspace, terms.tmp_dir}));
  profile.append(")\n(allow file-write*\n  (literal \"/dev/null\")\n  (literal \"/dev/zero\"))\n");
  if (!terms.network) profile.append("(deny network*)\n");
  return profile;
}

}  // namespace psych::launcher

#pragma once
// A read_tool_output pattern, compiled under the output bounds (psych/host/output_reader.hpp). One
// engine, RE2 (line_pattern_re2.cpp): linear in the line, whatever the pattern, so a model's
// pattern cannot stall the host. A build for a target that has no RE2 (the Windows tests' cross
// build: Debian has no RE2 for Windows) compiles line_pattern_none.cpp instead, which refuses
// every pattern by name; reading without a pattern is the same in both.
#include <memory>
#include <string>
#include <string_view>

#include "psych/host/output_reader.hpp"
#include "psych/result.hpp"

namespace psych {

class line_pattern {
 public:
  virtual ~line_pattern() = default;
  /// Whether the pattern matches anywhere in `line`. Invalid UTF-8 in it matches no character.
  [[nodiscard]] virtual bool found_in(std::string_view line) const = 0;
};

/// The pattern compiled, or `output_pattern_rejected` saying why ("invalid: ...", "too complex:
/// ..."). Its length is the caller's check (max_pattern_bytes), made before this.
result<std::unique_ptr<line_pattern>> compile_line_pattern(const std::string& pattern, const output_bounds& bounds);

}  // namespace psych

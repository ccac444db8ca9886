#include <re2/re2.h>

#include <fmt/format.h>

#include "bindings/line_pattern.hpp"

namespace psych {
namespace {

class re2_pattern final : public line_pattern {
 public:
  re2_pattern(const std::string& pattern, const RE2::Options& options)
      : compiled_(re2::StringPiece(pattern.data(), pattern.size()), options) {}
  [[nodiscard]] bool found_in(std::string_view line) const override {
    return compiled_.Match(re2::StringPiece(line.data(), line.size()), 0, line.size(), RE2::UNANCHORED, nullptr, 0);
  }
  [[nodiscard]] const RE2& compiled() const { return compiled_; }

 private:
  RE2 compiled_;
};

}  // namespace

/// RE2 runs in UTF-8 mode; invalid bytes of the output match no character (not even '.'), and
/// lines are searched as they are, unsanitized.
result<std::unique_ptr<line_pattern>> compile_line_pattern(const std::string& pattern, const output_bounds& bounds) {
  RE2::Options options;
  options.set_encoding(RE2::Options::EncodingUTF8);
  options.set_max_mem(bounds.max_pattern_memory);
  options.set_log_errors(false);
  auto compiled = std::make_unique<re2_pattern>(pattern, options);
  const RE2& engine = compiled->compiled();
  if (engine.ok()) return std::unique_ptr<line_pattern>(std::move(compiled));
  switch (engine.error_code()) {
    case RE2::ErrorPatternTooLarge:
    case RE2::ErrorRepeatSize:  // a counted repetition past RE2's limits: size, not syntax
      return fail_with(error_kind::output_pattern_rejected,
                     fmt::format("too complex: {} (memory budget {} bytes)", engine.error(), bounds.max_pattern_memory));
    default:
      return fail_with(error_kind::output_pattern_rejected, fmt::format("invalid: {}", engine.error()));
  }
}

}  // namespace psych

// For a build whose target has no RE2 (line_pattern.hpp): every pattern refused by name, never
// matched by a slower engine that a model's pattern could stall.
#include "bindings/line_pattern.hpp"

namespace psych {

result<std::unique_ptr<line_pattern>> compile_line_pattern(const std::string&, const output_bounds&) {
  return fail_with(error_kind::output_pattern_rejected,
                 "unsupported: this build of psych has no pattern engine (it was built without RE2); "
                 "read the output without a pattern");
}

}  // namespace psych

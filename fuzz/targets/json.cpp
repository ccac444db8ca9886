// The JSON codec (psych/protocol/json.hpp): one input decoded into one of a few representative
// types, chosen by its first byte, covering each decode rule (structs with required members,
// integers and doubles, strings, enums, optionals, caps and requests, vectors, fixed arrays,
// string maps, and json_text at the top and nested).
//
// Oracle: a decoded value encodes to JSON that decodes again to an equal encoding (the codec's
// output is canonical), and a failure is a named error.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "input.hpp"
#include "psych/json_text.hpp"
#include "psych/limits.hpp"
#include "psych/protocol/frames.hpp"
#include "psych/protocol/json.hpp"
#include "psych/reports.hpp"

namespace {

template <class T>
void round_trip(std::string_view text, psych::protocol::json_bounds bounds) {
  auto decoded = psych::protocol::decode_json<T>(text, bounds);
  if (!decoded) {
    (void)decoded.error().message();
    return;
  }
  const std::string first = psych::protocol::encode_json(decoded.value());
  auto again = psych::protocol::decode_json<T>(first);
  PSYCH_FUZZ_CHECK(static_cast<bool>(again));
  PSYCH_FUZZ_CHECK(psych::protocol::encode_json(again.value()) == first);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  psych::fuzz::input in{data, size};
  const std::uint8_t type = in.byte();
  // A small depth bound now and then, so json_too_deep is reached by short inputs too.
  const psych::protocol::json_bounds bounds{.max_depth = (type & 0x80) ? 4u : 64u};
  const std::string_view text = in.rest();
  using namespace psych;
  switch (type & 0x0f) {
    case 0: round_trip<json_text>(text, bounds); break;
    case 1: round_trip<sandbox_limits>(text, bounds); break;
    case 2: round_trip<child_report>(text, bounds); break;
    case 3: round_trip<mechanism_report>(text, bounds); break;
    case 4: round_trip<std::map<std::string, json_text>>(text, bounds); break;
    case 5: round_trip<std::vector<std::int64_t>>(text, bounds); break;
    case 6: round_trip<std::vector<std::uint8_t>>(text, bounds); break;
    case 7: round_trip<std::vector<double>>(text, bounds); break;
    case 8: round_trip<std::optional<std::string>>(text, bounds); break;
    case 9: round_trip<std::array<std::int32_t, 3>>(text, bounds); break;
    case 10: round_trip<protocol::program_error>(text, bounds); break;
    case 11: round_trip<std::vector<protocol::binding_info>>(text, bounds); break;
    case 12: round_trip<std::map<std::string, std::vector<std::optional<json_text>>>>(text, bounds); break;
    case 13: round_trip<protocol::result_handle>(text, bounds); break;
    case 14: round_trip<code_execution_limits>(text, bounds); break;
    default: round_trip<std::string>(text, bounds); break;
  }
  return 0;
}

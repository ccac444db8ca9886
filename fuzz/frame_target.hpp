#pragma once
// The body of a frame-codec target: decode one line as any of a protocol's frames and, when it
// decodes, check the codec's round trip. A protocol's target is then one line:
//
//   PSYCH_FUZZ_FRAMES(launch_frame, started_frame, ...)
//
// Oracle: encode(decode(line)) decodes again to a frame that encodes to the same bytes (the
// codec's output is canonical), and a failure is a named error, never a trap or a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "input.hpp"
#include "psych/protocol/json.hpp"

namespace psych::fuzz {

template <class... Frames>
void frame_round_trip(std::string_view line) {
  auto decoded = protocol::decode_frame<Frames...>(line);
  if (!decoded) {
    (void)decoded.error().message();  // building the message must be safe for any input
    return;
  }
  const std::string first = std::visit([](const auto& f) { return protocol::encode_frame(f); }, decoded.value());
  PSYCH_FUZZ_CHECK(!first.empty() && first.back() == '\n');
  auto again = protocol::decode_frame<Frames...>(std::string_view{first}.substr(0, first.size() - 1));
  PSYCH_FUZZ_CHECK(static_cast<bool>(again));
  PSYCH_FUZZ_CHECK(again.value().index() == decoded.value().index());
  const std::string second = std::visit([](const auto& f) { return protocol::encode_frame(f); }, again.value());
  PSYCH_FUZZ_CHECK(first == second);
}

}  // namespace psych::fuzz

#define PSYCH_FUZZ_FRAMES(...)                                                                \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {        \
    ::psych::fuzz::frame_round_trip<__VA_ARGS__>(                                             \
        std::string_view{reinterpret_cast<const char*>(data), size});                         \
    return 0;                                                                                 \
  }

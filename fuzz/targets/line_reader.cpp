// The bounded NDJSON splitter (psych/protocol/line_reader.hpp), fed the input in chunks of
// fuzzer-chosen sizes under small, fuzzer-chosen bounds so every ceiling is reachable.
//
// Oracle: the lines a reader delivers are exactly the input split on '\n' with empty lines
// dropped, in order; they stop early only with an error; a success leaves nothing pending.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "input.hpp"
#include "psych/protocol/line_reader.hpp"

namespace {

std::vector<std::string_view> reference_lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (true) {
    const std::size_t nl = text.find('\n');
    if (nl == std::string_view::npos) break;
    if (nl > 0) out.push_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  psych::fuzz::input in{data, size};
  const psych::protocol::stream_bounds bounds{
      .max_frame_bytes = 1 + in.byte() % 64u,
      .max_stream_bytes = 1 + in.byte() * 4u,
      .max_frames = 1 + in.byte() % 32u,
      .max_empty_lines = in.byte() % 8u,
  };
  const std::size_t chunk = 1 + in.byte() % 17u;  // odd sizes split lines at every position
  const std::string_view text = in.rest();
  const std::vector<std::string_view> expected = reference_lines(text);

  psych::protocol::line_reader reader{bounds};
  std::vector<std::string> got;
  bool failed = false;
  for (std::size_t at = 0; at < text.size() && !failed; at += chunk) {
    const auto fed = reader.feed(text.substr(at, chunk), [&](std::string_view line) {
      PSYCH_FUZZ_CHECK(!line.empty());
      PSYCH_FUZZ_CHECK(line.find('\n') == std::string_view::npos);
      PSYCH_FUZZ_CHECK(line.size() <= bounds.max_frame_bytes);
      got.emplace_back(line);
    });
    PSYCH_FUZZ_CHECK(reader.buffered_bytes() <= bounds.max_frame_bytes);
    failed = !fed;
    PSYCH_FUZZ_CHECK(failed == reader.poisoned());
  }
  const bool finished = static_cast<bool>(reader.finish());

  PSYCH_FUZZ_CHECK(got.size() <= expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) PSYCH_FUZZ_CHECK(got[i] == expected[i]);
  // The frame that breaks the bound is counted, then refused.
  PSYCH_FUZZ_CHECK(reader.frames() <= bounds.max_frames + (failed ? 1 : 0));
  PSYCH_FUZZ_CHECK(reader.stream_bytes() <= bounds.max_stream_bytes);
  if (!failed) {
    PSYCH_FUZZ_CHECK(got.size() == expected.size());  // nothing dropped without an error
    PSYCH_FUZZ_CHECK(finished == (text.empty() || text.back() == '\n'));
  } else {
    PSYCH_FUZZ_CHECK(!finished);  // a poisoned reader replays its error
  }
  return 0;
}

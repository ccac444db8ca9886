// Never throw, never crash, on any input: a deterministic mutation loop over
// valid frames, through the reader and the codec.
#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "helpers.hpp"

using namespace psych;
using namespace psych::protocol;
using namespace psych::protocol::testing;

namespace {

/// The errors the reader and the codec may answer with. Anything else, a
/// throw or a crash is a failure.
bool is_named_protocol_error(error_kind kind) {
  switch (kind) {
    case error_kind::frame_too_large:
    case error_kind::stream_too_large:
    case error_kind::too_many_frames:
    case error_kind::too_many_empty_lines:
    case error_kind::truncated_frame:
    case error_kind::json_invalid_utf8:
    case error_kind::json_duplicate_key:
    case error_kind::json_non_finite:
    case error_kind::json_too_deep:
    case error_kind::json_trailing_bytes:
    case error_kind::json_malformed:
    case error_kind::frame_missing_type:
    case error_kind::frame_unknown_type:
    case error_kind::frame_missing_member:
    case error_kind::frame_unknown_member:
    case error_kind::frame_wrong_kind:
    case error_kind::frame_bad_enum:
    case error_kind::frame_number_out_of_range:
      return true;
    default:
      return false;
  }
}

/// Tokens that steer mutations towards the interesting corners of the grammar.
const std::array<std::string, 34> dictionary{
    "{", "}", "[", "]", "\"", "\\", ",", ":", "null", "true", "NaN", "Infinity", "-Infinity",
    "1e999", "-", "0", "1.5", "\\u", "\\ud800", "\\udc00", "\\u0000", "\xFF", "\xC0\x80",
    "\xED\xA0\x80", "\xF0\x9F\x98", "\"type\":\"run\",", "\"type\":", "123456789012345678901234567890",
    "[[[[[[[[[[[[[[[[", "}}}}", "\"\":", "\t", "\n", std::string{"\0", 1},
};

class mutator {
 public:
  explicit mutator(std::uint64_t seed) : rng_(seed) {}

  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng_() % n); }

  std::string mutate(std::string text, const std::vector<std::string>& corpus) {
    const std::size_t rounds = 1 + below(4);
    for (std::size_t r = 0; r < rounds; ++r) {
      const std::size_t at = below(text.size() + 1);
      switch (below(10)) {
        case 0:  // flip a bit
          if (at < text.size()) text[at] = static_cast<char>(text[at] ^ (1 << below(8)));
          break;
        case 1:  // overwrite a byte
          if (at < text.size()) text[at] = static_cast<char>(below(256));
          break;
        case 2:  // insert a byte
          text.insert(at, 1, static_cast<char>(below(256)));
          break;
        case 3:  // delete a range
          text.erase(at, 1 + below(8));
          break;
        case 4: {  // duplicate a range
          const std::string piece = text.substr(at, 1 + below(16));
          text.insert(below(text.size() + 1), piece);
          break;
        }
        case 5:  // truncate
          text.resize(at);
          break;
        case 6:
        case 7:  // insert a token
          text.insert(at, dictionary[below(dictionary.size())]);
          break;
        case 8:  // swap two bytes
          if (!text.empty()) std::swap(text[below(text.size())], text[below(text.size())]);
          break;
        default: {  // splice another frame in
          const std::string& other = corpus[below(corpus.size())];
          text = text.substr(0, at) + other.substr(below(other.size() + 1));
          break;
        }
      }
    }
    return text;
  }

  std::string random_bytes() {
    std::string text(below(64), '\0');
    for (char& c : text) c = static_cast<char>(below(256));
    return text;
  }

 private:
  std::mt19937_64 rng_;
};

/// Decodes `line`; on success the value must re-encode to a fixed point.
/// Returns the error kind, or nullopt for a value.
std::optional<error_kind> check_line(std::string_view line, json_bounds bounds) {
  const auto decoded = decode_any(line, bounds);
  if (!decoded) {
    const error_kind kind = decoded.error().kind;
    if (!is_named_protocol_error(kind)) FAIL_CHECK("unexpected error ", decoded.error().message());
    return kind;
  }
  const std::string once = std::visit([](const auto& frame) { return encode_frame(frame); }, decoded.value());
  const auto again = decode_any(chomp(once));
  if (!again) {
    FAIL_CHECK("a decoded frame did not re-decode: ", again.error().message(), " for ", once);
    return std::nullopt;
  }
  const std::string twice = std::visit([](const auto& frame) { return encode_frame(frame); }, again.value());
  if (twice != once) FAIL_CHECK("encoding is not a fixed point: ", once, " vs ", twice);
  return std::nullopt;
}

}  // namespace

TEST_CASE("robustness: 10^5 mutations of valid frames never crash and always name an error") {
  std::vector<std::string> corpus;
  for (const std::string& line : sample_lines()) corpus.emplace_back(chomp(line));
  for (const std::string& line : contract_examples()) corpus.push_back(line);

  mutator m{0x5eed'1234'abcd'ef01ull};
  std::set<error_kind> seen;
  std::size_t values = 0;
  for (std::size_t i = 0; i < 100'000; ++i) {
    const std::string input =
        i % 10 == 9 ? m.random_bytes() : m.mutate(corpus[m.below(corpus.size())], corpus);
    // Now and then, tight bounds, so the bound checks are exercised too.
    const json_bounds bounds = i % 7 == 0 ? json_bounds{.max_bytes = 256, .max_depth = 3} : json_bounds{};
    const auto kind = check_line(input, bounds);
    if (kind) seen.insert(*kind);
    else ++values;

    if (i % 16 == 0) {  // the same bytes through a tightly bounded reader, in random chunks
      line_reader reader{stream_bounds{.max_frame_bytes = 512, .max_stream_bytes = 4096,
                                       .max_frames = 8, .max_empty_lines = 2}};
      result<void> fed = success();
      for (std::size_t at = 0; fed && at < input.size();) {
        const std::size_t n = 1 + m.below(64);
        fed = reader.feed(std::string_view{input}.substr(at, n), [&](std::string_view line) {
          (void)check_line(line, json_bounds{});
        });
        at += n;
      }
      const result<void> end = fed ? reader.finish() : fed;
      if (!end) CHECK(is_named_protocol_error(end.error().kind));
    }
  }
  MESSAGE("values: ", values, ", distinct error kinds: ", seen.size());
  CHECK(values > 0);
  // The loop reaches well past the trivial errors.
  for (error_kind kind : {error_kind::json_malformed, error_kind::json_invalid_utf8,
                          error_kind::json_duplicate_key, error_kind::json_non_finite,
                          error_kind::json_trailing_bytes, error_kind::json_too_deep,
                          error_kind::frame_too_large, error_kind::frame_missing_type,
                          error_kind::frame_unknown_type, error_kind::frame_wrong_kind})
    CHECK_MESSAGE(seen.count(kind) == 1, std::string{name_of(kind)});
}

// The JSON codec, type by type and error by error.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "helpers.hpp"

using namespace psych;
using namespace psych::protocol;
using psych::protocol::testing::expect_error;
using psych::protocol::testing::expect_value;
using psych::protocol::testing::same;
using psych::protocol::testing::traps;

namespace codec_test {

struct inner {
  std::int64_t n = 7;
  std::vector<std::int64_t> list;
};

struct outer {
  std::string name = "default";
  inner nested;
  std::optional<inner> maybe;
  std::array<std::int64_t, 2> pair{-1, -1};
  std::map<std::string, double> weights;
  std::vector<bool> flags;
  json_text raw;
};

/// A struct that opts in to required members.
struct strict {
  static constexpr std::array<std::string_view, 2> required_members{"id", "child"};
  std::int64_t id = 0;
  std::string note;
  struct child_t {
    static constexpr std::array<std::string_view, 1> required_members{"x"};
    std::int64_t x = 0;
  } child;
};

}  // namespace codec_test

BOOST_HANA_ADAPT_STRUCT(codec_test::inner, n, list);
BOOST_HANA_ADAPT_STRUCT(codec_test::outer, name, nested, maybe, pair, weights, flags, raw);
BOOST_HANA_ADAPT_STRUCT(codec_test::strict::child_t, x);
BOOST_HANA_ADAPT_STRUCT(codec_test::strict, id, note, child);

namespace {

template <class T>
T round_trip(const T& value) {
  const std::string text = encode_json(value);
  INFO(text);
  return expect_value(decode_json<T>(text));
}

template <class T>
void check_integer_limits() {
  for (T v : {std::numeric_limits<T>::min(), T{0}, T{1}, std::numeric_limits<T>::max()})
    CHECK(round_trip(v) == v);
}

}  // namespace

TEST_CASE("json: scalars round-trip exactly") {
  SUBCASE("bool") {
    CHECK(round_trip(true) == true);
    CHECK(round_trip(false) == false);
    CHECK(encode_json(true) == "true");
  }
  SUBCASE("integers of every width, at their limits") {
    check_integer_limits<std::int8_t>();
    check_integer_limits<std::uint8_t>();
    check_integer_limits<std::int16_t>();
    check_integer_limits<std::uint16_t>();
    check_integer_limits<std::int32_t>();
    check_integer_limits<std::uint32_t>();
    check_integer_limits<std::int64_t>();
    check_integer_limits<std::uint64_t>();
    CHECK(encode_json(std::numeric_limits<std::uint64_t>::max()) == "18446744073709551615");
    CHECK(encode_json(std::numeric_limits<std::int64_t>::min()) == "-9223372036854775808");
  }
  SUBCASE("doubles, in the shortest round-trip form") {
    for (double v : {0.0, -0.0, 0.1, 1.0 / 3.0, 1e300, -1e-300, 5e-324, 2.2250738585072014e-308,
                     std::numeric_limits<double>::max(), 123456789.125, 1e21, 9007199254740993.0})
      CHECK(same(round_trip(v), v));
    CHECK(encode_json(0.1) == "0.1");
    CHECK(encode_json(10.0) == "10.0");
    CHECK(encode_json(-0.0) == "-0.0");
  }
  SUBCASE("strings") {
    for (std::string v : {std::string{}, std::string{"plain"}, std::string{"quote \" backslash \\ slash /"},
                          std::string{"\x01\x1f\t\n\r\b\f"}, std::string{"nul \0 inside", 12},
                          std::string{"été 😀 \xE2\x80\xA8"}})
      CHECK(round_trip(v) == v);
    CHECK(encode_json(std::string{"a\nb"}) == R"("a\nb")");
    CHECK(encode_json(std::string{"é"}) == "\"é\"");  // raw UTF-8, not \u escapes
  }
}

TEST_CASE("json: integers are range-checked") {
  SUBCASE("fits") {
    CHECK(expect_value(decode_json<std::int64_t>("-9223372036854775808")) ==
          std::numeric_limits<std::int64_t>::min());
    CHECK(expect_value(decode_json<std::uint64_t>("18446744073709551615")) ==
          std::numeric_limits<std::uint64_t>::max());
    CHECK(expect_value(decode_json<std::uint8_t>("255")) == 255);
    CHECK(expect_value(decode_json<std::int64_t>("-0")) == 0);
  }
  SUBCASE("outside the member's type") {
    expect_error(decode_json<std::int64_t>("9223372036854775808"), error_kind::frame_number_out_of_range);
    expect_error(decode_json<std::uint64_t>("-1"), error_kind::frame_number_out_of_range);
    expect_error(decode_json<std::uint8_t>("256"), error_kind::frame_number_out_of_range);
    expect_error(decode_json<std::int8_t>("-129"), error_kind::frame_number_out_of_range);
    expect_error(decode_json<std::uint32_t>("4294967296"), error_kind::frame_number_out_of_range);
  }
  SUBCASE("outside 64 bits altogether") {
    const error e = expect_error(decode_json<std::int64_t>("123456789012345678901234567890"),
                                 error_kind::frame_number_out_of_range);
    CHECK(e.detail.find("123456789012345678901234567890") != std::string::npos);
    expect_error(decode_json<std::uint64_t>("18446744073709551616"), error_kind::frame_number_out_of_range);
    expect_error(decode_json<std::int64_t>("-9223372036854775809"), error_kind::frame_number_out_of_range);
  }
  SUBCASE("not an integer") {
    expect_error(decode_json<std::int64_t>("1.5"), error_kind::frame_wrong_kind);
    expect_error(decode_json<std::int64_t>("1.0"), error_kind::frame_wrong_kind);
    expect_error(decode_json<std::int64_t>("1e2"), error_kind::frame_wrong_kind);
    expect_error(decode_json<std::int64_t>("\"1\""), error_kind::frame_wrong_kind);
    expect_error(decode_json<std::int64_t>("true"), error_kind::frame_wrong_kind);
    expect_error(decode_json<std::int64_t>("null"), error_kind::frame_wrong_kind);
  }
}

TEST_CASE("json: floating point accepts integers and is range-checked") {
  CHECK(expect_value(decode_json<double>("3")) == 3.0);
  CHECK(expect_value(decode_json<double>("18446744073709551615")) == 18446744073709551615.0);
  CHECK(expect_value(decode_json<double>("123456789012345678901234567890")) == 1.2345678901234568e29);
  CHECK(expect_value(decode_json<double>("1e-400")) == 0.0);
  CHECK(expect_value(decode_json<float>("0.5")) == 0.5f);
  expect_error(decode_json<float>("1e39"), error_kind::frame_number_out_of_range);
  expect_error(decode_json<double>("\"0.5\""), error_kind::frame_wrong_kind);
}

TEST_CASE("json: enums travel as their spellings") {
  SUBCASE("known") {
    CHECK(encode_json(probe_outcome::connected) == "\"connected\"");
    CHECK(expect_value(decode_json<probe_outcome>("\"skipped\"")) == probe_outcome::skipped);
  }
  SUBCASE("unknown spelling") {
    const error e = expect_error(decode_json<probe_outcome>("\"Denied\""), error_kind::frame_bad_enum);
    CHECK(e.detail.find("denied, unreachable") != std::string::npos);
  }
  SUBCASE("not a string") { expect_error(decode_json<probe_outcome>("0"), error_kind::frame_wrong_kind); }
}

TEST_CASE("json: optional, cap and request") {
  using wall_cap = cap<limit_name::wall_seconds, double>;
  using wall_request = request<limit_name::wall_seconds, double>;
  SUBCASE("optional") {
    CHECK(encode_json(std::optional<std::int64_t>{}) == "null");
    CHECK(encode_json(std::optional<std::int64_t>{5}) == "5");
    CHECK(expect_value(decode_json<std::optional<std::int64_t>>("null")) == std::nullopt);
    CHECK(expect_value(decode_json<std::optional<std::int64_t>>("5")) == 5);
  }
  SUBCASE("cap is its value") {
    CHECK(encode_json(wall_cap{2.5}) == "2.5");
    CHECK(expect_value(decode_json<wall_cap>("2.5")).value == 2.5);
    expect_error(decode_json<wall_cap>("null"), error_kind::frame_wrong_kind);
  }
  SUBCASE("request: null is 'whatever the profile allows'") {
    CHECK(encode_json(wall_request{}) == "null");
    CHECK(encode_json(wall_request{4.0}) == "4.0");
    CHECK(expect_value(decode_json<wall_request>("null")).value == std::nullopt);
    CHECK(expect_value(decode_json<wall_request>("4")).value == 4.0);
  }
  SUBCASE("absent members of a struct") {
    const auto limits = expect_value(decode_json<code_execution_limits>(R"({"wall_seconds":3})"));
    CHECK(limits.wall_seconds.value == 3.0);
    CHECK(limits.cpu_seconds.value == std::nullopt);
    const auto s = expect_value(decode_json<codec_test::outer>(R"({"maybe":null})"));
    CHECK_FALSE(s.maybe.has_value());
  }
}

TEST_CASE("json: containers") {
  SUBCASE("vector") {
    CHECK(round_trip(std::vector<std::int64_t>{1, -2, 3}) == std::vector<std::int64_t>{1, -2, 3});
    CHECK(round_trip(std::vector<bool>{true, false}) == std::vector<bool>{true, false});
    CHECK(round_trip(std::vector<std::string>{}).empty());
    const error e = expect_error(decode_json<std::vector<std::int64_t>>("[1,2,\"x\"]"),
                                 error_kind::frame_wrong_kind);
    CHECK(e.detail.rfind("[2]: ", 0) == 0);
  }
  SUBCASE("std::array is an array of exactly N") {
    using pair = std::array<std::int64_t, 2>;
    CHECK(round_trip(pair{-1, 5}) == pair{-1, 5});
    expect_error(decode_json<pair>("[1]"), error_kind::frame_wrong_kind);
    expect_error(decode_json<pair>("[1,2,3]"), error_kind::frame_wrong_kind);
    expect_error(decode_json<pair>("{}"), error_kind::frame_wrong_kind);
  }
  SUBCASE("map<string, T> is an object") {
    const std::map<std::string, std::string> env{{"A", "1"}, {"É", "2"}, {"", "3"}};
    CHECK(round_trip(env) == env);
    const error e = expect_error(decode_json<std::map<std::string, std::int64_t>>(R"({"a":1,"b":[]})"),
                                 error_kind::frame_wrong_kind);
    CHECK(e.detail.rfind("b: ", 0) == 0);
  }
}

TEST_CASE("json: structs") {
  SUBCASE("round trip with every member set") {
    codec_test::outer v;
    v.name = "n";
    v.nested = {1, {2, 3}};
    v.maybe = codec_test::inner{4, {}};
    v.pair = {5, 6};
    v.weights = {{"w", 0.5}};
    v.flags = {true};
    v.raw = json_text{"[1, 2.50]"};
    const auto back = round_trip(v);
    CHECK(same(back, v));
    CHECK(encode_json(v) ==
          R"({"name":"n","nested":{"n":1,"list":[2,3]},"maybe":{"n":4,"list":[]},"pair":[5,6],)"
          R"("weights":{"w":0.5},"flags":[true],"raw":[1, 2.50]})");
  }
  SUBCASE("absent members keep their defaults, unknown members are ignored") {
    const auto v = expect_value(
        decode_json<codec_test::outer>(R"({"unknown":{"deep":[1,{"x":null}]},"nested":{"list":[9]}})"));
    CHECK(v.name == "default");
    CHECK(v.nested.n == 7);
    CHECK(v.nested.list == std::vector<std::int64_t>{9});
    CHECK(v.pair == std::array<std::int64_t, 2>{-1, -1});
  }
  SUBCASE("a struct must be an object") {
    expect_error(decode_json<codec_test::inner>("[]"), error_kind::frame_wrong_kind);
    expect_error(decode_json<codec_test::inner>("null"), error_kind::frame_wrong_kind);
  }
}

TEST_CASE("json: required members are refused when absent") {
  SUBCASE("present") {
    const auto v = expect_value(decode_json<codec_test::strict>(R"({"id":1,"child":{"x":2}})"));
    CHECK(v.id == 1);
    CHECK(v.child.x == 2);
  }
  SUBCASE("absent at the top") {
    const error e = expect_error(decode_json<codec_test::strict>(R"({"child":{"x":2}})"),
                                 error_kind::frame_missing_member);
    CHECK(e.detail == "id: required member is missing");
  }
  SUBCASE("absent in a nested struct") {
    const error e = expect_error(decode_json<codec_test::strict>(R"({"id":1,"child":{}})"),
                                 error_kind::frame_missing_member);
    CHECK(e.detail == "child.x: required member is missing");
  }
  SUBCASE("null counts as present") {
    expect_error(decode_json<codec_test::strict>(R"({"id":null,"child":{"x":2}})"),
                 error_kind::frame_wrong_kind);
  }
}

TEST_CASE("json: a member of the wrong kind is named by its path") {
  SUBCASE("nested member") {
    const error e = expect_error(decode_json<sandbox_limits>(R"({"wall_seconds":"30"})"),
                                 error_kind::frame_wrong_kind);
    CHECK(e.detail == "wall_seconds: expected a number, got a string");
  }
  SUBCASE("deep inside arrays and structs") {
    const error e = expect_error(
        decode_json<child_report>(R"({"rlimits":{"open_files":[256,"x"]}})"), error_kind::frame_wrong_kind);
    CHECK(e.detail == "rlimits.open_files[1]: expected an integer, got a string");
  }
  SUBCASE("enum inside a struct") {
    const error e = expect_error(decode_json<network_observation>(R"({"ipv6":{"outcome":"nope"}})"),
                                 error_kind::frame_bad_enum);
    CHECK(e.detail.rfind("ipv6.outcome: ", 0) == 0);
  }
}

TEST_CASE("json: json_text keeps the value's bytes exactly") {
  const std::vector<std::string> values{
      "123456789012345678901234567890",
      "-123456789012345678901234567890123456789",
      "1.0E+2",
      "-0",
      "0.10000000000000000000000001",
      "1e-7",
      "\"\\u00e9 \\ud83d\\ude00 \\/ é\"",
      "[1, [2, [3, {\"a\" : [ ]}]], {}]",
      "{\"z\":1,\"a\":{\"big\":18446744073709551616}}",
      "null",
      "true",
  };
  SUBCASE("as the whole document") {
    for (const std::string& v : values) CHECK(expect_value(decode_json<json_text>(v)).text == v);
    CHECK(expect_value(decode_json<json_text>(" \t\n 12 \r\n")).text == "12");
  }
  SUBCASE("as a member, at any depth") {
    for (const std::string& v : values) {
      const std::string doc = R"({"nested":{"list":[]},"raw":)" + v + R"(,"name":"x"})";
      CHECK(expect_value(decode_json<codec_test::outer>(doc)).raw.text == v);
      const std::string deeper = R"({"a":[{"raw":)" + v + "}]}";
      const auto m = expect_value(decode_json<std::map<std::string, std::vector<codec_test::outer>>>(deeper));
      CHECK(m.at("a").at(0).raw.text == v);
    }
  }
  SUBCASE("and is written back verbatim") {
    for (const std::string& v : values) CHECK(encode_json(json_text{v}) == v);
  }
  SUBCASE("an optional json_text reads null as nullopt") {
    CHECK_FALSE(expect_value(decode_json<std::optional<json_text>>("null")).has_value());
  }
}

TEST_CASE("json: the text is bounded before it is parsed") {
  const json_bounds bounds{.max_bytes = 10};
  CHECK(decode_json<json_text>("[1,2,3,45]", bounds));
  expect_error(decode_json<json_text>("[1,2,3,456]", bounds), error_kind::frame_too_large);
  expect_error(decode_json<json_text>("not json at all", bounds), error_kind::frame_too_large);
}

TEST_CASE("json: nesting depth is bounded, without recursion") {
  const auto nested = [](std::size_t depth, char open, char close) {
    std::string text;
    text.reserve(depth * 6);
    for (std::size_t i = 0; i < depth; ++i) text += open == '{' ? std::string{"{\"a\":"} : std::string{open};
    text += "0";
    text.append(depth, close);
    return text;
  };
  SUBCASE("exactly the bound passes, one more fails") {
    CHECK(decode_json<json_text>(nested(64, '[', ']')));
    expect_error(decode_json<json_text>(nested(65, '[', ']')), error_kind::json_too_deep);
    CHECK(decode_json<json_text>(nested(64, '{', '}')));
    expect_error(decode_json<json_text>(nested(65, '{', '}')), error_kind::json_too_deep);
  }
  SUBCASE("10^6 unclosed brackets") {
    expect_error(decode_json<json_text>(std::string(1'000'000, '[')), error_kind::json_too_deep);
    expect_error(decode_frame<run_frame>(std::string(1'000'000, '[')), error_kind::json_too_deep);
  }
  SUBCASE("10^6 levels are parsed without overflowing the stack when allowed") {
    const std::string deep = nested(1'000'000, '[', ']');
    const auto text = expect_value(decode_json<json_text>(deep, {.max_bytes = 1u << 30, .max_depth = 2'000'000}));
    CHECK(text.text == deep);
    const std::string deep_objects = nested(1'000'000, '{', '}');
    CHECK(decode_json<json_text>(deep_objects, {.max_bytes = 1u << 30, .max_depth = 2'000'000}));
  }
}

TEST_CASE("json: invalid UTF-8 is refused") {
  SUBCASE("raw bytes in a string") {
    for (std::string bad : {"\xFF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\xAF", "\xED\xA0\x80",
                            "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80", "\x80", "\xE2\x82", "\xF0\x9F\x98"}) {
      INFO(bad.size());
      expect_error(decode_json<std::string>("\"" + bad + "\""), error_kind::json_invalid_utf8);
      expect_error(decode_json<std::string>("\"" + bad), error_kind::json_invalid_utf8);  // at the very end
    }
  }
  SUBCASE("escapes that name a lone surrogate") {
    expect_error(decode_json<std::string>(R"("\udc00")"), error_kind::json_invalid_utf8);
    expect_error(decode_json<std::string>(R"("\ud800")"), error_kind::json_invalid_utf8);
    expect_error(decode_json<std::string>(R"("\ud800\u0041")"), error_kind::json_invalid_utf8);
    expect_error(decode_json<json_text>(R"({"k\udfff":1})"), error_kind::json_invalid_utf8);
  }
  SUBCASE("valid UTF-8 in all its lengths passes") {
    const std::string text = "\"A \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF \\ud83d\\ude00\"";
    CHECK(expect_value(decode_json<std::string>(text)) ==
          "A \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF \xF0\x9F\x98\x80");
  }
}

TEST_CASE("json: duplicate keys are refused") {
  SUBCASE("in the top object") {
    expect_error(decode_json<json_text>(R"({"a":1,"b":2,"a":3})"), error_kind::json_duplicate_key);
  }
  SUBCASE("in a nested object, even under an unknown member") {
    expect_error(decode_json<codec_test::inner>(R"({"x":[{"k":1,"k":1}]})"), error_kind::json_duplicate_key);
  }
  SUBCASE("spelled differently but equal once unescaped") {
    expect_error(decode_json<json_text>(R"({"a":1,"\u0061":2})"), error_kind::json_duplicate_key);
  }
  SUBCASE("in a large object (hashed) and not across sibling objects") {
    std::string big = "{";
    for (int i = 0; i < 1000; ++i) big += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
    CHECK(decode_json<json_text>(big + "\"last\":0}"));
    expect_error(decode_json<json_text>(big + "\"k500\":0}"), error_kind::json_duplicate_key);
    CHECK(decode_json<json_text>(R"([{"a":1},{"a":2}])"));
    CHECK(decode_json<json_text>(R"({"a":{"a":{"a":1}}})"));
  }
}

TEST_CASE("json: NaN and infinities are refused") {
  for (const char* text : {"NaN", "Infinity", "-Infinity", "Inf", "-Inf", "1e999", "-1e999", "[1,NaN]",
                           "{\"wall_seconds\":Infinity}"}) {
    INFO(text);
    expect_error(decode_json<json_text>(text), error_kind::json_non_finite);
  }
  expect_error(decode_json<double>("1e309"), error_kind::json_non_finite);
  expect_error(decode_json<json_text>("nan"), error_kind::json_malformed);  // not even a token
}

TEST_CASE("json: bytes after the value are refused") {
  for (std::string text : {std::string{"{} x"}, std::string{"{}{}"}, std::string{"1 2"},
                           std::string{"{}\0", 3}, std::string{"[] ]"}, std::string{"\"a\"\"b\""},
                           std::string{"01"}}) {  // "0", then a stray "1"
    INFO(text);
    expect_error(decode_json<json_text>(text), error_kind::json_trailing_bytes);
  }
  CHECK(decode_json<json_text>("{} \t\r\n"));
}

TEST_CASE("json: anything else malformed is json_malformed, with RapidJSON's words and the offset") {
  for (std::string text : {std::string{}, std::string{" "}, std::string{"{"}, std::string{"[1,]"},
                           std::string{"{\"a\"}"}, std::string{"{\"a\":1,}"}, std::string{"tru"},
                           std::string{"'a'"}, std::string{"{a:1}"}, std::string{"[01]"}, std::string{"1."},
                           std::string{"\"\\x\""}, std::string{"\"a"}, std::string{"/* */{}"},
                           std::string{"\"tab\there\""}, std::string{"\0{}", 3}, std::string{"\xEF\xBB\xBF{}"}}) {
    INFO(text);
    const error e = expect_error(decode_json<json_text>(text), error_kind::json_malformed);
    CHECK(e.detail.find("(at byte ") != std::string::npos);
  }
}

TEST_CASE("json: encoding") {
  SUBCASE("invalid UTF-8 in a string becomes U+FFFD per maximal subpart") {
    const std::string fffd = "\xEF\xBF\xBD";
    const std::vector<std::pair<std::string, std::string>> cases{
        {"a\xFF" "b", "a" + fffd + "b"},
        {"\xC0\x80", fffd + fffd},                      // overlong: two lone bytes
        {"\xE2\x82" "x", fffd + "x"},                   // truncated 3-byte sequence: one subpart
        {"\xF0\x9F\x98", fffd},                         // truncated at the end
        {"\xED\xA0\x80", fffd + fffd + fffd},           // encoded surrogate
        {"\xF4\x90\x80\x80", fffd + fffd + fffd + fffd},  // beyond U+10FFFF
        {"ok \xE2\x82\xAC", "ok \xE2\x82\xAC"},         // valid: untouched
    };
    for (const auto& [input, repaired] : cases) {
      const std::string encoded = encode_json(input);
      CHECK(encoded == "\"" + repaired + "\"");
      CHECK(expect_value(decode_json<std::string>(encoded)) == repaired);
    }
    const std::map<std::string, std::int64_t> keyed{{"k\xFF", 1}};
    CHECK(encode_json(keyed) == "{\"k" + fffd + "\":1}");
  }
  SUBCASE("a frame is one compact line, type first") {
    const std::string line = encode_frame(abort_frame{"why"});
    CHECK(line == "{\"type\":\"abort\",\"reason\":\"why\"}\n");
  }
  SUBCASE("a json_text with newlines stays on one line") {
    const std::string line = encode_frame(done_frame{true, json_text{"{\n  \"a\": [1,\r\n 2]\n}"}, std::nullopt});
    CHECK(line == "{\"type\":\"done\",\"ok\":true,\"value\":{   \"a\": [1,   2] },\"error\":null}\n");
  }
  SUBCASE("a caller's bug traps") {
    CHECK(traps([] { (void)encode_json(std::numeric_limits<double>::quiet_NaN()); }));
    CHECK(traps([] { (void)encode_json(-std::numeric_limits<double>::infinity()); }));
    CHECK(traps([] { (void)encode_json(static_cast<probe_outcome>(99)); }));
    CHECK(traps([] { (void)encode_json(json_text{""}); }));
    CHECK(traps([] { (void)encode_json(json_text{"{\"a\":1}{}"}); }));
    CHECK(traps([] { (void)encode_json(json_text{"[NaN]"}); }));
    CHECK_FALSE(traps([] { (void)encode_json(json_text{"[1]"}); }));
  }
}

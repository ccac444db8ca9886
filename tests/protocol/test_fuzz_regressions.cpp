// Inputs the fuzzers (fuzz/, docs/fuzzing.md) found, each fed to the code path that broke, so the
// defect cannot come back unnoticed. The fuzzers run under ASan+UBSan; these run in every build.
#include <cmath>
#include <cstdint>
#include <string>

#include "helpers.hpp"

using namespace psych;
using namespace psych::protocol;

// fuzz_frames, input "0e-324\"ca0\"\x7f": RapidJSON 1.1.0's full-precision conversion normalises a
// zero significand with clz(0) and returned garbage for a zero with a large negative exponent.
TEST_CASE("a zero written with a large negative exponent decodes as zero") {
  for (const char* text : {"0e-324", "0.0e-324", "0e-300", "0.000e-330", "0E-1000", "0e+0", "0.0"}) {
    CAPTURE(text);
    const auto d = decode_json<double>(text);
    REQUIRE(d);
    CHECK(d.value() == 0.0);
    CHECK_FALSE(std::signbit(d.value()));
  }
  SUBCASE("its sign is kept") {
    const auto d = decode_json<double>("-0e-324");
    REQUIRE(d);
    CHECK(d.value() == 0.0);
    CHECK(std::signbit(d.value()));
  }
  SUBCASE("inside a frame") {
    const auto frame = decode_frame<exit_frame>(R"({"type":"exit","exit_code":0,"user_seconds":0e-300,)"
                                                R"("wall_seconds":-0e-324})");
    REQUIRE(frame);
    CHECK(std::get<exit_frame>(frame.value()).user_seconds == 0.0);
    CHECK(std::get<exit_frame>(frame.value()).wall_seconds == 0.0);
  }
  SUBCASE("a json_text keeps the spelling") {
    const auto raw = decode_json<json_text>("[0e-324]");
    REQUIRE(raw);
    CHECK(raw.value().text == "[0e-324]");
  }
  SUBCASE("a nonzero significand is untouched") {
    const auto d = decode_json<double>("1e-320");
    REQUIRE(d);
    CHECK(d.value() > 0.0);
    CHECK(d.value() == 1e-320);
  }
}

// fuzz_frames, input "184467440737095516158l\"tool\"...": a significand of 2^64 - 1 rounded up by
// the next digit wrapped to zero inside RapidJSON 1.1.0's full-precision conversion, and the
// number decoded as -2.0e+264. Numbers are now converted from their spelling by std::from_chars.
TEST_CASE("a number whose first twenty digits round past 2^64 decodes correctly rounded") {
  const struct {
    const char* text;
    double expected;
  } samples[] = {
      {"184467440737095516158", 184467440737095516158.0},
      {"18446744073709551615.9", 18446744073709551615.9},
      {"0.184467440737095516159", 0.184467440737095516159},
      {"-184467440737095516158e3", -184467440737095516158e3},
      {"1844674407370955161599e-5", 1844674407370955161599e-5},
  };
  for (const auto& sample : samples) {
    CAPTURE(sample.text);
    const auto d = decode_json<double>(sample.text);
    REQUIRE(d);
    CHECK(d.value() == sample.expected);
  }
  SUBCASE("an integer member still says it is out of range") {
    const auto n = decode_json<std::int64_t>("184467440737095516158");
    REQUIRE_FALSE(n);
    CHECK(n.error().kind == error_kind::frame_number_out_of_range);
  }
  SUBCASE("underflow is zero, overflow is refused") {
    const auto tiny = decode_json<double>("-1e-400");
    REQUIRE(tiny);
    CHECK(tiny.value() == 0.0);
    CHECK(std::signbit(tiny.value()));
    const auto denormal = decode_json<double>("5e-324");
    REQUIRE(denormal);
    CHECK(denormal.value() > 0.0);
    const auto huge = decode_json<double>("1.8e308");
    REQUIRE_FALSE(huge);
    CHECK(huge.error().kind == error_kind::json_non_finite);
  }
}

// The frames of docs/contract.md through the codec.
#include <string>
#include <variant>

#include "helpers.hpp"

using namespace psych;
using namespace psych::protocol;
using namespace psych::protocol::testing;

namespace frames_test {

/// A frame that opts in to required members, to show decode_frame honours them.
struct strict_frame {
  static constexpr std::string_view type = "strict";
  static constexpr std::array<std::string_view, 1> required_members{"token"};
  std::string token;
};

}  // namespace frames_test

BOOST_HANA_ADAPT_STRUCT(frames_test::strict_frame, token);

namespace {

/// Encodes, decodes through the whole frame set, and checks every field came back.
template <class Frame>
void check_round_trip(const Frame& frame) {
  const std::string line = encode_frame(frame);
  INFO(line);
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  CHECK(line.rfind(std::string{"{\"type\":\""} + std::string{Frame::type} + "\",", 0) == 0);
  const auto decoded = expect_value(decode_any(chomp(line)));
  REQUIRE(std::holds_alternative<Frame>(decoded));
  CHECK(same(std::get<Frame>(decoded), frame));
  CHECK(encode_frame(std::get<Frame>(decoded)) == line);
}

}  // namespace

TEST_CASE("frames: every frame round-trips with every field set") {
  SUBCASE("launch") { check_round_trip(sample_launch()); }
  SUBCASE("launch without run_as") {
    launch_frame f = sample_launch();
    f.run_as.reset();
    check_round_trip(f);
  }
  SUBCASE("cancel") { check_round_trip(sample_cancel()); }
  SUBCASE("started") { check_round_trip(sample_started()); }
  SUBCASE("error") { check_round_trip(sample_launch_error()); }
  SUBCASE("exit") { check_round_trip(sample_exit()); }
  SUBCASE("hello") { check_round_trip(sample_hello()); }
  SUBCASE("done, ok") { check_round_trip(sample_done_ok()); }
  SUBCASE("done, failed") { check_round_trip(sample_done_failed()); }
  SUBCASE("run") { check_round_trip(sample_run()); }
  SUBCASE("abort") { check_round_trip(sample_abort()); }
  SUBCASE("a prepared launch, and its narrowing (docs/pools.md)") {
    launch_frame prepared = sample_launch();
    prepared.prepared = true;
    check_round_trip(prepared);
    narrow_frame narrow;
    narrow.limits.cpu_seconds = 2.5;
    narrow.limits.process_count = 9;
    check_round_trip(narrow);
    const narrowed_frame narrowed{{.cpu_seconds = 3, .address_space_bytes = 1 << 26, .file_size_bytes = 1 << 20,
                                   .process_count = 10, .open_files = 256, .core_bytes = 0}};
    check_round_trip(narrowed);
    check_round_trip(lower_limits_frame{narrowed.rlimits});
    lowered_frame lowered;
    lowered.rlimits.cpu_seconds = {3, 4};
    lowered.cgroup_memory_limit = 1 << 26;
    lowered.cgroup_pids_limit = 10;
    check_round_trip(lowered);
  }
}

TEST_CASE("frames: the examples of the contract decode") {
  const auto examples = contract_examples();
  for (const std::string& example : examples) {
    INFO(example);
    CHECK(decode_any(example));
  }
  const auto launch = std::get<launch_frame>(expect_value(decode_any(examples[0])));
  CHECK(launch.limits.address_space_bytes.value == 536870912u);
  CHECK(launch.environment.at("PYTHONDONTWRITEBYTECODE") == "1");
  REQUIRE(launch.run_as.has_value());
  CHECK(launch.run_as->uid == 1500000);
  const auto hello = std::get<hello_frame>(expect_value(decode_any(examples[5])));
  CHECK(hello.report.rlimits.cpu_seconds == rlimit_pair{10, 11});
  CHECK(hello.report.network.ipv6.outcome == probe_outcome::denied);
  const auto done = std::get<done_frame>(expect_value(decode_any(examples[8])));
  REQUIRE(done.value.has_value());
  CHECK(done.value->text == R"({"any":["JSON",1,2.50,null]})");
}

TEST_CASE("frames: decode_frame names what is wrong with a frame") {
  SUBCASE("not an object") {
    for (const char* line : {"[]", "\"launch\"", "1", "null", "true"})
      expect_error(decode_any(line), error_kind::frame_missing_type);
  }
  SUBCASE("no type, or a type that is not a string") {
    expect_error(decode_any(R"({"reason":"x"})"), error_kind::frame_missing_type);
    expect_error(decode_any(R"({"type":1})"), error_kind::frame_missing_type);
    expect_error(decode_any(R"({"type":null})"), error_kind::frame_missing_type);
    expect_error(decode_any(R"({"type":["run"]})"), error_kind::frame_missing_type);
  }
  SUBCASE("a type this channel does not carry") {
    expect_error(decode_any(R"({"type":"invoke"})"), error_kind::frame_unknown_type);
    expect_error(decode_any(R"({"type":"Run"})"), error_kind::frame_unknown_type);
    const error e = expect_error(decode_frame<hello_frame, done_frame>(R"({"type":"launch"})"),
                                 error_kind::frame_unknown_type);
    CHECK(e.detail.find("hello, done") != std::string::npos);
  }
  SUBCASE("a member of the wrong kind, named by its path") {
    const error e = expect_error(decode_any(R"({"type":"launch","version":1,"token":"ab","limits":{"wall_seconds":"30"}})"),
                                 error_kind::frame_wrong_kind);
    CHECK(e.detail.rfind("limits.wall_seconds: ", 0) == 0);
    expect_error(decode_any(R"({"type":"done","ok":"yes"})"), error_kind::frame_wrong_kind);
    expect_error(decode_any(R"({"type":"hello","token":"ab","report":{"groups":{}}})"), error_kind::frame_wrong_kind);
  }
  SUBCASE("an unknown enum spelling") {
    const error e = expect_error(decode_any(R"({"type":"launch","version":1,"token":"ab","isolation":"vm"})"),
                                 error_kind::frame_bad_enum);
    CHECK(e.detail.rfind("isolation: ", 0) == 0);
    expect_error(decode_any(R"({"type":"done","ok":false,"error":{"kind":"panic"}})"), error_kind::frame_bad_enum);
  }
  SUBCASE("a number out of range") {
    expect_error(decode_any(R"({"type":"started","pid":9223372036854775808,"mechanisms":{}})"),
                 error_kind::frame_number_out_of_range);
  }
  SUBCASE("a missing required member") {
    expect_error(decode_any(R"({"type":"launch","token":"ab"})"), error_kind::frame_missing_member);
    expect_error(decode_any(R"({"type":"hello","report":{}})"), error_kind::frame_missing_member);
    expect_error(decode_any(R"({"type":"done"})"), error_kind::frame_missing_member);
    expect_error(decode_frame<frames_test::strict_frame>(R"({"type":"strict"})"),
                 error_kind::frame_missing_member);
    CHECK(decode_frame<frames_test::strict_frame>(R"({"type":"strict","token":""})"));
  }
  SUBCASE("JSON errors come first") {
    expect_error(decode_any(R"({"type":"run","type":"abort"})"), error_kind::json_duplicate_key);
    expect_error(decode_any(R"({"type":"run"} {)"), error_kind::json_trailing_bytes);
    expect_error(decode_any(R"({"type":"exit","wall_seconds":NaN})"), error_kind::json_non_finite);
    expect_error(decode_any(std::string(100, ' '), {.max_bytes = 99}), error_kind::frame_too_large);
  }
}

TEST_CASE("frames: the exit report's signal is a number and its limit a limit's name") {
  SUBCASE("typed values decode as such") {
    const auto exit = std::get<exit_frame>(expect_value(
        decode_any(R"({"type":"exit","exit_code":-1,"signal":31,"limit_hit":"cpu_seconds"})")));
    CHECK(exit.signal == 31);
    CHECK(exit.limit_hit == limit_name::cpu_seconds);
  }
  SUBCASE("null and absent both mean none") {
    for (const char* line : {R"({"type":"exit","exit_code":0,"signal":null,"limit_hit":null})",
                             R"({"type":"exit","exit_code":0})"}) {
      INFO(line);
      const auto exit = std::get<exit_frame>(expect_value(decode_any(line)));
      CHECK_FALSE(exit.signal);
      CHECK_FALSE(exit.limit_hit);
    }
  }
  SUBCASE("a signal's name, or a fraction, is not a signal") {
    const error e = expect_error(decode_any(R"({"type":"exit","exit_code":-1,"signal":"SIGKILL"})"),
                                 error_kind::frame_wrong_kind);
    CHECK(e.detail.rfind("signal: ", 0) == 0);
    expect_error(decode_any(R"({"type":"exit","exit_code":-1,"signal":9.5})"), error_kind::frame_wrong_kind);
  }
  SUBCASE("a limit no limit_name spells, the empty string included, is refused") {
    for (const char* line : {R"({"type":"exit","exit_code":-1,"limit_hit":"memory"})",
                             R"({"type":"exit","exit_code":-1,"limit_hit":""})"}) {
      INFO(line);
      const error e = expect_error(decode_any(line), error_kind::frame_bad_enum);
      CHECK(e.detail.rfind("limit_hit: ", 0) == 0);
    }
  }
}

TEST_CASE("frames: a stage or a cancel's reason this side does not have is read and kept as it came") {
  SUBCASE("a known spelling is its member") {
    const auto error = std::get<launch_error_frame>(expect_value(decode_any(R"({"type":"error","stage":"landlock"})")));
    CHECK(error.stage == launch_stage::landlock);
    CHECK(std::get<cancel_frame>(expect_value(decode_any(R"({"type":"cancel","reason":"timeout"})"))).reason ==
          cancel_reason::timeout);
  }
  SUBCASE("another spelling is no member, and encodes back as it came") {
    const std::string line = R"({"type":"error","stage":"a later stage","syscall":"","error_number":0,"message":""})";
    const auto error = std::get<launch_error_frame>(expect_value(decode_any(line)));
    CHECK_FALSE(error.stage.known());
    CHECK(error.stage.spelling() == "a later stage");
    CHECK(encode_frame(error) == line + "\n");
    const auto cancel = std::get<cancel_frame>(expect_value(decode_any(R"({"type":"cancel","reason":"later"})")));
    CHECK_FALSE(cancel.reason == cancel_reason::timeout);
  }
  SUBCASE("absent is the empty spelling, as an absent string was") {
    const auto error = std::get<launch_error_frame>(expect_value(decode_any(R"({"type":"error"})")));
    CHECK(error.stage.spelling().empty());
    CHECK_FALSE(error.stage.known());
  }
  SUBCASE("it is still a string") {
    expect_error(decode_any(R"({"type":"error","stage":3})"), error_kind::frame_wrong_kind);
  }
}

TEST_CASE("frames: unknown members are ignored and absent ones keep their defaults") {
  const auto v = expect_value(decode_any(R"({"added_later":["x"],"type":"run","program":"p","later":{"a":1}})"));
  const run_frame& run = std::get<run_frame>(v);
  CHECK(run.program == "p");
  CHECK(run.filename == "<program>");
}

TEST_CASE("frames: a line that ends in a carriage return decodes") {
  CHECK(decode_any("{\"type\":\"cancel\",\"reason\":\"timeout\"}\r"));
}

TEST_CASE("frames: lines from the reader feed the codec") {
  std::string stream;
  for (const std::string& line : sample_lines()) stream += line;
  line_reader reader{stream_bounds{.max_frame_bytes = 1u << 20}};
  std::size_t decoded = 0;
  for (std::size_t at = 0; at < stream.size(); at += 7) {
    REQUIRE(reader.feed(std::string_view{stream}.substr(at, 7), [&](std::string_view line) -> result<void> {
      PSYCH_TRY(decode_any(line));
      ++decoded;
      return success();
    }));
  }
  CHECK(reader.finish());
  CHECK(decoded == sample_lines().size());
}

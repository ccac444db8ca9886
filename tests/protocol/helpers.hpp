#pragma once
// Shared checks and samples for the protocol tests.
#include <bit>
#include <csignal>
#include <string>
#include <string_view>
#include <variant>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "psych/protocol/frames.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"

namespace doctest {
template <>
struct StringMaker<psych::error_kind> {
  static String convert(psych::error_kind kind) { return std::string{psych::name_of(kind)}.c_str(); }
};
}  // namespace doctest

namespace psych::protocol::testing {

/// Every frame of frames.hpp, whatever its channel.
template <class... Frames>
struct frame_set {
  using variant = std::variant<Frames...>;
  static result<variant> decode(std::string_view line, json_bounds bounds = {}) {
    return decode_frame<Frames...>(line, bounds);
  }
};
using all_frames = frame_set<launch_frame, cancel_frame, started_frame, launch_error_frame,
                             exit_frame, hello_frame, done_frame, run_frame, abort_frame, call_frame,
                             result_frame, narrow_frame, narrowed_frame, lower_limits_frame, lowered_frame>;

inline result<all_frames::variant> decode_any(std::string_view line, json_bounds bounds = {}) {
  return all_frames::decode(line, bounds);
}

/// The line without its '\n'.
inline std::string_view chomp(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  return line;
}

/// Checks that `r` failed with exactly `kind`; returns the error for further checks.
template <class T>
error expect_error(const result<T>& r, error_kind kind) {
  REQUIRE_MESSAGE(!r.has_value(), "expected ", std::string{name_of(kind)}, ", got a value");
  INFO(r.error().message());
  CHECK(r.error().kind == kind);
  return r.error();
}

/// Checks that `r` holds a value (printing the error if not) and returns it.
template <class T>
T expect_value(result<T> r) {
  if (!r) FAIL_CHECK(r.error().message());
  REQUIRE(r.has_value());
  return std::move(r).value();
}

/// Structural equality through the same field walk the codec uses (frames
/// have no operator==). Doubles compare bit for bit: the round trip is exact.
template <class T>
bool same(const T& a, const T& b) {
  namespace d = detail;
  namespace hana = boost::hana;
  if constexpr (d::is_struct<T>) {
    bool equal = true;
    hana::for_each(hana::accessors<T>(), [&](auto field) {
      equal = equal && same(hana::second(field)(a), hana::second(field)(b));
    });
    return equal;
  } else if constexpr (d::is_optional<T>::value) {
    return a.has_value() == b.has_value() && (!a || same(*a, *b));
  } else if constexpr (d::is_cap<T>::value || d::is_request<T>::value) {
    return same(a.value, b.value);
  } else if constexpr (d::is_vector<T>::value || d::is_std_array<T>::value) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same(a[i], b[i])) return false;
    return true;
  } else if constexpr (d::is_string_map<T>::value) {
    if (a.size() != b.size()) return false;
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
      if (ia->first != ib->first || !same(ia->second, ib->second)) return false;
    return true;
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::bit_cast<std::uint64_t>(static_cast<double>(a)) ==
           std::bit_cast<std::uint64_t>(static_cast<double>(b));
  } else {
    return a == b;
  }
}

/// Runs `fn` in a forked child and checks it trapped (SIGABRT): how the codec
/// answers a caller's bug.
template <class Fn>
bool traps(Fn fn) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGABRT, SIG_DFL);  // not doctest's crash handler: the parent judges
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 2);
    fn();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

// ---- every frame, every field set to something other than its default ----

inline launch_frame sample_launch() {
  launch_frame f;
  f.version = 1;
  f.token = "0123456789abcdef0123456789abcdef";
  f.isolation = isolation_level::isolated;
  f.limits.cpu_seconds = 2.5;
  f.limits.address_space_bytes = std::uint64_t{1} << 33;
  f.limits.file_size_bytes = 12345;
  f.limits.process_count = 7;
  f.limits.wall_seconds = 0.1;
  f.network = network_access::unrestricted;
  f.environment = {{"HOME", "/tmp/psych-x/workspace"}, {"LANG", "C.UTF-8"}, {"ÉTÉ", "çà \"q\" \\ \n"}};
  f.interpreter = "/usr/bin/python3.11";
  f.workspace = "/tmp/psych-x/workspace";
  f.tmp_dir = "/tmp/psych-x/tmp";
  f.canary = "/tmp/psych-canary-x/canary";
  f.probe = {41234, 41235};
  f.run_as = identity{1500000, 1500001};
  f.allow_same_uid = true;
  f.open_files = 64;
  return f;
}

inline cancel_frame sample_cancel() { return {cancel_reason::timeout}; }

inline started_frame sample_started() {
  started_frame f;
  f.pid = 4242;
  mechanism_report& m = f.mechanisms;
  m.session = m.subreaper = m.no_new_privs = true;
  m.seccomp = seccomp_state::filter;
  m.landlock_abi = 3;
  m.namespaces = {"user", "mount", "pid", "net"};
  m.cgroup = "v2";
  m.uid_drop = m.fds_closed = m.environment_built = true;
  m.rlimits = {10, 536870912, 10485760, 67, 256, 0};
  m.process_count_base = 3;
  return f;
}

inline launch_error_frame sample_launch_error() {
  return {launch_stage::seccomp, "seccomp_load", 22, "Invalid argument \xE2\x80\x94 filter rejected"};
}

inline exit_frame sample_exit() {
  exit_frame f;
  f.exit_code = 137;
  f.signal = 9;
  f.user_seconds = 0.01;
  f.system_seconds = 1.0 / 3.0;
  f.max_rss_bytes = 9000000;
  f.wall_seconds = 30.000000000000004;
  f.limit_hit = limit_name::wall_seconds;
  f.cancelled = true;
  f.killed = 2;
  f.survivors = 0;
  return f;
}

inline hello_frame sample_hello() {
  hello_frame f;
  f.token = "0123456789abcdef0123456789abcdef";
  child_report& r = f.report;
  r.pid = 1234;
  r.ppid = 1233;
  r.pgid = 1234;
  r.sid = 1234;
  r.uid = r.euid = 1500000;
  r.gid = r.egid = 1500001;
  r.groups = {1500001, 27};
  r.no_new_privs = true;
  r.seccomp_mode = 2;
  r.rlimits = {{10, 11}, {536870912, 536870912}, {10485760, 10485760}, {67, 67}, {256, 256}, {0, -1}};
  r.canary = {false, 13};
  r.network = {{probe_outcome::denied, 1}, {probe_outcome::connected, 0}};
  r.environment_keys = {"HOME", "PATH", "PYTHONDONTWRITEBYTECODE", "TMPDIR"};
  r.cwd = "/tmp/psych-x/workspace";
  r.workspace_entries = 0;
  r.namespace_ids = {{"mnt", "mnt:[4026531840]"}, {"pid", "pid:[4026531836]"}};
  r.root_entries = {"dev", "proc", "tmp", "usr", "workspace"};
  r.uid_map = "0 1500000 1";
  r.capabilities_effective = "0000000000000000";
  r.network_routes = 0;
  r.cgroup_memory_limit = 536870912;
  r.python = "3.11.2";
  return f;
}

inline done_frame sample_done_ok() {
  done_frame f;
  f.ok = true;
  f.value = json_text{R"({"big":123456789012345678901234567890,"x":[1.0,1E+2,-0,0.10],"s":"\u00e9\ud83d\ude00 é"})"};
  return f;
}

inline done_frame sample_done_failed() {
  done_frame f;
  f.ok = false;
  f.error = program_error{program_error_kind::syntax_error, "SyntaxError", "invalid syntax",
                          "Traceback (most recent call last):\n  File \"<program>\", line 3\n", 3,
                          "memory_bytes"};
  return f;
}

inline run_frame sample_run() {
  return {"print('hi')\nx = 1 / 0\n", "prog.py", {{"docs__list-repos", "Lists repositories"}, {"2fa", ""}},
          {{"ask_question", "ask_question suspends the Run."}}};
}
inline call_frame sample_call() { return {7, "docs__list-repos", json_text{R"({"owner":"psych","n":12345678901234567890})"}}; }
inline result_frame sample_result_ok() { return {7, true, json_text{R"([{"name":"psych"}])"}, std::nullopt}; }
inline result_frame sample_result_failed() {
  return {8, false, std::nullopt, call_error{tool_error_kind::budget_exhausted, "docs__list-repos", "calls: 200 of 200"}};
}
inline abort_frame sample_abort() { return {"isolation_unavailable: no user namespaces"}; }

/// The encoded lines of every sample frame (with their '\n').
inline std::vector<std::string> sample_lines() {
  return {encode_frame(sample_launch()),       encode_frame(sample_cancel()),
          encode_frame(sample_started()),      encode_frame(sample_launch_error()),
          encode_frame(sample_exit()),         encode_frame(sample_hello()),
          encode_frame(sample_done_ok()),      encode_frame(sample_done_failed()),
          encode_frame(sample_run()),          encode_frame(sample_abort()),
          encode_frame(sample_call()),         encode_frame(sample_result_ok()),
          encode_frame(sample_result_failed())};
}

/// The examples of docs/contract.md, verbatim (joined onto one line each).
inline std::vector<std::string> contract_examples() {
  return {
      R"({"type":"launch","version":1,"token":"0123456789abcdef0123456789abcdef","isolation":"process",)"
      R"( "limits":{"cpu_seconds":10.0,"address_space_bytes":536870912,)"
      R"( "file_size_bytes":10485760,"process_count":64,"wall_seconds":30.0},)"
      R"( "network":"none",)"
      R"( "environment":{"HOME":"/tmp/psych-x/workspace","TMPDIR":"/tmp/psych-x/tmp",)"
      R"( "PATH":"/usr/local/bin:/usr/bin:/bin","PYTHONDONTWRITEBYTECODE":"1"},)"
      R"( "interpreter":"/usr/bin/python3.11",)"
      R"( "workspace":"/tmp/psych-x/workspace","tmp_dir":"/tmp/psych-x/tmp",)"
      R"( "canary":"/tmp/psych-canary-x/canary",)"
      R"( "probe":{"ipv4_port":41234,"ipv6_port":41235},)"
      R"( "run_as":{"uid":1500000,"gid":1500000},)"
      R"( "allow_same_uid":false,"open_files":256})",
      R"({"type":"started","pid":1234,)"
      R"( "mechanisms":{"session":true,"subreaper":true,"no_new_privs":true,)"
      R"( "seccomp":"filter","landlock_abi":0,"namespaces":[],"cgroup":"none",)"
      R"( "uid_drop":true,"fds_closed":true,"environment_built":true,)"
      R"( "rlimits":{"cpu_seconds":10,"address_space_bytes":536870912,)"
      R"( "file_size_bytes":10485760,"process_count":67,)"
      R"( "open_files":256,"core_bytes":0},)"
      R"( "process_count_base":3}})",
      R"({"type":"error","stage":"seccomp","syscall":"seccomp_load","error_number":22,"message":"..."})",
      R"({"type":"cancel","reason":"cancelled"})",
      R"({"type":"exit","exit_code":0,"signal":null,"user_seconds":0.01,)"
      R"( "system_seconds":0.0,"max_rss_bytes":9000000,"wall_seconds":0.02,)"
      R"( "limit_hit":null,"cancelled":false,"killed":0,"survivors":0})",
      R"({"type":"hello","token":"0123456789abcdef0123456789abcdef",)"
      R"( "report":{"pid":1234,"ppid":1233,"pgid":1234,"sid":1234,)"
      R"( "uid":1500000,"gid":1500000,"euid":1500000,"egid":1500000,"groups":[],)"
      R"( "no_new_privs":true,"seccomp_mode":2,)"
      R"( "rlimits":{"cpu_seconds":[10,11],"address_space_bytes":[536870912,536870912],)"
      R"( "file_size_bytes":[10485760,10485760],"process_count":[67,67],)"
      R"( "open_files":[256,256],"core_bytes":[0,0]},)"
      R"( "canary":{"readable":false,"error_number":13},)"
      R"( "network":{"ipv4":{"outcome":"denied","error_number":1},)"
      R"( "ipv6":{"outcome":"denied","error_number":1}},)"
      R"( "environment_keys":["HOME","PATH","PYTHONDONTWRITEBYTECODE","TMPDIR"],)"
      R"( "cwd":"/tmp/psych-x/workspace","workspace_entries":0,)"
      R"( "namespace_ids":{"mnt":"mnt:[4026531841]"},"root_entries":["dev","proc"],)"
      R"( "uid_map":"0 1500000 1","gid_map":"0 1500000 1","capabilities_effective":"0",)"
      R"( "capabilities_bounding":"0","network_routes":0,"cgroup_memory_limit":-1,)"
      R"( "cgroup_pids_limit":-1,)"
      R"( "python":"3.11.2"}})",
      R"({"type":"run","program":"<source>","filename":"<program>"})",
      R"({"type":"abort","reason":"isolation_unavailable: ..."})",
      R"({"type":"done","ok":true,"value":{"any":["JSON",1,2.50,null]}})",
      R"({"type":"done","ok":false,)"
      R"( "error":{"kind":"exception","type":"ZeroDivisionError","message":"division by zero",)"
      R"( "traceback":"Traceback (most recent call last):\n  File \"<program>\", line 3, ...",)"
      R"( "line":3,"limit_hint":""}})",
  };
}

}  // namespace psych::protocol::testing

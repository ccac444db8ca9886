#pragma once
// What psych-windows-test-child reports in its `done` value: one outcome per action of its
// program, and what it found among its own handles. Shared with the Linux host-side test
// (tests/windows_launcher), which decodes it with psych's codec.
//
// The program is one action per line:
//   spin SECONDS            burn user CPU for SECONDS of wall clock
//   allocate BYTES          commit BYTES and touch every page
//   spawn COUNT SECONDS     start COUNT copies of itself that sleep SECONDS, and leave them running
//   breakaway               start one copy with CREATE_BREAKAWAY_FROM_JOB (must be refused)
//   sleep SECONDS
//   write PATH TEXT         create PATH (relative: in the workspace) holding TEXT
//   print TEXT              TEXT and a newline on stdout, and on stderr
//   handles                 take the census below
// An action that fails on a limit ends the program with a `done` error whose limit_hint names it.
#include <cstdint>
#include <string>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

namespace psych::windows::test_child {

/// Every valid handle value of the child from 4 up to 65536, by kind.
struct handle_census {
  std::int64_t sockets = 0;
  std::int64_t pipes = 0;
  std::int64_t characters = 0;  ///< character devices: NUL, a console
  std::vector<std::string> disk_files;  ///< the final path of each open file
  std::int64_t other = 0;               ///< processes, events, keys, sections, ...
  std::int64_t stdin_bytes = -1;        ///< what one read of its stdin returned
};

struct action_outcome {
  std::string action;
  bool ok = false;
  std::int64_t error_number = 0;  ///< GetLastError of the call that failed
  std::int64_t count = 0;         ///< processes started, bytes committed
};

struct observations {
  std::vector<action_outcome> actions;
  handle_census handles;
};

}  // namespace psych::windows::test_child

BOOST_HANA_ADAPT_STRUCT(psych::windows::test_child::handle_census, sockets, pipes, characters, disk_files, other,
                        stdin_bytes);
BOOST_HANA_ADAPT_STRUCT(psych::windows::test_child::action_outcome, action, ok, error_number, count);
BOOST_HANA_ADAPT_STRUCT(psych::windows::test_child::observations, actions, handles);

// The bootstrap reaches the child as a sealed memfd on fd 4, and only the
// bootstrap loader ever holds it: fds 0-4 cross exec, fds 0-3 reach the program.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>

#include "test_host.hpp"

#ifndef PSYCH_FD_REPORT_PATH
#error "PSYCH_FD_REPORT_PATH must name the fd_report stand-in interpreter"
#endif

using namespace psych;
using namespace psych::testing;

namespace {


/// fd_report's lines: "fd <n> <target>" into `fds`, every other "<key> <rest>" into `facts`.
struct report {
  explicit report(const std::string& text) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string key;
      words >> key;
      std::string rest;
      std::getline(words >> std::ws, rest);
      if (key == "fd") {
        const auto space = rest.find(' ');
        fds[std::stoi(rest.substr(0, space))] = rest.substr(space + 1);
      } else {
        facts[key] = rest;
      }
    }
  }
  std::map<int, std::string> fds;
  std::map<std::string, std::string> facts;
};

}  // namespace

TEST_CASE("exactly fds 0-4 cross exec: the channel on 3, the sealed bootstrap on 4, read from offset 0") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  launch.interpreter = PSYCH_FD_REPORT_PATH;  // reports its descriptors instead of running Python
  launch.run_as = std::nullopt;               // as root: the stand-in needs no path the drop can reach
  launch.allow_same_uid = true;
  const auto outcome = launch_only(launch);
  REQUIRE_MESSAGE(outcome.started, (outcome.error ? outcome.error->message : "no reply"));
  CHECK(outcome.launcher_status == 0);
  const report seen(outcome.stdout_text);
  INFO(outcome.stdout_text);
  std::vector<int> numbers;
  for (const auto& [fd, target] : seen.fds) numbers.push_back(fd);
  CHECK(numbers == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(seen.fds.at(0) == "/dev/null");
  CHECK(seen.fds.at(3).starts_with("socket:"));
  CHECK(seen.fds.at(4).starts_with("/memfd:psych-bootstrap"));
  CHECK(std::stoi(seen.facts.at("seals")) == (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE));
  CHECK(seen.facts.at("blob") == "1");
  CHECK(seen.facts.at("loader").starts_with("# psych bootstrap loader"));
}

TEST_CASE("the program never sees the bootstrap's fd 4") {
  if (!have_root()) return;
  scratch dir;
  // readlink opens nothing, so fd 4 is asked about before anything could reuse the number.
  const auto outcome = run_program(default_launch(dir), R"(
import os
def target(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return "closed"
fd4 = target(4)
return {"fd4": fd4, "all": [target(int(fd)) for fd in os.listdir("/proc/self/fd")]}
)");
  REQUIRE(outcome.done);
  const auto done = parse_json(*outcome.done);
  REQUIRE_MESSAGE(done["ok"].GetBool(), *outcome.done, "\nstderr: ", outcome.stderr_text);
  CHECK(std::string(done["value"]["fd4"].GetString()) == "closed");
  for (const auto& target : done["value"]["all"].GetArray())
    CHECK(std::string(target.GetString()).find("memfd:") == std::string::npos);
}

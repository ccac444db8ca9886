#pragma once
// What the tests of psych serve share, the remote tests' and the scale test's alike: tokens, small
// files, a throwaway certificate (openssl CLI) and a process runner with a time bound.
#include <chrono>
#include <string>
#include <vector>

namespace remote_test {

/// "tok-" and 32 random hex digits: distinctive enough to be searched for in everything psych says.
std::string fresh_token();
void write_file(const std::string& path, const std::string& text, unsigned mode = 0600);
std::string read_file(const std::string& path);

/// A self-signed certificate for 127.0.0.1 and localhost, made once per run with the openssl CLI in
/// a temp dir removed at exit; nullopt (with why) when openssl is missing or fails.
struct certificate {
  std::string cert, key;
};
const certificate* test_certificate(std::string* why);
/// Another one, for "the service's certificate does not chain to the configured CA".
const certificate* other_certificate(std::string* why);

/// What a process printed, and how it ended.
struct process_output {
  int exit_code = -1;  ///< -1: killed at the time bound, or it could not start
  std::string output;  ///< standard output and standard error, interleaved
  bool timed_out = false;
};
process_output run_process(const std::vector<std::string>& argv, std::chrono::milliseconds limit);

}  // namespace remote_test

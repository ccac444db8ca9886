#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <filesystem>

#include "backends.hpp"
#include "skip.hpp"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  conformance::stop_remote_services();
  // Every execution emptied it (checked after each case); the root itself is ours to remove.
  std::error_code ec;
  std::filesystem::remove_all(conformance::temp_root(), ec);
  return psych::testing::exit_status(status);
}

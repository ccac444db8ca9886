// main() of the doctest binaries: doctest's run, and a binary that only skipped exits as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "skip.hpp"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit()) return status;  // a query (--list-test-cases, --count, --help): no case ran
  return psych::testing::exit_status(status);
}

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "backends.hpp"
#include "skip.hpp"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit()) return status;  // a query (--list-test-cases, --count, --help): no case ran
  conformance::after_the_run();
  return psych::testing::exit_status(status);
}

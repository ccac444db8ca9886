#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "backends.hpp"
#include "skip.hpp"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  conformance::after_the_run();
  return psych::testing::exit_status(status);
}

// main() of the doctest binaries: doctest's run, and a binary that only skipped exits as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "skip.hpp"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  return psych::testing::exit_status(context.run());
}

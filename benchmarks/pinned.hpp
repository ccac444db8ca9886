#pragma once
// A pinned local backend running `return 1` through the library's run(): what several benchmarks
// put beside the bare interpreter or beside `psych run`.
#include <cstddef>
#include <functional>
#include <memory>
#include <variant>

#include <fmt/format.h>

#include "psych/host/sandbox.hpp"

namespace psych::bench {

/// The backend named `name`, with a pool of `pool_size` (0: built on request); null (the reason
/// printed) where it is not available here.
inline std::shared_ptr<psych::sandbox> pinned_sandbox(const char* name, psych::isolation_level level,
                                                      std::size_t pool_size = 0) {
  psych::local_sandbox_options options;
  options.backend = name;
  options.isolation = level;
  options.pool.size = pool_size;
  auto made = psych::local_sandbox(options);
  if (!made) {
    fmt::print("  ({} not measured: {})\n", name, made.error().message());
    return nullptr;
  }
  return std::move(made).value();
}

/// One run() of `return 1` at the terms a runtime would compute; false (the reason printed) if it
/// did not return 1.
inline std::function<bool()> return_one(std::shared_ptr<psych::sandbox> sandbox, psych::isolation_level level) {
  const auto offer = sandbox->offer();
  const auto terms = std::get<psych::execution_terms>(
      psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {.isolation = level}, {}));
  return [sandbox, terms] {
    const auto result = sandbox->run({.program = "return 1", .terms = terms});
    if (result.ok() && result.value && result.value->text == "1") return true;
    fmt::print(stderr, "a run failed: {}\n", result.failure ? result.failure->message : "no value");
    return false;
  };
}

}  // namespace psych::bench

#pragma once
// Reads a fuzzer's input as a few control values then a body, so one byte string both picks the
// bounds or the mode of a run and carries the data. Running out of input yields zeros, never UB.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace psych::fuzz {

class input {
 public:
  input(const std::uint8_t* data, std::size_t size) noexcept
      : rest_{reinterpret_cast<const char*>(data), size} {}

  /// The next byte, or 0 when the input is spent.
  std::uint8_t byte() noexcept {
    if (rest_.empty()) return 0;
    const auto b = static_cast<std::uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return b;
  }

  /// Everything not consumed yet.
  [[nodiscard]] std::string_view rest() const noexcept { return rest_; }

 private:
  std::string_view rest_;
};

/// A failed invariant: aborts, so libFuzzer saves the input as a crash.
[[noreturn]] void invariant_failed(const char* what, const char* file, int line) noexcept;

}  // namespace psych::fuzz

#define PSYCH_FUZZ_CHECK(condition) \
  ((condition) ? void() : ::psych::fuzz::invariant_failed(#condition, __FILE__, __LINE__))

#include <cstdio>
#include <cstdlib>
inline void psych::fuzz::invariant_failed(const char* what, const char* file, int line) noexcept {
  std::fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n", file, line, what);
  std::abort();
}

#pragma once
// One OS resource (a HANDLE, a SOCKET), released with the object that owns it. Traits name the
// type, the value that owns nothing, which values are real, and how one is released.
#include <utility>

namespace psych::windows {

template <class Traits>
class unique_resource {
 public:
  using value_type = typename Traits::type;

  unique_resource() = default;
  explicit unique_resource(value_type value) noexcept : value_(value) {}
  unique_resource(unique_resource&& other) noexcept : value_(std::exchange(other.value_, Traits::empty)) {}
  unique_resource& operator=(unique_resource&& other) noexcept {
    if (this != &other) reset(std::exchange(other.value_, Traits::empty));
    return *this;
  }
  unique_resource(const unique_resource&) = delete;
  unique_resource& operator=(const unique_resource&) = delete;
  ~unique_resource() { reset(); }

  [[nodiscard]] value_type get() const noexcept { return value_; }
  explicit operator bool() const noexcept { return Traits::valid(value_); }
  [[nodiscard]] bool valid() const noexcept { return Traits::valid(value_); }
  /// Hands the resource to a new owner.
  [[nodiscard]] value_type release() noexcept { return std::exchange(value_, Traits::empty); }
  void reset(value_type value = Traits::empty) noexcept {
    if (Traits::valid(value_)) Traits::release(value_);
    value_ = value;
  }

 private:
  value_type value_ = Traits::empty;
};

}  // namespace psych::windows

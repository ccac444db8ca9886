#pragma once
// A member that the JSON codec writes only when it holds a value (include/psych/protocol/json.hpp).
// For a member added to a struct whose JSON is hashed, the Spec's above all: a value that does not
// use the new member keeps its exact bytes, and so its Version hash. Otherwise a std::optional.
#include <optional>

namespace psych {

template <class T>
struct omittable : std::optional<T> {
  using std::optional<T>::optional;
  using std::optional<T>::operator=;
  friend bool operator==(const omittable&, const omittable&) = default;
};

}  // namespace psych

#pragma once
// How values cross between Python and psych. Structured values are JSON text through psych's own
// codec (the Hana field walk), so a field is named once, in the C++ struct, and the Python
// dataclasses mirror those names; psych's errors become one Python exception type, Failure, whose
// args are (kind, message). Python objects held by C++ (a tool's dispatcher, a policy, a token
// callback) are shared under a deleter that takes the GIL, since the last owner may be a pool
// thread.
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include "psych/error.hpp"
#include "psych/protocol/json.hpp"
#include "psych/result.hpp"

namespace psych::python {

/// A psych error on its way to Python (translated to _psych.Failure).
struct failure_exception {
  std::string kind;
  std::string message;
};

[[noreturn]] inline void raise(std::string kind, std::string message) {
  throw failure_exception{std::move(kind), std::move(message)};
}

template <class T>
T value_or_raise(result<T> outcome) {
  if (!outcome) raise(std::string(name_of(outcome.error().kind)), outcome.error().message());
  return std::move(outcome).value();
}

/// `json` decoded strictly as T: a member T lacks is invalid_argument naming `what`, not ignored,
/// so a misspelt option never silently means its default.
template <class T>
T decode_or_raise(std::string_view json, std::string_view what) {
  auto decoded = protocol::decode_json_strict<T>(json);
  if (!decoded) raise("invalid_argument", fmt::format("{}: {}", what, decoded.error().message()));
  return std::move(decoded).value();
}

/// A Python object that C++ may copy and drop on any thread.
using shared_object = std::shared_ptr<pybind11::object>;

inline shared_object share(pybind11::object object) {
  return {new pybind11::object(std::move(object)), [](pybind11::object* held) {
            // After the interpreter finalised there is no GIL to take and nothing to decrement.
            if (!Py_IsInitialized()) return;
            pybind11::gil_scoped_acquire gil;
            delete held;
          }};
}

/// The text of the Python exception in flight: "TypeName: message".
inline std::string describe(const pybind11::error_already_set& raised) { return raised.what(); }

void register_failure(pybind11::module_& module);
void register_sandboxes(pybind11::module_& module);
void register_tools(pybind11::module_& module);
void register_runtime(pybind11::module_& module);

}  // namespace psych::python

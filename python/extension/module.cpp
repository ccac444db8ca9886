// psych_runtime._psych: psych::host for Python (docs/python.md). The Python package wraps it;
// nothing here is public API.
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>

#include "bridge.hpp"

namespace psych::python {

void register_failure(pybind11::module_& module) {
  // A plain Python class, so .kind and .message are ordinary attributes and pickling works.
  pybind11::exec(R"(
class Failure(Exception):
    """A psych error: .kind is the error kind's name, .message says what happened."""
    def __init__(self, kind, message):
        super().__init__(kind, message)
        self.kind = kind
        self.message = message
    def __str__(self):
        return self.message
)",
                 module.attr("__dict__"));
  // Leaked on purpose: the translator may run until the interpreter finalises.
  static auto* failure_class = new pybind11::object(module.attr("Failure"));
  pybind11::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const failure_exception& failure) {
      PyErr_SetObject(failure_class->ptr(), pybind11::make_tuple(failure.kind, failure.message).ptr());
    }
  });
}

}  // namespace psych::python

PYBIND11_MODULE(_psych, module) {
  module.doc() = "psych::host for psych_runtime (internal)";
  psych::python::register_failure(module);
  psych::python::register_sandboxes(module);
  psych::python::register_tools(module);
  psych::python::register_runtime(module);
}

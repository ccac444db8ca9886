#pragma once
// A backend as Python holds it, shared with the runtime's profiles that name it.
#include <memory>
#include <string>

#include <pybind11/pybind11.h>

#include "psych/host/sandbox.hpp"
#include "psych/host/secret_resolver.hpp"

namespace psych::python {

struct sandbox_handle {
  std::shared_ptr<sandbox> backend;
};

/// (outcome JSON, stdout bytes, stderr bytes, [artifact bytes]): what a run hands Python. The
/// JSON leaves the captured bytes out; they cross as bytes, not as text.
/// A Python callback (or None) as a secret_resolver, called fresh per request with the GIL taken.
secret_resolver token_from(pybind11::object callback);

pybind11::tuple result_tuple(const sandbox_result& result, std::string outcome_json);

}  // namespace psych::python

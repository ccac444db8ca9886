#pragma once
// A backend as Python holds it, shared with the runtime's profiles that name it.
#include <memory>
#include <string>

#include <pybind11/pybind11.h>

#include "psych/host/live_output.hpp"
#include "psych/host/sandbox.hpp"
#include "psych/host/secret_resolver.hpp"

namespace psych::python {

struct sandbox_handle {
  std::shared_ptr<sandbox> backend;
};

/// (outcome JSON, stdout bytes, stderr bytes, [artifact bytes]): what a run hands Python. The
/// JSON leaves the captured bytes out; they cross as bytes, not as text.
/// A Python callback as a live output sink: callback(stream, offset, data: bytes, skipped), called
/// on psych's delivery thread with the GIL taken. What it raises is reported as unraisable and
/// never reaches the run: a caller's display must not end the program.
class python_output_sink final : public output_sink {
 public:
  explicit python_output_sink(pybind11::object callback);
  void on_output(const output_chunk& chunk) override;

 private:
  pybind11::object callback_;  ///< touched only with the GIL held
};

/// A Python callback (or None) as a secret_resolver, called fresh per request with the GIL taken.
secret_resolver token_from(pybind11::object callback);

pybind11::tuple result_tuple(const sandbox_result& result, std::string outcome_json);

}  // namespace psych::python

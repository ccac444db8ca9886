// The Sandbox port for Python: the local, container and remote backends, describe() and run().
// A run or a probe releases the GIL for as long as it takes, so the event loop (and a Python tool
// a program calls) keeps running beside it.
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "adapted.hpp"
#include "bridge.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "sandboxes.hpp"

namespace py = pybind11;

namespace psych::python {

py::tuple result_tuple(const sandbox_result& result, std::string outcome_json) {
  py::list artifacts;
  for (const auto& file : result.artifacts) artifacts.append(py::bytes(file.data));
  return py::make_tuple(std::move(outcome_json), py::bytes(result.stdout_data), py::bytes(result.stderr_data),
                        std::move(artifacts));
}

namespace {

sandbox_handle opened(result<std::unique_ptr<sandbox>> made) {
  return sandbox_handle{std::shared_ptr<sandbox>(value_or_raise(std::move(made)))};
}

}  // namespace

/// The token callback as a secret_resolver: called fresh per request with the GIL taken. Its
/// exception is named by type only: its message might quote the credential it failed to produce.
secret_resolver token_from(py::object callback) {
  if (callback.is_none()) return {};
  return [held = share(std::move(callback))]() -> result<std::string> {
    py::gil_scoped_acquire gil;
    try {
      py::object token = (*held)();
      if (token.is_none()) return std::string{};
      if (!py::isinstance<py::str>(token))
        return fail_with(error_kind::invalid_argument, "the token callback must return a str or None");
      return token.cast<std::string>();
    } catch (py::error_already_set& raised) {
      std::string type = py::str(raised.type().attr("__name__"));
      raised.discard_as_unraisable("psych_runtime: token callback");
      return fail_with(error_kind::invalid_argument, "the token callback raised " + type);
    }
  };
}

python_output_sink::python_output_sink(py::object callback) : callback_(std::move(callback)) {}

void python_output_sink::on_output(const output_chunk& chunk) {
  py::gil_scoped_acquire gil;
  try {
    callback_(std::string(name_of(chunk.stream)), chunk.offset, py::bytes(chunk.data.data(), chunk.data.size()),
              chunk.skipped);
  } catch (py::error_already_set& raised) {
    raised.discard_as_unraisable("psych_runtime: live output callback");
  }
}

void register_sandboxes(py::module_& module) {
  py::class_<std::stop_source>(module, "StopSource")
      .def(py::init<>())
      .def("request_stop", &std::stop_source::request_stop)
      .def("stop_requested", &std::stop_source::stop_requested);

  py::class_<sandbox_handle>(module, "Sandbox")
      .def("describe",
           [](sandbox_handle& self) {
             description described;
             {
               py::gil_scoped_release unlocked;
               described = self.backend->describe();
             }
             return protocol::encode_json(described);
           })
      .def("offer",
           [](sandbox_handle& self) {
             backend_offer offered;
             {
               py::gil_scoped_release unlocked;  // a remote backend may ask its service
               offered = self.backend->offer();
             }
             return protocol::encode_json(offered);
           })
      .def("run", [](sandbox_handle& self, std::string program, std::string_view terms_json, std::string filename,
                     std::stop_source& stop, py::object on_output) {
        std::optional<python_output_sink> sink;
        if (!on_output.is_none()) sink.emplace(std::move(on_output));
        run_request request{.program = std::move(program),
                            .terms = decode_or_raise<execution_terms>(terms_json, "the execution's terms"),
                            .filename = std::move(filename),
                            .live_output = sink ? &*sink : nullptr};
        sandbox_result ran;
        {
          py::gil_scoped_release unlocked;
          ran = self.backend->run(request, stop.get_token());
        }
        return result_tuple(ran, host::result_to_json(ran));
      }, py::arg("program"), py::arg("terms_json"), py::arg("filename"), py::arg("stop"), py::arg("on_output") = py::none());

  module.def("local_sandbox", [](std::string_view options_json) {
    const auto options = decode_or_raise<local_sandbox_options>(options_json, "local_sandbox's options");
    py::gil_scoped_release unlocked;  // opening runs the probe
    return opened(local_sandbox(options));
  });
  module.def("detect_local_backends", [](std::string_view options_json) {
    return protocol::encode_json(
        detect_local_backends(decode_or_raise<local_sandbox_options>(options_json, "detect_local_backends' options")));
  });
  module.def("container_sandbox", [](std::string_view options_json) {
    const auto options = decode_or_raise<container_sandbox_options>(options_json, "ContainerSandbox's options");
    py::gil_scoped_release unlocked;
    return opened(container_sandbox(options));
  });
  module.def("remote_sandbox", [](std::string_view options_json, py::object token) {
    auto options = decode_or_raise<remote_sandbox_options>(options_json, "RemoteSandbox's options");
    options.token = token_from(std::move(token));
    return opened(remote_sandbox(std::move(options)));
  });
}

}  // namespace psych::python

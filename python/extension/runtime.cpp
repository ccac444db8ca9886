// The runtime face for Python: profiles, the tenant's policy, publishing, Attempts and their
// run_code, the Run's log, and read_tool_output over the runtime's BlobStore.
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "adapted.hpp"
#include "bridge.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/read_tool_output.hpp"
#include "psych/host/run_log.hpp"
#include "psych/host/runtime.hpp"
#include "sandboxes.hpp"
#include "tools.hpp"

namespace py = pybind11;

namespace psych::python {

namespace {

/// A runtime, with what its setup points into kept alive beside it. Never moved once made: its
/// Attempts hold a pointer to its setup.
struct runtime_handle {
  std::shared_ptr<tool_source> tools;
  std::shared_ptr<blob_store> blobs;
  std::optional<psych::runtime> runtime;
};

struct attempt_handle {
  std::shared_ptr<runtime_handle> owner;
  std::shared_ptr<run_log> log;  ///< the Run's log, which the Attempt's code_run points into
  code_execution asked;  ///< the spec's, for the model's payload; empty when it has none
  std::optional<agent_attempt> attempt;
};

/// The tenant's CodeExecutionPolicy, called with the GIL taken. What it raises is a deployment
/// error: it propagates out of run_code as the policy's own exception, and nothing runs.
code_execution_policy policy_from(py::object callback) {
  if (callback.is_none()) return {};
  return [held = share(std::move(callback))](std::string_view tenant, const code_execution_grant& offered) {
    py::gil_scoped_acquire gil;
    const py::object returned = (*held)(std::string(tenant), protocol::encode_json(offered));
    if (!py::isinstance<py::str>(returned)) raise("invalid_argument", "the CodeExecutionPolicy must return a grant");
    return decode_or_raise<code_execution_grant>(returned.cast<std::string>(), "the CodeExecutionPolicy's grant");
  };
}

std::shared_ptr<runtime_handle> make_runtime(const py::list& profiles, py::object policy,
                                             std::shared_ptr<tool_source> tools, std::shared_ptr<blob_store> blobs,
                                             bool profiles_known_at_publish, bool tools_known_at_publish) {
  auto handle = std::make_shared<runtime_handle>();
  handle->tools = std::move(tools);
  handle->blobs = std::move(blobs);
  runtime_setup setup;
  for (const auto& entry : profiles) {
    const auto fields = entry.cast<py::tuple>();
    setup.profiles.push_back(
        {.name = fields[0].cast<std::string>(),
         .backend = fields[1].cast<sandbox_handle&>().backend,
         .hard_limits = decode_or_raise<limit_caps>(fields[2].cast<std::string>(), "a profile's hard_limits"),
         .allow_network = fields[3].cast<bool>(),
         .allowed_hosts = fields[4].cast<std::vector<std::string>>(),
         .budget = decode_or_raise<binding_budget>(fields[5].cast<std::string>(), "a profile's binding_budget")});
  }
  setup.policy = policy_from(std::move(policy));
  setup.profiles_known_at_publish = profiles_known_at_publish;
  setup.tools_known_at_publish = tools_known_at_publish;
  if (handle->tools) {
    setup.connected_servers = handle->tools->servers();
    setup.catalogue = handle->tools->catalogue();
    setup.invoker = handle->tools->invoker();
  }
  setup.blobs = handle->blobs.get();
  handle->runtime.emplace(value_or_raise(psych::runtime::create(std::move(setup))));
  return handle;
}

/// A runtime whose tool source was closed points at tools that are gone: nothing may run on it.
void check_open(const runtime_handle& handle) {
  if (handle.tools && !handle.tools->is_open()) raise("invalid_argument", "this Runtime is closed");
}

}  // namespace

void register_runtime(py::module_& module) {
  py::class_<run_log, std::shared_ptr<run_log>>(module, "RunLog")
      .def_static("file",
                  [](const std::string& path) { return std::shared_ptr<run_log>(value_or_raise(open_file_run_log(path))); })
      .def_static("memory", [] { return std::shared_ptr<run_log>(open_memory_run_log()); });

  py::class_<blob_store, std::shared_ptr<blob_store>>(module, "BlobStore")
      .def_static("directory", [](const std::string& path) {
        return std::shared_ptr<blob_store>(value_or_raise(open_directory_blob_store(path)));
      });

  py::class_<runtime_handle, std::shared_ptr<runtime_handle>>(module, "Runtime")
      .def(py::init(&make_runtime))
      .def("publish",
           [](const runtime_handle& self, std::string_view spec_json) {
             return value_or_raise(self.runtime->publish(decode_or_raise<agent_spec>(spec_json, "the AgentSpec"))).hash;
           })
      .def("verify_sandboxes",
           [](const runtime_handle& self) {
             std::vector<profile_status> found;
             {
               py::gil_scoped_release unlocked;
               found = self.runtime->verify_sandboxes();
             }
             return protocol::encode_json(found);
           })
      .def("start_attempt",
           [](const std::shared_ptr<runtime_handle>& self, std::string_view spec_json,
              const std::shared_ptr<run_log>& log, std::string tenant) {
             check_open(*self);
             auto handle = std::make_shared<attempt_handle>();
             handle->owner = self;
             handle->log = log;
             const auto version =
                 value_or_raise(self->runtime->publish(decode_or_raise<agent_spec>(spec_json, "the AgentSpec")));
             if (version.spec.code) handle->asked = *version.spec.code;
             py::gil_scoped_release unlocked;  // opening the Run reads its log
             handle->attempt.emplace(value_or_raise(self->runtime->start_attempt(version, *log, std::move(tenant))));
             return handle;
           })
      .def("read_tool_output", [](const runtime_handle& self, std::string_view tenant, std::string_view handle,
                                  std::string_view request_json) {
        if (!self.blobs) raise("blob_not_found", "this runtime has no BlobStore: nothing was preserved");
        const auto request = decode_or_raise<output_request>(request_json, "the read_tool_output request");
        return protocol::encode_json(value_or_raise(read_tool_output(*self.blobs, tenant, handle, request)));
      });

  py::class_<attempt_handle, std::shared_ptr<attempt_handle>>(module, "Attempt")
      .def("tool_names", [](const attempt_handle& self) { return self.attempt->tool_names(); })
      .def("run_code",
           [](attempt_handle& self, const std::string& program, std::stop_source& stop, py::object on_output) {
             check_open(*self.owner);
             std::optional<python_output_sink> sink;
             if (!on_output.is_none()) sink.emplace(std::move(on_output));
             std::optional<result<run_code_outcome>> outcome;
             {
               py::gil_scoped_release unlocked;
               outcome.emplace(self.attempt->run_code(program, stop.get_token(), sink ? &*sink : nullptr));
             }
             const auto ran = value_or_raise(std::move(*outcome));
             const auto* result = std::get_if<sandbox_result>(&ran);
             const py::tuple out = result ? result_tuple(*result, host::result_to_json(*result))
                                          : result_tuple({}, host::refusal_to_json(std::get<refusal>(ran)));
             return py::make_tuple(out[0], out[1], out[2], out[3], run_code_payload(ran, self.asked));
           },
           py::arg("program"), py::arg("stop"), py::arg("on_output") = py::none())
      .def("unknown_calls_json",
           [](const attempt_handle& self) { return protocol::encode_json(self.attempt->unknown_calls()); })
      .def("run_spent_json", [](const attempt_handle& self) {
        meter_readings spent;
        {
          py::gil_scoped_release unlocked;  // recounted from the log
          spent = value_or_raise(self.attempt->run_spent());
        }
        return protocol::encode_json(spent);
      });
}

}  // namespace psych::python

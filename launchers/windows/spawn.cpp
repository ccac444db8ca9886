#include "spawn.hpp"

#include "platform/windows/command_line.hpp"
#include "platform/windows/handle_list.hpp"
#include "platform/windows/text.hpp"

namespace psych::windows {

setup_result<started_child> spawn_in_job(const child_plan& plan, const inherited_handles& handles,
                                         const execution_job& job) {
  auto listed = handles.list();
  const handle_list_attribute attribute{listed};
  if (!attribute) return fail(system_failure(launch_stage::spawn, attribute.failed_call(), attribute.error(), attribute.failed_on()));

  STARTUPINFOEXW startup{};
  startup.StartupInfo.cb = sizeof startup;
  startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
  startup.StartupInfo.hStdInput = handles.input.get();
  startup.StartupInfo.hStdOutput = handles.output.get();
  startup.StartupInfo.hStdError = handles.error.get();
  startup.lpAttributeList = attribute.get();

  const auto executable = widen(plan.executable);
  auto line = command_line(plan.executable, plan.arguments);
  auto environment = plan.environment_block;
  const auto workspace = widen(plan.workspace);
  PROCESS_INFORMATION started{};
  // bInheritHandles TRUE, but only the handles in the list are inherited.
  if (!::CreateProcessW(executable.c_str(), line.data(), nullptr, nullptr, TRUE,
                        CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT | EXTENDED_STARTUPINFO_PRESENT | CREATE_NO_WINDOW,
                        environment.data(), workspace.c_str(), &startup.StartupInfo, &started))
    return fail(last_error(launch_stage::spawn, "CreateProcessW", plan.executable));
  started_child child{unique_handle(started.hProcess), static_cast<std::int64_t>(started.dwProcessId)};
  const unique_handle thread(started.hThread);
  if (auto assigned = job.assign(child.process.get()); !assigned) {
    ::TerminateProcess(child.process.get(), 1);
    return fail(assigned.error());
  }
  if (::ResumeThread(thread.get()) == static_cast<DWORD>(-1)) {
    auto error = last_error(launch_stage::spawn, "ResumeThread");
    ::TerminateProcess(child.process.get(), 1);
    return fail(std::move(error));
  }
  return child;
}

}  // namespace psych::windows

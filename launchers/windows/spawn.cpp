#include "spawn.hpp"

#include <memory>

#include "command_line.hpp"
#include "text.hpp"

namespace psych::windows {

namespace {

/// PROC_THREAD_ATTRIBUTE_HANDLE_LIST over `handles`, which must outlive it.
class handle_list_attribute {
 public:
  static setup_result<handle_list_attribute> create(std::vector<HANDLE>& handles) {
    SIZE_T size = 0;
    ::InitializeProcThreadAttributeList(nullptr, 1, 0, &size);
    handle_list_attribute attribute;
    attribute.storage_ = std::make_unique<char[]>(size);
    auto* list = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(attribute.storage_.get());
    if (!::InitializeProcThreadAttributeList(list, 1, 0, &size))
      return fail(last_error("spawn", "InitializeProcThreadAttributeList"));
    attribute.list_ = list;
    if (!::UpdateProcThreadAttribute(list, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, handles.data(),
                                     handles.size() * sizeof(HANDLE), nullptr, nullptr))
      return fail(last_error("spawn", "UpdateProcThreadAttribute", "PROC_THREAD_ATTRIBUTE_HANDLE_LIST"));
    return attribute;
  }
  handle_list_attribute(handle_list_attribute&& other) noexcept
      : storage_(std::move(other.storage_)), list_(std::exchange(other.list_, nullptr)) {}
  handle_list_attribute(const handle_list_attribute&) = delete;
  handle_list_attribute& operator=(const handle_list_attribute&) = delete;
  handle_list_attribute& operator=(handle_list_attribute&&) = delete;
  ~handle_list_attribute() {
    if (list_ != nullptr) ::DeleteProcThreadAttributeList(list_);
  }
  [[nodiscard]] LPPROC_THREAD_ATTRIBUTE_LIST get() const noexcept { return list_; }

 private:
  handle_list_attribute() = default;
  std::unique_ptr<char[]> storage_;
  LPPROC_THREAD_ATTRIBUTE_LIST list_ = nullptr;
};

}  // namespace

setup_result<started_child> spawn_in_job(const child_plan& plan, const inherited_handles& handles,
                                         const execution_job& job) {
  auto listed = handles.list();
  PSYCH_TRY(auto attribute, handle_list_attribute::create(listed));

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
    return fail(last_error("spawn", "CreateProcessW", plan.executable));
  started_child child{unique_handle(started.hProcess), static_cast<std::int64_t>(started.dwProcessId)};
  const unique_handle thread(started.hThread);
  if (auto assigned = job.assign(child.process.get()); !assigned) {
    ::TerminateProcess(child.process.get(), 1);
    return fail(assigned.error());
  }
  if (::ResumeThread(thread.get()) == static_cast<DWORD>(-1)) {
    auto error = last_error("spawn", "ResumeThread");
    ::TerminateProcess(child.process.get(), 1);
    return fail(std::move(error));
  }
  return child;
}

}  // namespace psych::windows

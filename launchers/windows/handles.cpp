#include "handles.hpp"

namespace psych::windows {

std::vector<HANDLE> inherited_handles::list() const {
  return {input.get(), output.get(), error.get(), handover.get()};
}

namespace {

/// An inheritable duplicate of one of the launcher's standard handles. A missing one (a launcher
/// started without stdout) is refused: the host must drain both.
setup_result<unique_handle> inheritable_copy_of(DWORD which, const char* name) {
  const HANDLE own = ::GetStdHandle(which);
  if (own == nullptr || own == INVALID_HANDLE_VALUE)
    return fail(refusal(launch_stage::handles, std::string("the launcher has no ") + name +
                                       " to pass on: the host gives it the program's output handles"));
  HANDLE copy = nullptr;
  if (!::DuplicateHandle(::GetCurrentProcess(), own, ::GetCurrentProcess(), &copy, 0, TRUE, DUPLICATE_SAME_ACCESS))
    return fail(last_error(launch_stage::handles, "DuplicateHandle", name));
  return unique_handle(copy);
}

}  // namespace

setup_result<prepared_handles> prepare_inherited_handles(std::size_t handover_bytes) {
  prepared_handles prepared;
  auto& handles = prepared.inherited;
  SECURITY_ATTRIBUTES inheritable{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
  handles.input = unique_handle(::CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &inheritable,
                                              OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr));
  if (!handles.input) return fail(last_error(launch_stage::handles, "CreateFileW", "NUL"));
  PSYCH_TRY(handles.output, inheritable_copy_of(STD_OUTPUT_HANDLE, "stdout"));
  PSYCH_TRY(handles.error, inheritable_copy_of(STD_ERROR_HANDLE, "stderr"));
  HANDLE reader = nullptr;
  HANDLE writer = nullptr;
  SECURITY_ATTRIBUTES private_to_launcher{sizeof(SECURITY_ATTRIBUTES), nullptr, FALSE};
  // Room for everything the launcher writes, so that writing it does not wait for the child.
  if (!::CreatePipe(&reader, &writer, &private_to_launcher, static_cast<DWORD>(handover_bytes)))
    return fail(last_error(launch_stage::handles, "CreatePipe", "handover"));
  handles.handover = unique_handle(reader);
  prepared.handover_writer = unique_handle(writer);
  if (!::SetHandleInformation(reader, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT))
    return fail(last_error(launch_stage::handles, "SetHandleInformation", "handover, HANDLE_FLAG_INHERIT"));
  return prepared;
}

void release_standard_output() {
  for (const DWORD which : {STD_OUTPUT_HANDLE, STD_ERROR_HANDLE}) {
    const HANDLE own = ::GetStdHandle(which);
    if (own != nullptr && own != INVALID_HANDLE_VALUE) ::CloseHandle(own);
    ::SetStdHandle(which, nullptr);
  }
}

}  // namespace psych::windows

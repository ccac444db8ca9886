#include "platform/windows/handle_list.hpp"

namespace psych::windows {

handle_list_attribute::handle_list_attribute(std::vector<HANDLE>& handles) {
  SIZE_T size = 0;
  ::InitializeProcThreadAttributeList(nullptr, 1, 0, &size);
  storage_ = std::make_unique<char[]>(size);
  auto* attributes = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(storage_.get());
  if (!::InitializeProcThreadAttributeList(attributes, 1, 0, &size)) {
    failed_call_ = "InitializeProcThreadAttributeList";
    error_ = ::GetLastError();
    return;
  }
  list_ = attributes;
  if (!::UpdateProcThreadAttribute(list_, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, handles.data(),
                                   handles.size() * sizeof(HANDLE), nullptr, nullptr)) {
    failed_call_ = "UpdateProcThreadAttribute";
    failed_on_ = "PROC_THREAD_ATTRIBUTE_HANDLE_LIST";
    error_ = ::GetLastError();
  }
}

handle_list_attribute::~handle_list_attribute() {
  if (list_ != nullptr) ::DeleteProcThreadAttributeList(list_);
}

}  // namespace psych::windows

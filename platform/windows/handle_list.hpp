#pragma once
// PROC_THREAD_ATTRIBUTE_HANDLE_LIST: the explicit list of the handles a child inherits, so that no
// other handle of its parent crosses, inheritable or not. The launcher starts the interpreter with
// it (spawn.cpp), psych's host on Windows every child it starts (src/host/os/child_process_windows.cpp).
#include <windows.h>

#include <memory>
#include <string_view>
#include <vector>

namespace psych::windows {

class handle_list_attribute {
 public:
  /// The attribute over `handles`, which must outlive it. Should a call fail, the object is false
  /// and says which call, on what, and the error it returned.
  explicit handle_list_attribute(std::vector<HANDLE>& handles);
  ~handle_list_attribute();
  handle_list_attribute(const handle_list_attribute&) = delete;
  handle_list_attribute& operator=(const handle_list_attribute&) = delete;

  explicit operator bool() const noexcept { return failed_call_.empty(); }
  [[nodiscard]] LPPROC_THREAD_ATTRIBUTE_LIST get() const noexcept { return list_; }
  [[nodiscard]] std::string_view failed_call() const noexcept { return failed_call_; }
  [[nodiscard]] std::string_view failed_on() const noexcept { return failed_on_; }
  [[nodiscard]] DWORD error() const noexcept { return error_; }

 private:
  std::unique_ptr<char[]> storage_;
  LPPROC_THREAD_ATTRIBUTE_LIST list_ = nullptr;  ///< initialized, so deleted with this
  std::string_view failed_call_, failed_on_;
  DWORD error_ = ERROR_SUCCESS;
};

}  // namespace psych::windows

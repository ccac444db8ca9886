// owner_only_security.hpp: the worker's SID from its process token, as SDDL.
#include "owner_only_security.hpp"

#include <sddl.h>

#include <vector>

#include <fmt/format.h>

#include "launchers/windows/text.hpp"  // narrow, error_text

namespace psych::host {
namespace {

std::string descriptor_failure(const char* call, const std::wstring& what, DWORD error = ::GetLastError()) {
  return fmt::format("{}({}): {}", call, windows::narrow(what), windows::error_text(error));
}

}  // namespace

owner_only_security::owner_only_security() {
  attributes_.nLength = sizeof(attributes_);
  attributes_.bInheritHandle = FALSE;
  HANDLE token = nullptr;
  if (!::OpenProcessToken(::GetCurrentProcess(), TOKEN_QUERY, &token)) {
    error_ = descriptor_failure("OpenProcessToken", L"this process");
    return;
  }
  DWORD size = 0;
  ::GetTokenInformation(token, TokenUser, nullptr, 0, &size);
  std::vector<char> user(size);
  wchar_t* sid = nullptr;
  const bool ok = ::GetTokenInformation(token, TokenUser, user.data(), size, &size) &&
                  ::ConvertSidToStringSidW(reinterpret_cast<TOKEN_USER*>(user.data())->User.Sid, &sid);
  const DWORD error = ::GetLastError();
  ::CloseHandle(token);
  if (!ok) {
    error_ = descriptor_failure("GetTokenInformation(TokenUser)", L"this process", error);
    return;
  }
  const std::wstring sddl = L"D:P(A;OICI;FA;;;" + std::wstring(sid) + L")(A;OICI;FA;;;SY)";
  ::LocalFree(sid);
  if (!::ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl.c_str(), SDDL_REVISION_1, &descriptor_, nullptr))
    error_ = descriptor_failure("ConvertStringSecurityDescriptorToSecurityDescriptorW", sddl);
  attributes_.lpSecurityDescriptor = descriptor_;
}

owner_only_security::~owner_only_security() {
  if (descriptor_ != nullptr) ::LocalFree(descriptor_);
}

}  // namespace psych::host

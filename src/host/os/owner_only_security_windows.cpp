// owner_only_security.hpp: the worker's SID from its process token, as SDDL.
#include "os/owner_only_security.hpp"

#include <sddl.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "platform/windows/text.hpp"  // narrow, error_text

namespace psych::host {
namespace {

std::string descriptor_failure(const char* call, const std::wstring& what, DWORD error = ::GetLastError()) {
  return fmt::format("{}({}): {}", call, windows::narrow(what), windows::error_text(error));
}

/// The descriptor and the attributes that point at it, or why they could not be made.
struct owner_only_security {
  owner_only_security() {
    attributes.nLength = sizeof(attributes);
    attributes.bInheritHandle = FALSE;
    HANDLE token = nullptr;
    if (!::OpenProcessToken(::GetCurrentProcess(), TOKEN_QUERY, &token)) {
      error = descriptor_failure("OpenProcessToken", L"this process");
      return;
    }
    DWORD size = 0;
    ::GetTokenInformation(token, TokenUser, nullptr, 0, &size);
    std::vector<char> user(size);
    wchar_t* sid = nullptr;
    const bool ok = ::GetTokenInformation(token, TokenUser, user.data(), size, &size) &&
                    ::ConvertSidToStringSidW(reinterpret_cast<TOKEN_USER*>(user.data())->User.Sid, &sid);
    const DWORD failed_with = ::GetLastError();
    ::CloseHandle(token);
    if (!ok) {
      error = descriptor_failure("GetTokenInformation(TokenUser)", L"this process", failed_with);
      return;
    }
    const std::wstring sddl = L"D:P(A;OICI;FA;;;" + std::wstring(sid) + L")(A;OICI;FA;;;SY)";
    ::LocalFree(sid);
    if (!::ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl.c_str(), SDDL_REVISION_1, &descriptor, nullptr))
      error = descriptor_failure("ConvertStringSecurityDescriptorToSecurityDescriptorW", sddl);
    attributes.lpSecurityDescriptor = descriptor;
  }
  ~owner_only_security() {
    if (descriptor != nullptr) ::LocalFree(descriptor);
  }
  owner_only_security(const owner_only_security&) = delete;
  owner_only_security& operator=(const owner_only_security&) = delete;

  PSECURITY_DESCRIPTOR descriptor = nullptr;
  SECURITY_ATTRIBUTES attributes{};
  std::string error;  ///< empty when made
};

}  // namespace

result<SECURITY_ATTRIBUTES*> owner_only_attributes() {
  static owner_only_security made;  // once, by whichever thread comes first
  if (!made.error.empty()) return fail_with(error_kind::system_call_failed, made.error);
  return &made.attributes;
}

}  // namespace psych::host

// open_beneath_windows.hpp.
#include "os/open_beneath_windows.hpp"

#include <cstdint>

namespace psych::host {

opened_beneath open_beneath(HANDLE dir, std::wstring_view name, const beneath_request& request) {
  constexpr NTSTATUS name_invalid = static_cast<NTSTATUS>(0xC0000033L);  // STATUS_OBJECT_NAME_INVALID
  if (name.empty() || name.find_first_of(L"\\/:") != std::wstring_view::npos) return {unique_os_handle{}, name_invalid};
  UNICODE_STRING object_name{};
  object_name.Buffer = const_cast<wchar_t*>(name.data());
  object_name.Length = static_cast<USHORT>(name.size() * sizeof(wchar_t));
  object_name.MaximumLength = object_name.Length;
  OBJECT_ATTRIBUTES attributes{};
  InitializeObjectAttributes(&attributes, &object_name, 0, dir, request.security);
  IO_STATUS_BLOCK status{};
  HANDLE handle = nullptr;
  const NTSTATUS opened =
      ::NtCreateFile(&handle, request.access | SYNCHRONIZE, &attributes, &status, nullptr, FILE_ATTRIBUTE_NORMAL,
                     request.share, request.disposition,
                     request.options | FILE_OPEN_REPARSE_POINT | FILE_SYNCHRONOUS_IO_NONALERT, nullptr, 0);
  if (opened < 0) return {unique_os_handle{}, opened};
  return {unique_os_handle{handle}, opened};
}

names_listed names_beneath(HANDLE dir) {
  names_listed listed;
  std::vector<std::uint64_t> buffer(8 * 1024);  // 64 KiB, aligned as the entries need
  const auto bytes = static_cast<DWORD>(buffer.size() * sizeof(std::uint64_t));
  for (auto kind = FileFullDirectoryRestartInfo;; kind = FileFullDirectoryInfo) {
    if (!::GetFileInformationByHandleEx(dir, kind, buffer.data(), bytes)) {
      if (const DWORD error = ::GetLastError(); error != ERROR_NO_MORE_FILES) listed.error = error;
      return listed;
    }
    for (std::size_t offset = 0;;) {
      const auto* entry =
          reinterpret_cast<const FILE_FULL_DIR_INFO*>(reinterpret_cast<const char*>(buffer.data()) + offset);
      const std::wstring_view name(entry->FileName, entry->FileNameLength / sizeof(wchar_t));
      if (name != L"." && name != L"..") listed.names.emplace_back(name);
      if (entry->NextEntryOffset == 0) break;
      offset += entry->NextEntryOffset;
    }
  }
}

}  // namespace psych::host

// psych-windows-test-child: a contract-speaking child for the Windows launcher's tests, where no
// Windows CPython can run. Started by the launcher as CPython is,
//   <self> -I -S -c <loader> <token> <handover pipe> <canary> <ipv4_port> <ipv6_port> <workspace>
// (docs/contract.md, "Channels on Windows"), it checks that the channel and the whole bootstrap
// arrived on the handover pipe, sends `hello` with what it observes of itself and
// its job, waits for `run` (or `abort`), runs the program of test actions (observations.hpp) and
// answers `done` with what it saw. `<self> --sleep SECONDS` is one of the descendants it spawns.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <variant>

#include <winsock2.h>
#include <windows.h>

#include "actions.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"
#include "report.hpp"
#include "platform/windows/text.hpp"

namespace psych::windows::test_child {
namespace {

constexpr int exit_protocol_error = 3;  // the bootstrap's own (docs/contract.md)

bool send_all(SOCKET channel, const std::string& bytes) {
  for (std::size_t sent = 0; sent < bytes.size();) {
    const int n = ::send(channel, bytes.data() + sent, static_cast<int>(bytes.size() - sent), 0);
    if (n == SOCKET_ERROR) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

/// The first frame from the host, bounded as the contract bounds the channel.
std::optional<std::string> first_line(SOCKET channel) {
  protocol::line_reader reader;
  std::optional<std::string> line;
  char buffer[16384];
  while (!line) {
    const int n = ::recv(channel, buffer, sizeof buffer, 0);
    if (n <= 0) return std::nullopt;
    auto fed = reader.feed({buffer, static_cast<std::size_t>(n)}, [&](std::string_view text) {
      if (!line) line.emplace(text);
    });
    if (!fed) return std::nullopt;
  }
  return line;
}

/// Everything on the handover pipe, to the launcher's end of file.
std::string read_handover(HANDLE handover) {
  std::string bytes;
  char buffer[65536];
  DWORD got = 0;
  while (::ReadFile(handover, buffer, sizeof buffer, &got, nullptr) && got > 0) bytes.append(buffer, got);
  ::CloseHandle(handover);
  return bytes;
}

/// Whether `blob` is whole as compile_bootstrap.py makes it: a magic, the code's length, the code,
/// and a source after it. The loader CPython runs reads the same header before it unmarshals.
bool whole_bootstrap(std::string_view blob) {
  if (blob.size() < 8) return false;
  std::uint32_t length = 0;
  for (int i = 7; i >= 4; --i) length = (length << 8) | static_cast<unsigned char>(blob[static_cast<std::size_t>(i)]);
  return blob.size() > 8 + static_cast<std::uint64_t>(length);
}

/// The channel, as the launcher shared it: one WSAPROTOCOL_INFOW on the handover pipe, then the
/// bootstrap, which this child checks arrived whole and does not run.
SOCKET receive_channel(HANDLE handover) {
  const auto bytes = read_handover(handover);
  WSAPROTOCOL_INFOW shared{};
  if (bytes.size() < sizeof shared || !whole_bootstrap(std::string_view(bytes).substr(sizeof shared)))
    return INVALID_SOCKET;
  std::memcpy(&shared, bytes.data(), sizeof shared);
  return ::WSASocketW(FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, &shared, 0, WSA_FLAG_NO_HANDLE_INHERIT);
}

int complain(const char* what) {
  const std::string line = std::string("psych-windows-test-child: ") + what + " (WSA error " +
                           std::to_string(::WSAGetLastError()) + ")\n";
  DWORD written = 0;
  ::WriteFile(::GetStdHandle(STD_ERROR_HANDLE), line.data(), static_cast<DWORD>(line.size()), &written, nullptr);
  return exit_protocol_error;
}

int run(int argc, wchar_t** argv) {
  if (argc == 3 && std::wstring_view(argv[1]) == L"--sleep") {
    ::Sleep(static_cast<DWORD>(std::wcstod(argv[2], nullptr) * 1000));
    return 0;
  }
  // Started as CPython is: the interpreter's options and the loader, then the bootstrap's arguments.
  if (argc != 13 || std::wstring_view(argv[1]) != L"-I" || std::wstring_view(argv[2]) != L"-S" ||
      std::wstring_view(argv[3]) != L"-X" || std::wstring_view(argv[4]) != L"utf8" ||
      std::wstring_view(argv[5]) != L"-c" || std::wstring_view(argv[6]).empty())
    return complain("expected: -I -S -X utf8 -c LOADER TOKEN HANDOVER CANARY IPV4_PORT IPV6_PORT WORKSPACE");
  argv += 6;
  WSADATA winsock{};
  if (::WSAStartup(MAKEWORD(2, 2), &winsock) != 0) return complain("WSAStartup failed");
  const auto channel = receive_channel(reinterpret_cast<HANDLE>(static_cast<std::uintptr_t>(std::wcstoull(argv[2], nullptr, 10))));
  if (channel == INVALID_SOCKET) return complain("no channel and whole bootstrap arrived on the handover pipe");
  const invocation how{.token = narrow(argv[1]),
                       .canary = narrow(argv[3]),
                       .ipv4_port = std::wcstoll(argv[4], nullptr, 10),
                       .ipv6_port = std::wcstoll(argv[5], nullptr, 10),
                       .workspace = narrow(argv[6])};

  const protocol::hello_frame hello{.token = how.token, .report = observe_self(how)};
  if (!send_all(channel, protocol::encode_frame(hello))) return complain("the channel does not take hello");
  const auto line = first_line(channel);
  if (!line) return complain("the channel closed or broke its bounds before run");
  auto frame = protocol::decode_frame<protocol::run_frame, protocol::abort_frame>(*line);
  if (!frame) return complain("the first frame from the host is neither run nor abort");
  if (std::holds_alternative<protocol::abort_frame>(frame.value())) return 0;

  wchar_t self[MAX_PATH * 2] = {};
  const DWORD self_length = ::GetModuleFileNameW(nullptr, self, MAX_PATH * 2);
  const auto outcome = run_program(std::get<protocol::run_frame>(frame.value()).program, {self, self_length}, how.workspace);
  protocol::done_frame done{.ok = !outcome.error, .error = outcome.error};
  done.value = json_text{protocol::encode_json(outcome.seen)};
  if (!send_all(channel, protocol::encode_frame(done))) return complain("the channel does not take done");
  ::shutdown(channel, SD_SEND);
  return 0;
}

}  // namespace
}  // namespace psych::windows::test_child

int wmain(int argc, wchar_t** argv) { return psych::windows::test_child::run(argc, argv); }

// What an MCP server writes to psych's client (src/host/mcp/mcp_client.cpp), through the public
// mcp_client API against a scripted server: the JSON-RPC line reader, response matching, the
// server's own requests and notifications, and the initialize, tools/list and tools/call results.
//
// The input is the server's stdout, cut into sections at each 0x1e byte (ASCII record
// separator). The scripted server (/bin/sh) writes section N when it reads the client's Nth
// request and exits when no section is left, so every exchange ends at once instead of at a time
// limit. The client's request ids count from 1, so the seeds answer "id":1, 2, 3.
//
// Oracle: every outcome is a value (a result or a named mcp_error); the client never crashes,
// hangs past its limits, or leaks (the destructor reaps the server; ASan's leak check runs).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stop_token>
#include <string>
#include <string_view>

#include "input.hpp"
#include "psych/host/mcp.hpp"

namespace {

// Requests carry both "id" and "method"; notifications and the client's replies to the server's
// own requests are not answered.
constexpr const char* server_script = R"(i=0
while IFS= read -r line; do
  case $line in *'"id":'*'"method":'*) ;; *) continue ;; esac
  i=$((i+1))
  [ -e "$1/$i" ] || exit 0
  cat "$1/$i"
done
)";

const std::filesystem::path& sections_dir() {
  static const std::filesystem::path dir = [] {
    std::string d = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    d += "/psych-fuzz-mcp-XXXXXX";
    if (::mkdtemp(d.data()) == nullptr) std::abort();
    static const std::string kept = d;
    std::atexit([] { std::filesystem::remove_all(kept); });
    return std::filesystem::path{d};
  }();
  return dir;
}

void write_sections(std::string_view script) {
  const std::filesystem::path& dir = sections_dir();
  for (const auto& entry : std::filesystem::directory_iterator{dir}) std::filesystem::remove(entry.path());
  for (int n = 1; n <= 8; ++n) {
    const std::size_t cut = script.find('\x1e');
    std::ofstream{dir / std::to_string(n), std::ios::binary} << script.substr(0, cut);
    if (cut == std::string_view::npos) return;
    script.remove_prefix(cut + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  write_sections(std::string_view{reinterpret_cast<const char*>(data), size});
  const psych::mcp_server_config config{
      .name = "fuzz",
      .command = {"/bin/sh", "-c", server_script, "sh", sections_dir().string()},
      .environment = {},
      // Only a section that answers nothing waits this long; keep it short so such inputs stay cheap.
      .timeout = std::chrono::milliseconds{50},
  };
  auto client = psych::mcp_client::start(config);
  if (!client) {
    (void)client.error().message();
    return 0;
  }
  auto tools = client.value()->list_tools();
  const std::string tool = tools && !tools.value().empty() ? tools.value().front().name : "echo";
  auto called = client.value()->call_tool(tool, R"({"text":"x"})", std::stop_token{});
  if (!called) (void)called.error().message();
  (void)client.value()->take_tools_changed();
  (void)client.value()->usable();
  return 0;
}

// The psych command line, end to end: exit statuses, --json, bad input,
// and the unprivileged path under a throwaway user.
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include "../tests/unit/terminal_checks.hpp"
#include "backends_posix.hpp"
#include "host_kernel.hpp"

namespace {

struct command_result {
  int status = -1;
  std::string output;
};

command_result shell(const std::string& command) {
  command_result r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  while (const auto n = std::fread(buffer.data(), 1, buffer.size(), pipe)) r.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// A program file any local account can read.
class program_file {
 public:
  explicit program_file(const std::string& text) {
    path_ = conformance::temp_root() + "/../psych-conformance-program-" + std::to_string(::getpid()) + "-" +
            std::to_string(counter_++) + ".py";
    std::ofstream(path_) << text;
    ::chmod(path_.c_str(), 0644);
  }
  ~program_file() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

const std::string psych_cli = PSYCH_CLI_PATH;

/// What an unprivileged worker must add to use linux-process at all: its child keeps the worker's
/// own uid, which the backend accepts only when told to (identity is then `unavailable`). A root
/// worker drops the child to a dedicated uid and needs nothing.
std::string same_uid_if_unprivileged() { return ::geteuid() == 0 ? "" : " --allow-same-uid"; }

using psych::testing::terminal_control_in;

}  // namespace

TEST_CASE("psych run: exit statuses and readable output") {
  SUBCASE("0: the program completed") {
    program_file p("print('hi')\nreturn {'answer': 42}\n");
    const auto r = shell(psych_cli + " run " + p.path());
    CHECK(r.status == 0);
    CHECK(r.output.find("value: {\"answer\":42}") != std::string::npos);
    CHECK(r.output.find("| hi") != std::string::npos);
    CHECK(r.output.find("network") != std::string::npos);
  }
  SUBCASE("1: the program failed, the traceback is printed") {
    program_file p("1/0\n");
    const auto r = shell(psych_cli + " run " + p.path());
    CHECK(r.status == 1);
    CHECK(r.output.find("ZeroDivisionError") != std::string::npos);
    CHECK(r.output.find("line 1") != std::string::npos);
  }
  SUBCASE("1: a limit hit is named") {
    program_file p("import time\ntime.sleep(30)\n");
    const auto r = shell(psych_cli + " run --wall-seconds 0.5 " + p.path());
    CHECK(r.status == 1);
    CHECK(r.output.find("limit hit: wall_seconds") != std::string::npos);
  }
  SUBCASE("2: usage and configuration errors") {
    CHECK(shell(psych_cli + " run /nonexistent/program.py").status == 2);
    CHECK(shell(psych_cli + " run --wall-seconds -1 x.py").output.find("invalid_limit") != std::string::npos);
    CHECK(shell(psych_cli + " frobnicate").status == 2);
  }
  SUBCASE("2: a config file that is missing, malformed, or holds a bad limit") {
    program_file p("return 1\n");
    const auto missing = shell(psych_cli + " run --config /nonexistent/psych.json " + p.path());
    CHECK(missing.status == 2);
    CHECK(missing.output.find("unreadable_file") != std::string::npos);
    program_file malformed("{\"limit_ceiling\": {\"wall_seconds\": \"soon\"}}");
    const auto wrong = shell(psych_cli + " run --config " + malformed.path() + " " + p.path());
    CHECK(wrong.status == 2);
    CHECK(wrong.output.find("frame_wrong_kind") != std::string::npos);
    CHECK(wrong.output.find("limit_ceiling.wall_seconds") != std::string::npos);
    program_file negative("{\"limit_ceiling\": {\"cpu_seconds\": -1}}");
    const auto bad = shell(psych_cli + " run --config " + negative.path() + " " + p.path());
    CHECK(bad.status == 2);
    CHECK(bad.output.find("invalid_limit") != std::string::npos);
    program_file unknown("{\"default_limits\": {\"wall_seconds\": 5}}");
    const auto old_name = shell(psych_cli + " run --config " + unknown.path() + " " + p.path());
    CHECK(old_name.status == 2);
    CHECK(old_name.output.find("frame_unknown_member") != std::string::npos);
    program_file duplicate("{\"temp_root\": \"/tmp\", \"temp_root\": \"/var/tmp\"}");
    CHECK(shell(psych_cli + " run --config " + duplicate.path() + " " + p.path()).output.find("json_duplicate_key") !=
          std::string::npos);
  }
  SUBCASE("a config file narrows the deployment's limits") {
    program_file config("{\"limit_ceiling\": {\"wall_seconds\": 0.5}}");
    program_file p("import time\ntime.sleep(10)\n");
    const auto r = shell(psych_cli + " run --config " + config.path() + " " + p.path());
    CHECK(r.status == 1);
    CHECK(r.output.find("limit hit: wall_seconds") != std::string::npos);
  }
  SUBCASE("3: refused, because the pinned backend does not reach isolated") {
    program_file p("return 1\n");
    const auto r =
        shell(psych_cli + " run --backend linux-process --isolation isolated" + same_uid_if_unprivileged() + " " + p.path());
    CHECK(r.status == 3);
    CHECK(r.output.find("isolation_unreachable") != std::string::npos);
  }
  SUBCASE("0: isolated where this host allows namespaces, else refused with the reason") {
    program_file p("return 1\n");
    const auto r = shell(psych_cli + " run --isolation isolated " + p.path());
    if (r.status == 0) {
      CHECK(r.output.find("isolation: isolated") != std::string::npos);
    } else {
      CHECK(r.status == 3);
      MESSAGE("no isolated backend here: " << r.output);
    }
  }
  SUBCASE("2: an unknown backend fails loudly") {
    program_file p("return 1\n");
    const auto r = shell(psych_cli + " run --backend linux-teleport " + p.path());
    CHECK(r.status == 2);
    CHECK(r.output.find("linux-teleport") != std::string::npos);
  }
  SUBCASE("^C cancels: the tree is killed and the result still printed") {
    program_file p("import time\nprint('started', flush=True)\ntime.sleep(30)\n");
    const auto r = shell(psych_cli + " run " + p.path() + " & sleep 1.5; kill -INT $!; wait $!");
    CHECK(r.status == 1);
    CHECK(r.output.find("failure: cancelled") != std::string::npos);
    CHECK(r.output.find("| started") != std::string::npos);
  }
  SUBCASE("the program can come from standard input") {
    const auto r = shell("echo 'return 6 * 7' | " + psych_cli + " run -");
    CHECK(r.status == 0);
    CHECK(r.output.find("value: 42") != std::string::npos);
  }
}

TEST_CASE("psych run --json uses the spec's result names") {
  program_file p("print('out')\nreturn [1, 'two']\n");
  const auto r = shell(psych_cli + " run --json --backend linux-process" + same_uid_if_unprivileged() + " " + p.path());
  CHECK(r.status == 0);
  for (const char* key : {"\"value\":[1,\"two\"]", "\"failure\":null", "\"stdout\":\"out\\n\"", "\"stderr\":\"\"",
                          "\"stdout_size\":4", "\"stderr_size\":0", "\"limit_hit\":null", "\"cancelled\":false",
                          "\"duration_seconds\":", "\"isolation\":\"process\"", "\"guarantees\":{\"filesystem\":",
                          "\"network_denied\":true", "\"artifacts\":[]", "\"artifacts_omitted\":0"})
    CHECK_MESSAGE(r.output.find(key) != std::string::npos, key);
}

namespace {

/// What the program below prints, returns and raises: each way a program could drive a terminal. In
/// Python source, so the program file itself is plain ASCII; U+009B is text, encoded C2 9B on output.
const char* const hostile_python =
    R"PY(SEQ = ("A\x1b]52;c;aGVsbG8=\x07" "B\x1b]0;title\x07" "C\x1b]8;;http://x.invalid/\x1b\\link\x1b]8;;\x1b\\"
       "D\x1b[2J" "E\x07" "F\x08" "G\r" "H\x9b2J" "I\x7f")
import sys
print(SEQ, flush=True)
sys.stdout.buffer.write(b"raw \x9b2J \xff\n")
sys.stdout.buffer.flush()
print(SEQ, file=sys.stderr, flush=True)
sys.stderr.buffer.write(b"raw \x9b2J\n")
sys.stderr.buffer.flush()
open("art\x1b]0;t\x07\x9b.txt", "w").write("x")
open(b"raw\x9b\xff.bin", "w").write("x")
)PY";
/// The same sequences as the bytes the program writes for SEQ.
const std::string hostile_utf8 =
    "A\x1b]52;c;aGVsbG8=\x07" "B\x1b]0;title\x07" "C\x1b]8;;http://x.invalid/\x1b\\link\x1b]8;;\x1b\\"
    "D\x1b[2J" "E\x07" "F\x08" "G\r" "H\xc2\x9b" "2J" "I\x7f";
/// How the readable report spells SEQ.
const std::string hostile_shown =
    "A\\x1b]52;c;aGVsbG8=\\x07B\\x1b]0;title\\x07C\\x1b]8;;http://x.invalid/\\x1b\\link\\x1b]8;;\\x1b\\"
    "D\\x1b[2JE\\x07F\\x08G\\rH\\x9b2JI\\x7f";

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++count;
  return count;
}

rapidjson::Document json_of(const std::string& output) {
  rapidjson::Document doc;
  doc.Parse(output.c_str(), output.size());
  REQUIRE_MESSAGE(!doc.HasParseError(), output);
  REQUIRE(doc.IsObject());
  return doc;
}

std::string string_at(const rapidjson::Value& object, const char* key) {
  REQUIRE_MESSAGE(object.HasMember(key), key);
  REQUIRE_MESSAGE(object[key].IsString(), key);
  return {object[key].GetString(), object[key].GetStringLength()};
}

}  // namespace

TEST_CASE("psych run: a program cannot drive the operator's terminal") {
  const std::string replacement = "\xef\xbf\xbd";  // previews show bytes that are not UTF-8 as U+FFFD
  SUBCASE("printed to stdout and stderr, returned as the value, used as artifact names") {
    program_file p(std::string(hostile_python) + "return SEQ\n");
    const auto readable = shell(psych_cli + " run --collect-artifacts " + p.path());
    CHECK(readable.status == 0);
    CHECK_MESSAGE(terminal_control_in(readable.output).empty(),
                  terminal_control_in(readable.output) << "\n" << readable.output);
    // The value is JSON text: its C0 controls arrive \u-escaped, but DEL and U+009B arrive raw.
    CHECK(readable.output.find("value: \"A\\u001b]52;c;aGVsbG8=\\u0007B") != std::string::npos);
    CHECK(readable.output.find("F\\bG\\rH\\x9b2JI\\x7f\"") != std::string::npos);
    CHECK(count_of(readable.output, "  | " + hostile_shown + "\n") == 2);  // stdout and stderr
    CHECK(readable.output.find("attachment: artifact:art\\x1b]0;t\\x07\\x9b.txt") != std::string::npos);
    CHECK(readable.output.find("attachment: artifact:raw\\x9b\\xff.bin") != std::string::npos);  // not UTF-8

    const auto json = shell(psych_cli + " run --json --collect-artifacts " + p.path());
    CHECK(json.status == 0);
    CHECK(json.output.find('\x1b') == std::string::npos);  // JSON escapes control characters
    const auto doc = json_of(json.output);
    CHECK(string_at(doc, "stdout") == hostile_utf8 + "\nraw " + replacement + "2J " + replacement + "\n");
    CHECK(string_at(doc, "stderr") == hostile_utf8 + "\nraw " + replacement + "2J\n");
    REQUIRE(doc["value"].IsString());
    CHECK(string_at(doc, "value") == hostile_utf8);
  }
  SUBCASE("raised in an exception: the failure message and the traceback") {
    program_file p(std::string(hostile_python) + "raise ValueError(SEQ)\n");
    const auto readable = shell(psych_cli + " run " + p.path());
    CHECK(readable.status == 1);
    CHECK_MESSAGE(terminal_control_in(readable.output).empty(),
                  terminal_control_in(readable.output) << "\n" << readable.output);
    CHECK(count_of(readable.output, "  | " + hostile_shown + "\n") == 2);
    CHECK(readable.output.find("failure: exception: ") != std::string::npos);
    CHECK(readable.output.find(hostile_shown + "\n", readable.output.find("failure: exception: ")) !=
          std::string::npos);
    CHECK(readable.output.find("  ValueError: " + hostile_shown + "\n") != std::string::npos);  // the traceback

    const auto json = shell(psych_cli + " run --json " + p.path());
    CHECK(json.status == 1);
    CHECK(json.output.find('\x1b') == std::string::npos);
    const auto doc = json_of(json.output);
    REQUIRE(doc["failure"].IsObject());
    CHECK(string_at(doc["failure"], "message").find(hostile_utf8) != std::string::npos);
    CHECK(string_at(doc["failure"], "traceback").find("ValueError: " + hostile_utf8) != std::string::npos);
  }
}

TEST_CASE("psych describe: a table an operator can read, and problems instead of crashes") {
  SUBCASE("ready") {
    // Ready wherever a backend is available: always for a root worker (linux-process drops the
    // child to a dedicated uid); for an unprivileged one only where it may create user
    // namespaces, since linux-process refuses the worker's own uid without --allow-same-uid.
    const auto backends = psych::detect_local_backends();
    const bool any_available =
        std::any_of(backends.begin(), backends.end(), [](const psych::backend_info& b) { return b.available; });
    if (::geteuid() == 0) CHECK(any_available);
    const auto r = shell(psych_cli + " describe");
    CHECK(r.status == (any_available ? 0 : 1));
    CHECK(r.output.find("linux-process") != std::string::npos);
    CHECK(r.output.find("linux-namespaces") != std::string::npos);
    // Another platform's backends are rows too, each unavailable with its reason.
    CHECK(r.output.find("macos-process      process   unavailable   this host is Linux; psych-launch-macos runs "
                        "only on macOS") != std::string::npos);
    CHECK(r.output.find("windows-process    process   unavailable   this host is Linux; psych-launch-windows runs "
                        "only on Windows") != std::string::npos);
    CHECK(r.output.find("interpreter:") != std::string::npos);
    if (::geteuid() != 0) {
      CHECK(r.output.find("allow_same_uid") != std::string::npos);  // why linux-process is not available
      if (any_available) {
        CHECK(r.output.find("chosen: linux-namespaces   ready: yes   isolation reached: isolated") != std::string::npos);
        CHECK(r.output.find("identity       unavailable") != std::string::npos);  // the worker's own uid, mapped
      }
    }
  }
  SUBCASE("a launcher that is not found") {
    const auto r = shell("PSYCH_LAUNCHER=/nonexistent/psych-launch-linux " + psych_cli + " describe");
    CHECK(r.status == 1);
    CHECK(r.output.find("problem:") != std::string::npos);
    CHECK(r.output.find("/nonexistent/psych-launch-linux") != std::string::npos);
  }
  SUBCASE("a launcher that is not executable") {
    program_file not_executable("not a launcher");
    const auto r = shell("PSYCH_LAUNCHER=" + not_executable.path() + " " + psych_cli + " describe --json");
    CHECK(r.status == 1);
    CHECK(r.output.find("\"ready\":false") != std::string::npos);
    CHECK(r.output.find("launcher_unavailable") != std::string::npos);
  }
}

TEST_CASE("the unprivileged path, as a throwaway user") {
  if (::geteuid() != 0) {
    psych::testing::skip_case("creating a throwaway user needs root; this run already is unprivileged");
    return;
  }
  if (shell("command -v useradd && command -v runuser").status != 0) {
    psych::testing::skip_case("useradd/runuser are not installed");
    return;
  }
  const std::string user = "psychconf" + std::to_string(::getpid() % 100000);
  REQUIRE(shell("useradd --system --no-create-home --shell /usr/sbin/nologin " + user).status == 0);
  const passwd* entry = ::getpwnam(user.c_str());
  REQUIRE(entry != nullptr);
  const auto uid = static_cast<std::int64_t>(entry->pw_uid);
  program_file p("import os\nreturn os.getuid()\n");
  const std::string as_user = "runuser -u " + user + " -- ";

  SUBCASE("PROCESS without allow_same_uid: the worker's own uid is refused loudly") {
    const auto r = shell(as_user + psych_cli + " run --backend linux-process " + p.path());
    CHECK(r.status == 2);
    CHECK(r.output.find("allow_same_uid") != std::string::npos);
  }
  SUBCASE("ISOLATED: the user's own uid mapped to the namespace's root, the boundary graded") {
    program_file q("import os\nreturn [os.getuid(), open('/proc/self/uid_map').read().split()]\n");
    const auto r = shell(as_user + psych_cli + " run --json --isolation isolated " + q.path());
    if (r.status != 0) {
      MESSAGE("unprivileged user namespaces are not available here: " << r.output);
    } else {
      CHECK(r.output.find("\"value\":[0,[\"0\",\"" + std::to_string(uid) + "\",\"1\"]]") != std::string::npos);
      CHECK(r.output.find("\"isolation\":\"isolated\"") != std::string::npos);
      CHECK(r.output.find("\"identity\":\"unavailable\"") != std::string::npos);
      CHECK(r.output.find("\"filesystem\":\"enforced\"") != std::string::npos);
      CHECK(r.output.find("\"network\":\"enforced\"") != std::string::npos);
    }
  }
  SUBCASE("PROCESS with allow_same_uid it runs, and says identity is unavailable") {
    const auto r = shell(as_user + psych_cli + " run --json --backend linux-process --allow-same-uid " + p.path());
    CHECK(r.status == 0);
    CHECK(r.output.find("\"value\":" + std::to_string(uid)) != std::string::npos);
    CHECK(r.output.find("\"identity\":\"unavailable\"") != std::string::npos);
    CHECK(r.output.find("\"process_count\":\"unverified\"") != std::string::npos);
    if (conformance::host_landlock_abi() > 0) {
      // Landlock keeps even a same-uid child off the worker's canary; not a mount boundary.
      CHECK(r.output.find("\"filesystem\":\"unverified\"") != std::string::npos);
      CHECK(r.output.find("read the host canary") == std::string::npos);
    } else {
      // The worker's own canary is readable by a same-uid child: exposure, said plainly.
      CHECK(r.output.find("\"filesystem\":\"unavailable\"") != std::string::npos);
      CHECK(r.output.find("read the host canary") != std::string::npos);
    }
    CHECK(r.output.find("\"network\":\"enforced\"") != std::string::npos);
  }
  CHECK(conformance::processes_of(uid).empty());
  // Nothing of the user's may remain in the shared temp directories.
  CHECK(shell("find /tmp /var/tmp /dev/shm -maxdepth 1 -uid " + std::to_string(uid) + " | grep -q .").status != 0);
  CHECK(shell("userdel " + user).status == 0);
}

namespace {

/// An MCP server that offers one tool, `argv`, answering with its own arguments and the variable
/// PSYCH_TEST_GREETING: what --mcp-config gave it.
const char* const argv_server = R"PY(import json, os, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get("method"), msg.get("id")
    if id is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                                     "serverInfo": {"name": "argv", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "argv", "inputSchema": {"type": "object"}}]}})
    else:
        text = json.dumps([sys.argv[1:], os.environ.get("PSYCH_TEST_GREETING")])
        send({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
)PY";

}  // namespace

TEST_CASE("psych run: the inputs a new user got wrong are refused or explained") {
  SUBCASE("a directory as PROGRAM is unreadable_file, status 2") {
    const auto r = shell(psych_cli + " run " + conformance::temp_root());
    CHECK(r.status == 2);
    CHECK(r.output.find("unreadable_file") != std::string::npos);
    CHECK(r.output.find("is a directory") != std::string::npos);
  }
  SUBCASE("invalid UTF-8 is the syntax error Python raises, naming the byte and its offset") {
    program_file p("x = 1\ny = \"caf\xe9\"\n");
    const auto r = shell(psych_cli + " run --json " + p.path());
    CHECK(r.status == 1);
    const auto doc = json_of(r.output);
    REQUIRE(doc["failure"].IsObject());
    CHECK(string_at(doc["failure"], "kind") == "syntax_error");
    CHECK(string_at(doc["failure"], "message").find("'utf-8' codec can't decode byte 0xe9 in position 14: invalid "
                                                    "continuation byte") != std::string::npos);
    CHECK(doc["failure"]["line"].GetInt() == 2);
  }
  SUBCASE("a NUL byte: not a text file, status 2, never the program's syntax error") {
    program_file p(std::string("x = 1\n\0\n", 8));
    const auto r = shell(psych_cli + " run " + p.path());
    CHECK(r.status == 2);
    CHECK(r.output.find("not a text file (a NUL byte at offset 6)") != std::string::npos);
    CHECK(r.output.find("syntax_error") == std::string::npos);
  }
  SUBCASE("sizes take the common units; a bad one lists the forms accepted") {
    program_file p("return 1\n");
    CHECK(shell(psych_cli + " run --memory-bytes 1.5G --file-size-bytes 300MB " + p.path()).status == 0);
    const auto bad = shell(psych_cli + " run --memory-bytes 12Q " + p.path());
    CHECK(bad.status == 2);
    CHECK(bad.output.find("KiB, MiB, GiB, TiB (binary") != std::string::npos);
    const auto huge = shell(psych_cli + " run --wall-seconds 1e999 " + p.path());
    CHECK(huge.status == 2);
    CHECK(huge.output.find("invalid_limit") != std::string::npos);
  }
  SUBCASE("a memory limit too small for the interpreter says so, whichever backend tried") {
    program_file p("return 1\n");
    const auto r = shell(psych_cli + " run --memory-bytes 1 " + p.path());
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("below what the interpreter needs to start (about 16 MiB") != std::string::npos);
    CHECK(r.output.find("limit hit: memory_bytes") != std::string::npos);
    CHECK(r.output.find("network denied: no") == std::string::npos);
  }
  SUBCASE("an unknown backend lists the names there are") {
    const auto r = shell(psych_cli + " run --backend nope /dev/null");
    CHECK(r.status == 2);
    CHECK(r.output.find("linux-process, linux-namespaces") != std::string::npos);
    CHECK(r.output.find("container") != std::string::npos);
  }
  SUBCASE("a missing value reads as JSON's null") {
    program_file p("x = 1\n");
    CHECK(shell(psych_cli + " run " + p.path()).output.find("value: null\n") != std::string::npos);
  }
  SUBCASE("--mcp with an echo for a server says it answered with a request") {
    program_file p("return 1\n");
    const auto r = shell(psych_cli + " run --mcp x=/bin/cat " + p.path());
    CHECK(r.status == 2);
    CHECK(r.output.find("with a request, not a response") != std::string::npos);
  }
  SUBCASE("--mcp-config: arguments with spaces and an environment, as MCP clients write them") {
    program_file server(argv_server);
    program_file config(R"({"mcpServers": {"a": {"command": "python3", "args": [")" + server.path() +
                        R"(", "two words"], "env": {"PSYCH_TEST_GREETING": "hi there"}}}, "theme": "dark"})");
    program_file p("r = await a__argv()\nreturn r['content'][0]['text']\n");
    const auto r = shell(psych_cli + " run --json --mcp-config " + config.path() + " " + p.path());
    CHECK_MESSAGE(r.status == 0, r.output);
    const auto doc = json_of(r.output);
    REQUIRE(doc["value"].IsString());
    CHECK(std::string(doc["value"].GetString()) == "[[\"two words\"], \"hi there\"]");
    program_file misspelt(R"({"mcpServers": {"a": {"command": "python3", "argz": []}}})");
    const auto bad = shell(psych_cli + " run --mcp-config " + misspelt.path() + " " + p.path());
    CHECK(bad.status == 2);
    CHECK(bad.output.find(misspelt.path() + ": mcpServers.a.argz: no such member") != std::string::npos);
  }
}

TEST_CASE("psych run --stream: the output as it runs, escaped; with --json, NDJSON events then the result") {
  program_file p("import time\nprint('first', flush=True)\ntime.sleep(0.3)\nprint('second')\nreturn 3\n");
  const std::string base = psych_cli + " run --backend linux-process" + same_uid_if_unprivileged();
  const auto events = shell(base + " --json --stream " + p.path());
  CHECK(events.status == 0);
  std::vector<std::string> lines;
  for (std::size_t at = 0, newline; (newline = events.output.find('\n', at)) != std::string::npos; at = newline + 1)
    lines.push_back(events.output.substr(at, newline - at));
  REQUIRE_MESSAGE(lines.size() >= 2, events.output);
  std::string streamed;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    const auto event = json_of(lines[i]);
    CHECK(string_at(event, "event") == "output");
    CHECK(string_at(event, "stream") == "stdout");
    CHECK(event["offset"].GetUint64() == streamed.size());
    CHECK(event["skipped"].GetUint64() == 0);
    streamed += string_at(event, "data");
  }
  CHECK(streamed == "first\nsecond\n");
  const auto result = json_of(lines.back());  // the last line is the result, as without --stream
  CHECK(string_at(result, "stdout") == "first\nsecond\n");

  program_file hostile(hostile_python);
  const auto shown = shell(base + " --stream " + hostile.path());
  CHECK(shown.status == 0);
  CHECK_MESSAGE(terminal_control_in(shown.output).empty(), shown.output);
  CHECK(count_of(shown.output, hostile_shown) == 2);  // streamed once per stream, not again in the report
  CHECK(shown.output.find("shown as it ran") != std::string::npos);

  const auto both = shell(base + " --stream --no-stream " + p.path());
  CHECK(both.status == 2);
}

// Output, spill and artifacts: previews for the model, the bytes in a BlobStore, windows by line or
// pattern, artifacts by workspace-relative path with every omission counted. Every backend.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "backends.hpp"
#include "invoker.hpp"
#include "psych/host/read_tool_output.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/utf8.hpp"

using namespace psych;
using conformance::for_each_backend;

namespace {

/// A BlobStore of the case's own, removed with everything in it.
struct scratch_store {
  std::string root = conformance::make_scratch_directory("psych-blobs-");
  std::unique_ptr<directory_blob_store> store;
  scratch_store() {
    auto opened = open_directory_blob_store(root + "/store");
    REQUIRE_MESSAGE(opened, (opened ? "" : opened.error().message()));
    store = std::move(opened).value();
  }
  ~scratch_store() {
    store.reset();  // first: Windows removes no file that is still open
    std::filesystem::remove_all(root);
  }
};

/// The cases whose programs make what only POSIX has (symlinks to /etc, FIFOs, sockets' inodes,
/// sessions); the walk over Windows' own kinds of entry is tests/windows_host's (test_files_windows.cpp).
bool posix_entries(const conformance::backend_under_test& backend) { return !conformance::on_windows(backend); }

const result_attachment* attachment_named(const sandbox_result& r, std::string_view name) {
  const auto found = std::ranges::find(r.attachments, name, &result_attachment::name);
  return found == r.attachments.end() ? nullptr : &*found;
}

execution_terms with_output(const sandbox& sb, output_policy output, artifact_policy artifacts = {}) {
  auto terms = conformance::terms_for(sb);
  terms.output = output;
  terms.artifacts = artifacts;
  return terms;
}

}  // namespace

TEST_CASE("output: previews are deterministic, never split a UTF-8 character, and say what they left out") {
  for_each_backend([](sandbox& sb, const auto&) {
    scratch_store blobs;
    // 3-byte characters, so a cut at any byte count lands inside one two times in three.
    const char* program = "import sys\nsys.stdout.write('\\u20ac' * 5000)\nsys.stderr.write('short')\nreturn 1";
    const output_policy policy{.preview_bytes = 1000, .max_bytes = 1 << 20};
    const auto first = sb.run({.program = program, .terms = with_output(sb, policy), .blobs = blobs.store.get()});
    const auto second = sb.run({.program = program, .terms = with_output(sb, policy), .blobs = blobs.store.get()});
    REQUIRE_MESSAGE(first.ok(), (first.failure ? first.failure->message : ""));
    REQUIRE(second.ok());
    const auto* out = attachment_named(first, "stdout");
    REQUIRE(out);
    CHECK(out->preview == attachment_named(second, "stdout")->preview);
    CHECK(out->preview == first.stdout_preview);
    CHECK(utf8::sanitize(out->preview) == out->preview);  // valid UTF-8 as it stands
    CHECK(out->preview.find("bytes omitted") != std::string::npos);
    CHECK(out->size_bytes == 15000);
    CHECK(out->location == attachment_location::blob);
    CHECK(out->handle == attachment_named(second, "stdout")->handle);  // the same bytes, the same address
    CHECK(out->bytes_let_go == 0);
    const auto* err = attachment_named(first, "stderr");
    REQUIRE(err);
    CHECK(err->location == attachment_location::inline_bytes);
    CHECK(err->preview == "short");
    CHECK(err->handle.empty());
    const auto* value = attachment_named(first, "value");
    REQUIRE(value);
    CHECK(value->preview == "1");
    CHECK(first.bindings_spent.preserved == 15000);
  });
}

TEST_CASE("output: REQUIRED with no BlobStore fails loudly before anything runs; WHEN_AVAILABLE records what it let go") {
  for_each_backend([](sandbox& sb, const auto&) {
    const char* program = "print('x' * 99999)\nreturn 1";
    const auto required =
        sb.run({.program = program,
                .terms = with_output(sb, {.preview_bytes = 100, .preserve = output_preservation::required})});
    REQUIRE(required.failure);
    CHECK(required.failure->kind == failure_kind::preservation_unavailable);
    CHECK(required.stdout_size == 0);
    CHECK_FALSE(required.isolation);  // nothing ran
    const auto lenient = sb.run({.program = program, .terms = with_output(sb, {.preview_bytes = 100})});
    REQUIRE_MESSAGE(lenient.ok(), (lenient.failure ? lenient.failure->message : ""));
    const auto* out = attachment_named(lenient, "stdout");
    REQUIRE(out);
    CHECK(out->location == attachment_location::preview_only);
    CHECK(out->handle.empty());
    CHECK(out->size_bytes == 100000);
    CHECK(out->bytes_let_go > 99800);
    CHECK(out->bytes_let_go < 100000);
  });
}

TEST_CASE("output: a preserved stream is read by line window or pattern, and never by another tenant") {
  for_each_backend([](sandbox& sb, const auto&) {
    scratch_store blobs;
    const auto r = sb.run({.program = "for i in range(5000):\n    print(f'line {i} ' + ('needle' if i % 1000 == 7 else 'hay'))",
                           .terms = with_output(sb, {.preview_bytes = 200}),
                           .blobs = blobs.store.get(),
                           .tenant = "tenant-a"});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    const auto* out = attachment_named(r, "stdout");
    REQUIRE(out);
    REQUIRE(out->location == attachment_location::blob);
    const auto window = read_tool_output(*blobs.store, "tenant-a", out->handle, {.offset = 10, .limit = 3});
    REQUIRE_MESSAGE(window, (window ? "" : window.error().message()));
    REQUIRE(window.value().lines.size() == 3);
    CHECK(window.value().lines[0].text == "line 10 hay");
    CHECK(window.value().total_lines == 5000);
    CHECK(window.value().next_offset == 13u);
    const auto found =
        read_tool_output(*blobs.store, "tenant-a", out->handle, {.limit = 10, .pattern = std::string("needle$")});
    REQUIRE(found);
    REQUIRE(found.value().lines.size() == 5);
    CHECK(found.value().lines[4].number == 4007);
    const auto hostile = read_tool_output(*blobs.store, "tenant-a", out->handle, {.pattern = std::string("(a)\\1")});
    REQUIRE_FALSE(hostile);
    CHECK(hostile.error().kind == error_kind::output_pattern_rejected);
    const auto other = read_tool_output(*blobs.store, "tenant-b", out->handle, {});
    REQUIRE_FALSE(other);
    CHECK(other.error().kind == error_kind::blob_not_found);
  });
}

TEST_CASE("output: what a program printed before its wall clock or a cancel reaches the result") {
  for_each_backend([](sandbox& sb, const auto&) {
    // Printed into the interpreter's buffer, never flushed by the program, then blocked or spinning
    // until the host ends it: the bootstrap's flusher has sent it (docs/output.md).
    for (const char* rest : {"time.sleep(30)\n", "while True:\n    pass\n"}) {
      const auto r = conformance::run(
          sb, fmt::format("import sys, time\nprint('early line')\nsys.stderr.write('partial')\n{}", rest),
          {.cpu_seconds = 10.0, .wall_seconds = 1.0});
      REQUIRE(r.failure);
      CHECK(r.failure->kind == failure_kind::timeout);
      CHECK(r.limit_hit == limit_name::wall_seconds);
      CHECK_MESSAGE(r.stdout_data == "early line\n", rest);
      CHECK_MESSAGE(r.stderr_data == "partial", rest);
    }
    std::stop_source source;
    std::jthread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      source.request_stop();
    });
    const auto cancelled =
        conformance::run(sb, "import time\nprint('early line')\ntime.sleep(30)\n", {}, source.get_token());
    REQUIRE(cancelled.failure);
    CHECK(cancelled.failure->kind == failure_kind::cancelled);
    CHECK(cancelled.stdout_data == "early line\n");
  });
}

TEST_CASE("artifacts: files come back by workspace-relative path; every other kind of entry is counted, never followed") {
  for_each_backend(posix_entries, [](sandbox& sb, const auto&) {
    scratch_store blobs;
    const auto r = sb.run({.program = R"PY(
import os, stat
os.makedirs("out/deep", exist_ok=True)
open("out/report.txt", "w").write("the report")
open("out/deep/data.bin", "wb").write(bytes(range(256)) * 100)
os.symlink("/etc/passwd", "passwd-link")
os.symlink("/etc", "etc-link")
os.symlink("/nowhere", "dangling")
open("linked", "w").write("two names")
os.link("linked", "linked-too")
os.mkfifo("pipe")
os.mknod("sock", 0o600 | stat.S_IFSOCK)  # a socket's inode without a socket: socket() is refused
return sorted(os.listdir("."))
)PY",
                           .terms = with_output(sb, {.preview_bytes = 100},
                                                {.collection = artifact_collection::collect}),
                           .blobs = blobs.store.get()});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    std::vector<std::string> paths;
    for (const auto& a : r.artifacts) paths.push_back(a.path);
    CHECK(paths == std::vector<std::string>{"out/deep/data.bin", "out/report.txt"});
    CHECK(r.artifacts_omitted == 7);
    CHECK(r.artifacts_omitted_by_reason.at(omission_reason::symlink) == 3);
    CHECK(r.artifacts_omitted_by_reason.at(omission_reason::hardlink) == 2);
    CHECK(r.artifacts_omitted_by_reason.at(omission_reason::fifo) == 1);
    CHECK(r.artifacts_omitted_by_reason.at(omission_reason::socket) == 1);
    const auto* report = attachment_named(r, "artifact:out/report.txt");
    REQUIRE(report);
    CHECK(report->location == attachment_location::inline_bytes);
    CHECK(report->preview == "the report");
    const auto* data = attachment_named(r, "artifact:out/deep/data.bin");
    REQUIRE(data);
    CHECK(data->location == attachment_location::blob);
    CHECK(data->size_bytes == 25600);
    for (const auto& a : r.attachments) CHECK(a.name.find(conformance::temp_root()) == std::string::npos);
  });
}

TEST_CASE("artifacts: a program racing to swap a directory for a symlink gains nothing") {
  for_each_backend(posix_entries, [](sandbox& sb, const auto&) {
    // A grandchild keeps swapping `d` between a directory holding a file and a symlink to /etc, so
    // whatever instant the walk comes, it can only see one or the other; the host ends the tree
    // before it walks, and opens nothing but beneath the workspace either way.
    const auto r = sb.run({.program = R"PY(
import os, subprocess, sys, time
os.makedirs("real")
open("real/hostname", "w").write("mine")
os.symlink("/etc", "link")
racer = "import os\nwhile True:\n    os.rename('real', 'd'); os.rename('d', 'real')\n    os.rename('link', 'd'); os.rename('d', 'link')\n"
subprocess.Popen([sys.executable, "-c", racer], start_new_session=True)
time.sleep(0.3)
return 1
)PY",
                           .terms = with_output(sb, {}, {.collection = artifact_collection::collect})});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    std::string host_hostname;
    if (FILE* f = std::fopen("/etc/hostname", "r")) {
      char buffer[256] = {};
      host_hostname.assign(buffer, std::fread(buffer, 1, sizeof buffer - 1, f));
      std::fclose(f);
    }
    for (const auto& a : r.artifacts) {
      CHECK(a.path.find("hostname") != std::string::npos);
      CHECK(a.data == "mine");
      CHECK(a.data != host_hostname);
    }
    CHECK(r.artifacts.size() <= 1);
  });
}

TEST_CASE("handles: a result over the transfer ceiling becomes a handle the program pages; only its own") {
  for_each_backend([](sandbox& sb, const auto&) {
    scratch_store blobs;
    conformance::recording_invoker invoker;
    const std::vector<binding> tools{{"rows", ""}, {"echo", ""}};
    const auto r = sb.run({.program = R"PY(
handle = await call_tool("rows", {"count": 2000})
out = {"type": type(handle).__name__, "tool": handle.tool, "more_than_a_line": handle.lines > 2000}
first = await handle.read(offset=0, limit=4)
out["first"] = [line["text"].strip() for line in first["lines"]]
found = await handle.read(pattern='"i": 1999,', limit=3)
out["found"] = [line["text"].strip() for line in found["lines"]]
for name, call in (("too_wide", handle.read(limit=1000)), ("forged", read_tool_output("blob:" + "0" * 64))):
    try:
        await call
        out[name] = "returned"
    except ToolError as error:
        out[name] = error.kind
return out
)PY",
                           .terms = conformance::terms_for(sb),
                           .bindings = tools,
                           .invoker = &invoker,
                           .budget = {.max_result_bytes = 5000},
                           .blobs = blobs.store.get()});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    const auto& v = r.value->text;
    INFO(v);
    CHECK(v.find(R"("type":"ToolResultHandle","tool":"rows","more_than_a_line":true)") != std::string::npos);
    CHECK(v.find(R"("first":["{","\"rows\": [","{","\"i\": 0,"])") != std::string::npos);
    CHECK(v.find(R"("found":["\"i\": 1999,"])") != std::string::npos);
    // 1,000 lines of it are wider than the 5,000-byte ceiling: ask for fewer.
    CHECK(v.find(R"("too_wide":"binding_result_too_large")") != std::string::npos);
    CHECK(v.find(R"("forged":"denied")") != std::string::npos);
    CHECK(r.bindings_spent.transfer < 20000);  // a handle and three windows crossed, not the result
    CHECK(r.bindings_spent.preserved > 40000);
    CHECK(r.bindings_spent.transfer < 2000);  // a handle crossed, not the result
  });
}

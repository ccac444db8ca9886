// The embedded BlobStore (src/host/store/file_blob_store.cpp, docs/blob-store.md): blobs read back
// whole and in windows, are stored once per tenant under their content address, are invisible to
// other tenants, appear atomically, and go when the retention rule says so. These run on POSIX
// (run_log_tests) and on Windows (psych-windows-host-parts-tests.exe, under Wine here).
#include <doctest/doctest.h>

#ifndef _WIN32
#include <sys/stat.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.hpp"
#include "psych/host/blob_store.hpp"
#ifdef _WIN32
#include "parts.hpp"  // tests/windows_host: check_private
#endif

using namespace psych;
using namespace std::string_literals;
namespace fs = std::filesystem;

namespace {

// SHA-256 test vectors (FIPS 180-2).
constexpr const char* abc_handle = "blob:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* empty_handle = "blob:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// The store's root is `root()`, one level down, so a test can see that nothing is created beside it.
struct blob_dir : psych::testing::temp_dir {
  blob_dir() : psych::testing::temp_dir("psych-blob-test") {}
  [[nodiscard]] std::string root() const { return (path() / "blobs").string(); }
};

std::unique_ptr<directory_blob_store> open_store(const std::string& root, blob_retention retention = {}) {
  auto store = open_directory_blob_store(root, retention);
  if (!store) FAIL(store.error().message());
  return std::move(store).value();
}

blob_info put(blob_store& store, std::string_view tenant, std::string_view bytes, std::string_view type = "text/plain") {
  auto info = store.put(tenant, type, bytes);
  if (!info) FAIL(info.error().message());
  return std::move(info).value();
}

std::string read_all(const blob_store& store, std::string_view tenant, std::string_view handle) {
  auto bytes = store.read(tenant, handle, 0, UINT64_MAX);
  if (!bytes) FAIL(bytes.error().message());
  return std::move(bytes).value();
}

/// Every regular file under `root`, as paths relative to it.
std::vector<std::string> files_under(const std::string& root) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.is_regular_file()) files.push_back(fs::relative(entry.path(), root).string());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<fs::path> tenant_dirs(const std::string& root) {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(root)) dirs.push_back(entry.path());
  return dirs;
}

/// The file a handle names, wherever (in whichever tenant directory) it is.
fs::path file_of(const std::string& root, const blob_info& info) {
  const std::string digest = info.handle.substr(5);
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.path().filename() == digest) return entry.path();
  FAIL("no file for " << info.handle);
  return {};
}

bool is_temp(const std::string& relative) { return fs::path{relative}.filename().string().starts_with(".tmp-"); }

void set_age(const fs::path& path, std::chrono::seconds age) {
  const auto then = std::chrono::system_clock::now() - age;
  fs::last_write_time(path, std::chrono::file_clock::from_sys(then));
}

/// Ages every copy of a blob (one per tenant that holds it).
void set_age(const std::string& root, const blob_info& info, std::chrono::seconds age) {
  for (const auto& dir : tenant_dirs(root))
    if (const fs::path file = dir / info.handle.substr(5); fs::exists(file)) set_age(file, age);
}

template <class T>
void check_not_found(const result<T>& got) {
  REQUIRE_FALSE(got);
  CHECK(got.error().kind == error_kind::blob_not_found);
}

template <class T>
void check_store_failed(const result<T>& got) {
  REQUIRE_FALSE(got);
  CHECK(got.error().kind == error_kind::blob_store_failed);
}

}  // namespace

TEST_CASE("blob store: a put reads back whole") {
  const blob_dir dir;
  const auto store = open_store(dir.root());
  const std::string bytes = "line one\n\0binary\xff\x00tail"s;
  const blob_info info = put(*store, "tenant", bytes, "application/octet-stream");
  CHECK(info.size_bytes == bytes.size());
  CHECK(info.content_type == "application/octet-stream");

  auto stated = store->stat("tenant", info.handle);
  REQUIRE(stated);
  CHECK(stated.value().handle == info.handle);
  CHECK(stated.value().content_type == "application/octet-stream");
  CHECK(stated.value().size_bytes == bytes.size());
  CHECK(read_all(*store, "tenant", info.handle) == bytes);
}

TEST_CASE("blob store: the same bytes for the same tenant are stored once") {
  const blob_dir dir;
  const auto store = open_store(dir.root());
  const blob_info first = put(*store, "tenant", "same bytes", "text/plain");
  const blob_info second = put(*store, "tenant", "same bytes", "text/markdown");
  CHECK(second.handle == first.handle);
  CHECK(second.content_type == "text/plain");  // the stored blob's, not the second put's
  CHECK(files_under(dir.root()).size() == 1);
  CHECK(store->stat("tenant", first.handle).value().content_type == "text/plain");
}

TEST_CASE("blob store: handles are content addresses") {
  const blob_dir dir;
  std::string handle;
  {
    const auto store = open_store(dir.root());
    handle = put(*store, "tenant", "abc").handle;
    CHECK(handle == abc_handle);
  }
  const auto reopened = open_store(dir.root());
  CHECK(reopened->stat("tenant", handle).value().size_bytes == 3);
  CHECK(read_all(*reopened, "tenant", handle) == "abc");
  CHECK(put(*reopened, "tenant", "abc").handle == handle);
  CHECK(put(*reopened, "tenant", "abd").handle != handle);
  CHECK(files_under(dir.root()).size() == 2);
}

TEST_CASE("blob store: another tenant's handle is not found") {
  const blob_dir dir;
  const auto store = open_store(dir.root());
  const blob_info alice = put(*store, "alice", "alice's secret", "text/plain");

  const auto stolen = store->stat("bob", alice.handle);
  check_not_found(stolen);
  check_not_found(store->read("bob", alice.handle, 0, 100));
  // Indistinguishable from a handle that never existed, in the kind and in the words.
  const auto never = store->stat("bob", empty_handle);
  check_not_found(never);
  CHECK(stolen.error().message() == never.error().message());
  put(*store, "bob", "something of bob's");  // bob's directory existing changes nothing
  const auto stolen_again = store->stat("bob", alice.handle);
  check_not_found(stolen_again);
  CHECK(stolen_again.error().message() == never.error().message());

  // The same bytes put by bob give the same handle string, in bob's own space.
  const blob_info bob = put(*store, "bob", "alice's secret", "application/x-bob");
  CHECK(bob.handle == alice.handle);
  CHECK(store->stat("bob", bob.handle).value().content_type == "application/x-bob");
  CHECK(store->stat("alice", alice.handle).value().content_type == "text/plain");
  CHECK(tenant_dirs(dir.root()).size() == 2);
  check_not_found(store->stat("carol", alice.handle));
}

TEST_CASE("blob store: malformed handles are not found") {
  const blob_dir dir;
  const auto store = open_store(dir.root());
  const std::string digest = put(*store, "tenant", "abc").handle.substr(5);
  std::string upper = digest;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](char c) { return static_cast<char>(std::toupper(c)); });

  const std::vector<std::string> malformed = {
      "",
      "blob:",
      "blob:../../etc/passwd",
      "blob:../" + tenant_dirs(dir.root()).front().filename().string() + "/" + digest,
      "blob:" + upper,
      "blob:" + digest.substr(1),
      "blob:" + digest + "0",
      "blob:" + digest + "/",
      "BLOB:" + digest,
      " blob:" + digest,
      "sha256:" + digest,
      digest,
      "blob:" + digest.substr(0, 63) + "g",
      "blob:" + digest.substr(0, 32) + "\0"s + digest.substr(33),
  };
  for (const auto& handle : malformed) {
    CAPTURE(handle);
    check_not_found(store->stat("tenant", handle));
    check_not_found(store->read("tenant", handle, 0, 10));
  }
  CHECK(read_all(*store, "tenant", "blob:" + digest) == "abc");
}

TEST_CASE("blob store: reads are bounded windows") {
  const blob_dir dir;
  const auto store = open_store(dir.root());
  const std::string handle = put(*store, "tenant", "hello world").handle;
  const auto window = [&](std::uint64_t offset, std::uint64_t length) {
    auto bytes = store->read("tenant", handle, offset, length);
    REQUIRE(bytes);
    return bytes.value();
  };
  CHECK(window(0, 5) == "hello");
  CHECK(window(6, 5) == "world");
  CHECK(window(6, 100) == "world");  // fewer at the end
  CHECK(window(10, 1) == "d");
  CHECK(window(3, 0).empty());
  CHECK(window(11, 5).empty());  // at the end
  CHECK(window(1000, 5).empty());  // past it
  CHECK(window(UINT64_MAX, UINT64_MAX).empty());
  CHECK(window(4, UINT64_MAX) == "o world");
}

TEST_CASE("blob store: a put is atomic") {
  const blob_dir dir;
  const auto store = open_store(dir.root());
  for (int i = 0; i < 5; ++i) put(*store, "tenant", std::string(1000 * i, 'x'));
  for (const auto& file : files_under(dir.root())) CHECK_FALSE(is_temp(file));
  CHECK(files_under(dir.root()).size() == 5);

  // A crash between write and rename leaves a whole temporary file and no blob.
  const blob_info info = put(*store, "tenant", "interrupted");
  const fs::path blob = file_of(dir.root(), info);
  const fs::path leftover = blob.parent_path() / ".tmp-0123456789abcdef";
  fs::copy_file(blob, leftover);
  fs::remove(blob);
  check_not_found(store->stat("tenant", info.handle));
  check_not_found(store->read("tenant", info.handle, 0, 100));

  auto swept = store->sweep();
  REQUIRE(swept);
  CHECK(swept.value() == 0);
  CHECK(fs::exists(leftover));  // a put in progress may still own it

  set_age(leftover, std::chrono::hours(2));
  swept = store->sweep();
  REQUIRE(swept);
  CHECK(swept.value() == 0);  // temporary files are not blobs
  CHECK_FALSE(fs::exists(leftover));
  CHECK(files_under(dir.root()).size() == 5);
}

TEST_CASE("blob store: sweep removes blobs past their age, counted from the last put") {
  const blob_dir dir;
  const auto store = open_store(dir.root(), {.max_age = std::chrono::hours(24)});
  const blob_info old = put(*store, "tenant", "old");
  const blob_info refreshed = put(*store, "tenant", "refreshed");
  const blob_info fresh = put(*store, "tenant", "fresh");
  const blob_info other_old = put(*store, "other", "old");
  set_age(dir.root(), old, std::chrono::hours(25));  // and other_old: the same bytes
  set_age(dir.root(), refreshed, std::chrono::hours(25));
  put(*store, "tenant", "refreshed");  // a dedupe hit renews the blob

  auto swept = store->sweep();
  REQUIRE(swept);
  CHECK(swept.value() == 2);
  check_not_found(store->stat("tenant", old.handle));
  check_not_found(store->stat("other", other_old.handle));
  CHECK(read_all(*store, "tenant", refreshed.handle) == "refreshed");
  CHECK(read_all(*store, "tenant", fresh.handle) == "fresh");
  swept = store->sweep();
  REQUIRE(swept);
  CHECK(swept.value() == 0);
}

TEST_CASE("blob store: sweep keeps each tenant under its byte cap, oldest first") {
  const blob_dir dir;
  // Each blob below is 1000 content bytes plus an 18 + 1 byte header on disk: two fit, three do not.
  const auto store = open_store(dir.root(), {.max_tenant_bytes = 2500});
  std::vector<blob_info> blobs;
  for (int i = 0; i < 4; ++i) {
    blobs.push_back(put(*store, "tenant", std::string(1000, static_cast<char>('a' + i)), "t"));
    set_age(dir.root(), blobs.back(), std::chrono::seconds(40 - 10 * i));
  }
  const blob_info others = put(*store, "other", std::string(2400, 'z'), "t");  // under the cap alone

  auto swept = store->sweep();
  REQUIRE(swept);
  CHECK(swept.value() == 2);
  check_not_found(store->stat("tenant", blobs[0].handle));
  check_not_found(store->stat("tenant", blobs[1].handle));
  CHECK(read_all(*store, "tenant", blobs[2].handle) == std::string(1000, 'c'));
  CHECK(read_all(*store, "tenant", blobs[3].handle) == std::string(1000, 'd'));
  CHECK(store->stat("other", others.handle));
}

TEST_CASE("blob store: any tenant string is safe") {
  const blob_dir dir;
  const auto store = open_store(dir.root());
  const std::vector<std::string> tenants = {
      "a", "a\0b"s, "\0"s, "/", "a/b", "..", "../..", "../../etc", ".", "", std::string(10 * 1024, 'L'),
      "t-0123456789abcdef0123456789abcdef",
  };
  std::vector<std::string> handles;
  for (const auto& tenant : tenants) {
    CAPTURE(tenant.size());
    const blob_info info = put(*store, tenant, "shared content");
    handles.push_back(info.handle);
    CHECK(store->stat(tenant, info.handle));
    CHECK(read_all(*store, tenant, info.handle) == "shared content");
    put(*store, tenant, "only for " + tenant);
  }
  check_not_found(store->stat("a", put(*store, "a\0b"s, "NUL is part of the tenant").handle));
  check_not_found(store->stat("a\0b"s, put(*store, "a", "and so is what follows it").handle));

  // One directory per tenant, each directly under the root and named by a hash; nothing beside it.
  const auto dirs = tenant_dirs(dir.root());
  CHECK(dirs.size() == tenants.size());
  for (const auto& path : dirs) {
    const std::string name = path.filename().string();
    CHECK(fs::is_directory(fs::symlink_status(path)));
    CHECK(name.size() == 2 + 32);
    CHECK(name.starts_with("t-"));
  }
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("blob store: an empty blob") {
  const blob_dir dir;
  const auto store = open_store(dir.root());
  const blob_info info = put(*store, "tenant", "", "");
  CHECK(info.handle == empty_handle);
  CHECK(info.size_bytes == 0);
  auto stated = store->stat("tenant", info.handle);
  REQUIRE(stated);
  CHECK(stated.value().size_bytes == 0);
  CHECK(stated.value().content_type.empty());
  CHECK(read_all(*store, "tenant", info.handle).empty());
  CHECK(store->read("tenant", info.handle, 5, 5).value().empty());
  CHECK(put(*store, "tenant", "").handle == empty_handle);
}

TEST_CASE("blob store: a blob whose file was altered is refused") {
  const blob_dir dir;
  const auto store = open_store(dir.root());
  const blob_info info = put(*store, "tenant", "the original content");
  const fs::path file = file_of(dir.root(), info);
  SUBCASE("grown") { std::ofstream{file, std::ios::binary | std::ios::app} << "extra"; }
  SUBCASE("shrunk") { fs::resize_file(file, fs::file_size(file) - 3); }
  SUBCASE("cut inside the header") { fs::resize_file(file, 7); }
  SUBCASE("replaced by other bytes") { std::ofstream{file, std::ios::binary | std::ios::trunc} << "not a blob at all"; }
  check_store_failed(store->stat("tenant", info.handle));
  check_store_failed(store->read("tenant", info.handle, 0, 5));

  // A put of the true bytes writes the blob afresh.
  CHECK(put(*store, "tenant", "the original content").handle == info.handle);
  CHECK(read_all(*store, "tenant", info.handle) == "the original content");
}

TEST_CASE("blob store: concurrent puts and reads from several threads") {
  const blob_dir dir;
  const auto store = open_store(dir.root());
  constexpr int contents = 7;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        const std::string tenant = (i % 2 == 0) ? "even" : "odd";
        const std::string bytes = std::string(500 * ((t + i) % contents + 1), static_cast<char>('a' + (t + i) % contents));
        const auto info = store->put(tenant, "text/plain", bytes);
        if (!info) {
          ++failures;
          continue;
        }
        const auto back = store->read(tenant, info.value().handle, 0, UINT64_MAX);
        if (!back || back.value() != bytes) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures.load() == 0);
  const auto files = files_under(dir.root());
  for (const auto& file : files) CHECK_FALSE(is_temp(file));
  CHECK(files.size() == 2 * contents);
}

TEST_CASE("blob store: the root and its directories are private") {
  const blob_dir dir;
  const std::string root = (dir.path() / "a" / "b" / "blobs").string();
  const auto store = open_store(root);
  const blob_info info = put(*store, "tenant", "private");
#ifdef _WIN32  // a protected DACL for the account and SYSTEM alone: Windows' 0700 and 0600
  psych::testing::windows_host::check_private({root, tenant_dirs(root).front().string(), file_of(root, info).string()});
#else
  const auto mode = [](const fs::path& path) {
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    return st.st_mode & 07777;
  };
  CHECK(mode(root) == 0700);
  CHECK(mode(tenant_dirs(root).front()) == 0700);
  CHECK(mode(file_of(root, info)) == 0600);
#endif

  SUBCASE("retention limits are checked") {
    CHECK(open_directory_blob_store(root, {.max_age = std::chrono::seconds(0)}).error().kind == error_kind::invalid_limit);
    CHECK(open_directory_blob_store(root, {.max_tenant_bytes = 0}).error().kind == error_kind::invalid_limit);
    CHECK(open_directory_blob_store("").error().kind == error_kind::invalid_argument);
  }
}

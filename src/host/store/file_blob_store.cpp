// The embedded BlobStore: one directory per tenant, one file per blob; layout in docs/blob-store.md.
//
// Every name this file builds is hex it computed itself (a tenant's hash, a content hash, a random
// temporary suffix), and every file is reached by one such name from its directory's handle
// (store_directory.hpp: the *at() calls on POSIX, NtCreateFile beneath a handle on Windows), so no
// caller string ever becomes part of a path. A blob appears only when a fully written, synced
// temporary file is renamed onto its content address, so a reader sees a whole blob or none. The
// store keeps no mutable state in memory: concurrent put/stat/read from several threads (or
// processes) rest on the filesystem's atomic rename and need no lock.
#include "os/sha256.hpp"
#include "psych/host/blob_store.hpp"
#include "os/random_hex.hpp"
#include "store/store_directory.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/endian/conversion.hpp>
#include <fmt/format.h>

namespace psych {
namespace {

constexpr std::string_view handle_prefix = "blob:";
constexpr std::size_t digest_hex_digits = 64;
constexpr std::string_view tenant_prefix = "t-";
constexpr std::size_t tenant_hex_digits = 32;
constexpr std::string_view temp_prefix = ".tmp-";
// A blob file: magic, u64 LE content size, u16 LE content-type length, the content type, the content.
constexpr std::string_view magic = "PSYCHBL1";
constexpr std::size_t fixed_header_bytes = 8 + 8 + 2;
constexpr std::size_t max_content_type_bytes = 1024;
constexpr auto stale_temp_age = std::chrono::hours(1);

using host::random_hex;
using host::store_directory;
using host::store_file;

auto damaged(std::string_view path, std::string_view why) {
  return fail_with(error_kind::blob_store_failed, fmt::format("{}: {}", path, why));
}

/// The same words for a malformed handle, another tenant's handle and one that never existed.
auto not_found() { return fail_with(error_kind::blob_not_found, "no blob with this handle for this tenant"); }

/// The store's digests: a failing digest is the store's failure.
result<std::string> sha256_hex(std::string_view bytes) {
  auto hex = host::sha256_hex(bytes);
  if (!hex) return fail_with(error_kind::blob_store_failed, hex.error().detail);
  return hex;
}

bool is_lower_hex(std::string_view text, std::size_t digits) {
  return text.size() == digits &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// The 64 hex digits of a well-formed handle; nothing else reaches the filesystem.
std::optional<std::string_view> digest_of(std::string_view handle) {
  if (!handle.starts_with(handle_prefix)) return std::nullopt;
  handle.remove_prefix(handle_prefix.size());
  if (!is_lower_hex(handle, digest_hex_digits)) return std::nullopt;
  return handle;
}

result<std::string> tenant_dir_name(std::string_view tenant) {
  PSYCH_TRY(auto hex, sha256_hex(tenant));
  return std::string{tenant_prefix} + hex.substr(0, tenant_hex_digits);
}

std::string header_for(std::string_view content_type, std::uint64_t size) {
  std::string header(fixed_header_bytes, '\0');
  auto* raw = reinterpret_cast<unsigned char*>(header.data());
  std::memcpy(raw, magic.data(), magic.size());
  boost::endian::store_little_u64(raw + 8, size);
  boost::endian::store_little_u16(raw + 16, static_cast<std::uint16_t>(content_type.size()));
  header.append(content_type);
  return header;
}

/// Reads exactly `n` bytes; fewer means the file is shorter than its header says.
result<void> read_at(const store_file& file, char* out, std::size_t n, std::uint64_t offset) {
  PSYCH_TRY(const std::size_t got, file.read_at(out, n, offset));
  if (got < n) return damaged(file.path(), "shorter than its header says");
  return success();
}

struct open_blob {
  store_file file;
  blob_info info;
  std::uint64_t content_offset = 0;
};

/// A temporary file that is removed unless it was renamed into place.
class temp_file {
 public:
  temp_file(const store_directory& dir, std::string name, store_file file)
      : dir_{&dir}, name_{std::move(name)}, file_{std::move(file)} {}
  temp_file(temp_file&& other) noexcept
      : dir_{other.dir_}, name_{std::move(other.name_)}, file_{std::move(other.file_)},
        committed_{std::exchange(other.committed_, true)} {}
  temp_file& operator=(temp_file&&) = delete;
  ~temp_file() {
    if (!committed_) (void)dir_->remove(name_);
  }
  [[nodiscard]] store_file& file() noexcept { return file_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  void commit() noexcept { committed_ = true; }

 private:
  const store_directory* dir_;
  std::string name_;
  store_file file_;
  bool committed_ = false;
};

class file_blob_store final : public directory_blob_store {
 public:
  file_blob_store(store_directory root, blob_retention retention) : root_{std::move(root)}, retention_{retention} {}

  result<blob_info> put(std::string_view tenant, std::string_view content_type, std::string_view bytes) override {
    if (content_type.size() > max_content_type_bytes)
      return fail_with(error_kind::invalid_argument, fmt::format("a content type of {} bytes exceeds the {}-byte cap",
                                                               content_type.size(), max_content_type_bytes));
    PSYCH_TRY(auto digest, sha256_hex(bytes));
    PSYCH_TRY(auto tenant_name, tenant_dir_name(tenant));
    PSYCH_TRY(auto made, root_.directory(tenant_name, /*create=*/true));
    if (!made) return damaged(fmt::format("{}/{}", root_.path(), tenant_name), "gone as soon as it was made");
    const store_directory& dir = *made;

    // Dedupe: a whole blob of the right size is kept (first content type wins) and its mtime
    // refreshed, since retention counts from the last put. A damaged one is rewritten below.
    PSYCH_TRY(auto kept, keep_existing(dir, digest, bytes.size()));
    if (kept) return std::move(kept).value();

    PSYCH_TRY(auto temp, create_temp(dir));
    PSYCH_TRY(temp.file().append(header_for(content_type, bytes.size())));
    PSYCH_TRY(temp.file().append(bytes));
    PSYCH_TRY(temp.file().sync());

    // No-replace first, so two racing puts of the same bytes agree on one stored content type.
    PSYCH_TRY(const bool moved, dir.move(temp.file(), temp.name(), digest, /*replace=*/false));
    if (!moved) {
      PSYCH_TRY(auto raced, keep_existing(dir, digest, bytes.size()));
      if (raced) return std::move(raced).value();  // the temporary file goes with `temp`
      PSYCH_TRY(dir.move(temp.file(), temp.name(), digest, /*replace=*/true));  // damaged: replaced
    }
    temp.commit();
    PSYCH_TRY(dir.sync());
    return blob_info{std::string{handle_prefix} + digest, std::string{content_type}, bytes.size()};
  }

  result<blob_info> stat(std::string_view tenant, std::string_view handle) const override {
    PSYCH_TRY(auto blob, find(tenant, handle));
    if (!blob) return not_found();
    return std::move(blob->info);
  }

  result<std::string> read(std::string_view tenant, std::string_view handle, std::uint64_t offset,
                           std::uint64_t length) const override {
    PSYCH_TRY(auto blob, find(tenant, handle));
    if (!blob) return not_found();
    const std::uint64_t size = blob->info.size_bytes;
    if (offset >= size) return std::string{};
    const auto n = static_cast<std::size_t>(std::min(length, size - offset));
    std::string out(n, '\0');
    PSYCH_TRY(read_at(blob->file, out.data(), n, blob->content_offset + offset));
    return out;
  }

  result<std::uint64_t> sweep() override {
    const auto now = std::chrono::system_clock::now();
    PSYCH_TRY(auto names, root_.names());
    std::uint64_t removed = 0;
    for (const auto& name : names) {
      if (!name.starts_with(tenant_prefix) ||
          !is_lower_hex(std::string_view{name}.substr(tenant_prefix.size()), tenant_hex_digits))
        continue;  // not ours
      auto dir = root_.directory(name, /*create=*/false);
      if (!dir || !dir.value()) continue;  // gone, or not a directory: not ours either
      PSYCH_TRY(auto count, sweep_tenant(*dir.value(), now));
      removed += count;
    }
    return removed;
  }

 private:
  /// The caller's blob, or nothing when the handle is malformed or names no blob of this tenant.
  result<std::optional<open_blob>> find(std::string_view tenant, std::string_view handle) const {
    const auto digest = digest_of(handle);
    if (!digest) return std::optional<open_blob>{};
    PSYCH_TRY(auto tenant_name, tenant_dir_name(tenant));
    PSYCH_TRY(auto dir, root_.directory(tenant_name, /*create=*/false));
    if (!dir) return std::optional<open_blob>{};
    return open_existing(*dir, std::string{*digest});
  }

  /// Opens and checks a stored blob: its header is whole and the file is exactly as long as the
  /// header says. The content is not rehashed (reads are windows; a rehash would read it all).
  static result<std::optional<open_blob>> open_existing(const store_directory& dir, const std::string& digest) {
    PSYCH_TRY(auto opened, dir.open_file(digest));
    if (!opened) return std::optional<open_blob>{};
    store_file& file = *opened;
    const std::string& path = file.path();
    PSYCH_TRY(const std::uint64_t file_size, file.size());
    if (file_size < fixed_header_bytes) return damaged(path, "shorter than a blob header");

    std::array<unsigned char, fixed_header_bytes> fixed{};
    PSYCH_TRY(read_at(file, reinterpret_cast<char*>(fixed.data()), fixed.size(), 0));
    if (std::memcmp(fixed.data(), magic.data(), magic.size()) != 0) return damaged(path, "bad magic (not a blob)");
    const std::uint64_t size = boost::endian::load_little_u64(fixed.data() + 8);
    const std::uint16_t type_bytes = boost::endian::load_little_u16(fixed.data() + 16);
    if (type_bytes > max_content_type_bytes) return damaged(path, "content type longer than the cap");
    const std::uint64_t content_offset = fixed_header_bytes + type_bytes;
    if (file_size < content_offset || file_size - content_offset != size)
      return damaged(path, fmt::format("{} bytes on disk, the header says {} of content", file_size, size));

    std::string content_type(type_bytes, '\0');
    PSYCH_TRY(read_at(file, content_type.data(), content_type.size(), fixed_header_bytes));
    return std::optional<open_blob>{
        open_blob{std::move(file), blob_info{std::string{handle_prefix} + digest, std::move(content_type), size},
                  content_offset}};
  }

  /// The stored blob when it is whole and `size` bytes long, with its mtime refreshed; nothing when
  /// it is absent or damaged (the caller then writes it afresh).
  static result<std::optional<blob_info>> keep_existing(const store_directory& dir, const std::string& digest,
                                                        std::uint64_t size) {
    auto existing = open_existing(dir, digest);
    if (!existing) {
      if (existing.error().kind == error_kind::blob_store_failed) return std::optional<blob_info>{};
      return existing.as_failure();
    }
    if (!existing.value() || existing.value()->info.size_bytes != size) return std::optional<blob_info>{};
    PSYCH_TRY(existing.value()->file.touch());
    return std::optional<blob_info>{std::move(existing.value()->info)};
  }

  static result<temp_file> create_temp(const store_directory& dir) {
    for (int attempt = 0; attempt < 16; ++attempt) {
      std::string name = std::string{temp_prefix} + random_hex(8);
      PSYCH_TRY(auto file, dir.create_file(name));
      if (file) return temp_file{dir, std::move(name), std::move(file).value()};
    }
    return fail_with(error_kind::blob_store_failed, fmt::format("{}: no free temporary file name", dir.path()));
  }

  result<std::uint64_t> sweep_tenant(const store_directory& dir, std::chrono::system_clock::time_point now) const {
    struct kept_blob {
      std::chrono::system_clock::time_point mtime;
      std::string name;
      std::uint64_t bytes;
    };
    PSYCH_TRY(auto names, dir.names());
    std::vector<kept_blob> kept;
    std::uint64_t removed = 0;
    for (const auto& name : names) {
      PSYCH_TRY(auto entry, dir.entry(name));
      if (!entry || !entry->regular) continue;  // gone (a concurrent sweep or rename took it), or not ours
      const auto age = now - entry->modified;
      if (name.starts_with(temp_prefix)) {
        if (age > stale_temp_age) {  // a put that crashed before its rename
          PSYCH_TRY(dir.remove(name));
        }
      } else if (is_lower_hex(name, digest_hex_digits)) {
        if (age > retention_.max_age) {
          PSYCH_TRY(dir.remove(name));
          ++removed;
        } else {
          kept.push_back({entry->modified, name, entry->size});
        }
      }
    }
    std::uint64_t held = 0;
    for (const auto& blob : kept) held += blob.bytes;
    std::sort(kept.begin(), kept.end(),
              [](const kept_blob& a, const kept_blob& b) { return std::tie(a.mtime, a.name) < std::tie(b.mtime, b.name); });
    for (const auto& blob : kept) {
      if (held <= retention_.max_tenant_bytes) break;
      PSYCH_TRY(dir.remove(blob.name));
      held -= blob.bytes;
      ++removed;
    }
    return removed;
  }

  store_directory root_;
  blob_retention retention_;
};

}  // namespace

result<std::unique_ptr<directory_blob_store>> open_directory_blob_store(const std::string& root,
                                                                        blob_retention retention) {
  if (root.empty() || root.find('\0') != std::string::npos)
    return fail_with(error_kind::invalid_argument, "blob store root: an empty path or one with a NUL byte");
  if (retention.max_age <= std::chrono::seconds::zero())
    return fail_with(error_kind::invalid_limit, fmt::format("blob retention max_age: {}s", retention.max_age.count()));
  if (retention.max_tenant_bytes == 0) return fail_with(error_kind::invalid_limit, "blob retention max_tenant_bytes: 0");
  PSYCH_TRY(auto opened, store_directory::open_root(root));
  return std::unique_ptr<directory_blob_store>{std::make_unique<file_blob_store>(std::move(opened), retention)};
}

}  // namespace psych

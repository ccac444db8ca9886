#pragma once
// The BlobStore: where bytes too large for the model's context are preserved, so the model (with
// read_tool_output) and the program (with a result handle) can read them in bounded windows.
// A port, so a deployment can put blobs in its own store; the embedded default is a directory
// (open_directory_blob_store, src/host/store/file_blob_store.cpp; layout in docs/blob-store.md).
// Handles are content addresses scoped by tenant: a handle means nothing to another tenant.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "psych/result.hpp"

namespace psych {

struct blob_info {
  std::string handle;        ///< "blob:<64 hex digits>": SHA-256 of the content
  std::string content_type;  ///< as given to put()
  std::uint64_t size_bytes = 0;
};

class blob_store {
 public:
  virtual ~blob_store() = default;
  /// Preserves `bytes` for `tenant`; durable (written, fsynced, renamed into place) on return.
  /// The same bytes for the same tenant give the same handle and are stored once.
  virtual result<blob_info> put(std::string_view tenant, std::string_view content_type, std::string_view bytes) = 0;
  /// What a handle refers to, for this tenant only: another tenant's handle is `blob_not_found`,
  /// exactly as a handle that never existed.
  virtual result<blob_info> stat(std::string_view tenant, std::string_view handle) const = 0;
  /// Up to `length` bytes from `offset` (fewer at the end). Bounded by the caller's window.
  virtual result<std::string> read(std::string_view tenant, std::string_view handle, std::uint64_t offset,
                                   std::uint64_t length) const = 0;
};

/// The retention rule of the embedded store: blobs older than `max_age` are removed by sweep(),
/// and so are the oldest of a tenant's blobs while the tenant holds more than `max_tenant_bytes`.
struct blob_retention {
  std::chrono::seconds max_age = std::chrono::hours(24 * 7);
  std::uint64_t max_tenant_bytes = std::uint64_t{1} << 30;
};

class directory_blob_store : public blob_store {
 public:
  /// Removes what the retention rule no longer keeps; returns how many blobs went.
  virtual result<std::uint64_t> sweep() = 0;
};

/// The embedded default: one directory per tenant (named by a hash of the tenant, so any tenant
/// string is safe), one file per blob named by its content hash, written to a temporary file,
/// fsynced and renamed. Creates `root` (mode 0700) when absent.
result<std::unique_ptr<directory_blob_store>> open_directory_blob_store(const std::string& root,
                                                                        blob_retention retention = {});

}  // namespace psych

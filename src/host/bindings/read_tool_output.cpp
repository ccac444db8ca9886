// read_tool_output: a window of a preserved item, read from the BlobStore a piece at a time, so a
// window of a blob of any size costs a piece of memory, not the blob.
#include "psych/host/read_tool_output.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace psych {
namespace {

/// Large enough that a read is a handful of system calls per megabyte, small enough not to matter.
constexpr std::uint64_t piece_bytes = std::uint64_t{256} << 10;

/// A blob read front to back in ranged reads of the store's own read().
class blob_source final : public output_source {
 public:
  blob_source(const blob_store& store, std::string_view tenant, std::string_view handle, std::uint64_t size)
      : store_(store), tenant_(tenant), handle_(handle), size_(size) {}

  result<std::string_view> next() override {
    if (offset_ >= size_) return std::string_view{};
    PSYCH_TRY(piece_, store_.read(tenant_, handle_, offset_, std::min(piece_bytes, size_ - offset_)));
    if (piece_.empty())  // the store said how long the blob is: ending early is its failure
      return fail_with(error_kind::blob_store_failed,
                     fmt::format("{}: ended at byte {} of {}", handle_, offset_, size_));
    offset_ += piece_.size();
    return std::string_view{piece_};
  }

 private:
  const blob_store& store_;
  std::string_view tenant_, handle_;
  std::uint64_t size_;
  std::uint64_t offset_ = 0;
  std::string piece_;
};

}  // namespace

result<output_window> read_tool_output(const blob_store& store, std::string_view tenant, std::string_view handle,
                                       const output_request& request, const output_bounds& bounds) {
  PSYCH_TRY(auto info, store.stat(tenant, handle));
  blob_source source(store, tenant, handle, info.size_bytes);
  return read_output(source, request, bounds);
}

}  // namespace psych

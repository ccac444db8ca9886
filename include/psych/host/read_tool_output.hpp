#pragma once
// read_tool_output for the model: a window of a preserved item (an attachment's handle), by line
// or by pattern, within the bounds, for the tenant that owns it. Programs reach the same reading
// through their own handles (ToolResultHandle.read), checked by the binding gateway. The blob is
// read front to back in ranged reads, so a window costs memory bounded by the window, not the blob.
#include <string_view>

#include "psych/host/blob_store.hpp"
#include "psych/host/output_reader.hpp"

namespace psych {

/// Another tenant's handle is `blob_not_found`, as a handle that never existed.
result<output_window> read_tool_output(const blob_store& store, std::string_view tenant, std::string_view handle,
                                       const output_request& request, const output_bounds& bounds = {});

}  // namespace psych

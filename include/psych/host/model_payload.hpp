#pragma once
// What the model reads back from one execution: the result, compact. Every byte of it goes into the
// model's context, so each item appears once and nothing empty or already promised is repeated.
// The full result (result_json.hpp: `psych run --json`) keeps everything; docs/runtime.md, "What
// the model sees", shows each shape.
//
// One JSON object; a member is present only when it says something:
//   failure    {kind, message, traceback, line}; traceback and line only when the program raised
//   limit_hit  the cap that ended the execution
//   cancelled  true, when the caller cancelled it
//   value      the returned JSON value, whole
//   stdout     the stream, whole (absent when empty); stderr likewise
//   artifacts  {workspace-relative path: the file's text, whole}
//   partial    {item: {preview, size_bytes, handle}} for each item too large to show whole (item is
//              stdout, stderr, value or artifact:<path>); the preview's marker says how many bytes
//              it leaves out; handle only when the bytes are preserved, and then
//   read_more  how read_tool_output reads them
//   artifacts_omitted           {reason: count}
//   guarantees_below_asked      {guarantee: grade}, each one weaker than the ask promised
//   problems, unavailable_bindings
// A program that returned nothing and printed nothing is {}.
#include <string>

#include "psych/isolation.hpp"
#include "psych/sandbox_result.hpp"

namespace psych::host {

/// The model's payload for `result`, for an execution whose ask promised `promised`
/// (promised_grades in grading.hpp).
std::string model_payload(const sandbox_result& result, const guarantee_grades& promised);

}  // namespace psych::host

#pragma once
// What one execution hands back: every field of the spec's "Results".
// C++ cannot name a member `stdout` (a C macro), so the previews are
// stdout_preview / stderr_preview here and "stdout" / "stderr" in JSON.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "psych/artifacts.hpp"
#include "psych/attachment.hpp"
#include "psych/budget.hpp"
#include "psych/egress_report.hpp"
#include "psych/failure.hpp"
#include "psych/isolation.hpp"
#include "psych/json_text.hpp"
#include "psych/limits.hpp"
#include "psych/omittable.hpp"
#include "psych/open_enum.hpp"

namespace psych {

/// A file the program left in its workspace, by workspace-relative path.
/// (Collection is off unless an ArtifactPolicy asks for it.)
struct artifact {
  std::string path;
  std::uint64_t size_bytes = 0;
  std::string data;  ///< the file's bytes (the attachment carries the model's view of them)
  friend bool operator==(const artifact&, const artifact&) = default;
};

struct sandbox_result {
  std::string stdout_preview, stderr_preview;  ///< decoded previews, what the model sees
  std::string stdout_data, stderr_data;        ///< captured bytes, at most max_bytes each
  std::uint64_t stdout_size = 0, stderr_size = 0;  ///< bytes produced, even when truncated
  std::optional<json_text> value;  ///< the top-level value; nullopt both for none and for None
  std::optional<sandbox_failure> failure;
  std::vector<artifact> artifacts;
  std::uint64_t artifacts_omitted = 0;
  /// Each omitted workspace entry's reason, counted (symlink, hardlink, device, fifo, ...). A remote
  /// service of another version may count by a reason this side does not have: it is kept as it came.
  std::map<open_enum<omission_reason>, std::uint64_t> artifacts_omitted_by_reason;
  /// stdout, stderr, the value and each collected artifact, as the model's payload carries them.
  std::vector<result_attachment> attachments;
  double duration_seconds = 0;
  std::optional<limit_name> limit_hit;  ///< the cap that ended it; nullopt on a clean end or a plain error
  bool cancelled = false;
  std::optional<isolation_level> isolation;  ///< what this execution reached; nullopt if nothing ran
  guarantee_grades guarantees;
  /// The strongest grade each guarantee can get on the backend that ran this: its platform's honest
  /// limits (the spec's "Honest limits per platform": memory on macOS, file_size on Windows). A
  /// grade this strong is no shortfall against what the ask promised (promised_grades). Set by
  /// the backend; every guarantee enforced for one whose platform holds none back.
  guarantee_grades strongest_grades = every_guarantee_enforced;
  bool network_denied = false;
  std::vector<std::string> problems;  ///< what grading saw contradicted, in words
  /// What the program's tool calls spent in this execution (the binding budget's meters).
  meter_readings bindings_spent;
  /// Bindings the spec listed that no longer resolve; never replaced by another tool.
  std::vector<std::string> unavailable_bindings;
  /// network=allowlist: what the program's connections through psych's egress proxy did. Absent
  /// otherwise, and then not written in the result's JSON at all.
  omittable<egress_report> egress;

  [[nodiscard]] bool ok() const { return !failure.has_value(); }
};

}  // namespace psych

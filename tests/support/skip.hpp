#pragma once
// A case that cannot run here is reported as a skip, never as a pass: it is named with its reason
// as it happens, counted in the summary ("N skipped"), appended to $PSYCH_SKIP_LOG when that is
// set, and a binary in which nothing ran but skips exits with skip_exit_code (ctest's
// SKIP_RETURN_CODE), so ctest shows it as skipped rather than passed.
//
// In CI (CI=true, run as root, on a host with every mechanism psych uses) a skip is a failure,
// unless its kind is one of allowed_in_ci: the few causes a fully equipped host can still have.
// docs/testing.md lists them.
#include <source_location>
#include <string_view>

namespace psych::testing {

/// Why a case may be skipped even on a fully equipped CI host. Nothing here is about the host's
/// setup (privileges, namespaces, cgroups, tools): those skips fail CI.
enum class allowed_in_ci {
  /// The kernel's Landlock ABI predates the feature the case checks (network rights need ABI 4,
  /// scopes ABI 6); Debian 12's own kernel (6.1) has ABI 2.
  landlock_abi_predates_feature,
  /// The backend documents that it does not provide the property the case checks (a PROCESS
  /// limit in docs/process-backend.md, an ISOLATED one in docs/isolated-backend.md).
  documented_backend_limit,
  /// The platform's own interpreter cannot exist on this host: a Windows CPython for the Windows
  /// launcher under Wine, which no Debian package (nor any registry these hosts reach) ships.
  /// Only under Wine: on Windows itself a missing CPython fails.
  no_windows_cpython_under_wine,
  /// Wine (8.0, Debian 12's) reports CreateSymbolicLinkW done but makes no link a directory
  /// listing shows, so a case about a link the program planted has no link to meet. Only under
  /// Wine: on Windows itself (the CI matrix) a link that cannot be made fails.
  no_symbolic_links_under_wine,
  /// Wine (8.0) keeps no DACL a file or directory was made with: it reads back one made from the
  /// file's Unix mode, the same whatever was asked, so whether psych made it private to the account
  /// cannot be seen. Only under Wine: on Windows itself a DACL that is not the owner-only one fails.
  no_dacls_under_wine,
  /// Wine (8.0) keeps no Job Object limits, so every run at PROCESS through the Windows launcher is
  /// refused before its program starts (the refusal itself is checked), and a case about a program
  /// that is running has none to meet. Only under Wine: on Windows itself such a case runs.
  no_job_limits_under_wine,
};

/// The exit status of a test binary in which every case that ran was skipped.
inline constexpr int skip_exit_code = 77;

/// Whether this run must not skip what a fully equipped host can run: CI=true (or 1), as root.
bool ci_requires_every_case();

/// Reports the current test case (and subcase) as skipped here, with the reason; the caller then
/// returns (or continues past the part that cannot run). In CI this is a failed check instead.
void skip_case(std::string_view reason, std::source_location where = std::source_location::current());

/// As above, for a cause CI may have as well: reported as a skip in CI too.
void skip_case(allowed_in_ci kind, std::string_view reason,
               std::source_location where = std::source_location::current());

/// main()'s status: doctest's own when anything failed, skip_exit_code when cases ran and every
/// one of them was skipped (in whole), otherwise 0.
int exit_status(int doctest_status);

}  // namespace psych::testing

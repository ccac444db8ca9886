#include "report.hpp"

#include <iterator>
#include <string_view>

#include <boost/hana/for_each.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace psych::cli {

namespace {

/// Shorthand: every string in a report that did not come from this file goes through it.
std::string safe(std::string_view text) { return terminal_text(text); }

/// `text` one line at a time, each after `prefix`, escaped.
void append_lines(std::string& out, std::string_view prefix, std::string_view text) {
  while (!text.empty()) {
    const auto newline = text.find('\n');
    fmt::format_to(std::back_inserter(out), "{}{}\n", prefix, safe(text.substr(0, newline)));
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
  }
}

void append_grades(std::string& out, const guarantee_grades& grades) {
  out.append("guarantees:\n");
  boost::hana::for_each(boost::hana::accessors<guarantee_grades>(), [&](auto field) {
    fmt::format_to(std::back_inserter(out), "  {:<14} {}\n", boost::hana::to<char const*>(boost::hana::first(field)),
                   name_of(boost::hana::second(field)(grades)));
  });
}

}  // namespace

std::string result_report(const sandbox_result& r, bool output_shown) {
  std::string out;
  const auto to = std::back_inserter(out);
  if (r.value) fmt::format_to(to, "value: {}\n", safe(r.value->text));
  else if (!r.failure) out.append("value: null\n");  // JSON, as every other value here
  const auto stream = [&](const char* name, const std::string& preview, std::uint64_t size) {
    if (output_shown) {
      fmt::format_to(to, "{} ({} bytes{})\n", name, size, size ? ", shown as it ran" : "");
      return;
    }
    fmt::format_to(to, "{} ({} bytes){}\n", name, size, size ? ":" : "");
    if (size) append_lines(out, "  | ", preview);
  };
  stream("stdout", r.stdout_preview, r.stdout_size);
  stream("stderr", r.stderr_preview, r.stderr_size);
  if (r.failure) {
    fmt::format_to(to, "failure: {}: {}\n", name_of(r.failure->kind), safe(r.failure->message));
    append_lines(out, "  ", r.failure->traceback);
  }
  if (r.limit_hit) fmt::format_to(to, "limit hit: {}\n", name_of(*r.limit_hit));
  if (r.cancelled) out.append("cancelled: yes\n");
  // Where nothing ran, no network was denied or granted: "no" would read as "it had the network".
  if (r.isolation)
    fmt::format_to(to, "isolation: {}   duration: {:.3f} s   network denied: {}\n", name_of(*r.isolation),
                   r.duration_seconds, r.network_denied ? "yes" : "no");
  else
    fmt::format_to(to, "isolation: none (nothing ran)   duration: {:.3f} s\n", r.duration_seconds);
  append_grades(out, r.guarantees);
  for (const auto& a : r.attachments)
    if (a.location == attachment_location::blob || a.name.starts_with("artifact:"))
      fmt::format_to(to, "attachment: {} ({} bytes, {}{})\n", safe(a.name), a.size_bytes, name_of(a.location),
                     a.handle.empty() ? "" : ", " + safe(a.handle));
  if (r.artifacts_omitted) {
    fmt::format_to(to, "artifacts omitted: {}", r.artifacts_omitted);
    for (const auto& [reason, count] : r.artifacts_omitted_by_reason)
      fmt::format_to(to, "  {} {}", safe(reason.spelling()), count);
    out.append("\n");
  }
  if (r.egress) {
    const auto& e = *r.egress;
    fmt::format_to(to, "egress: {} connection(s) allowed, {} refused, {} cut short; {} B sent, {} B received\n",
                   e.connections_allowed, e.connections_refused, e.connections_cut, e.bytes_sent, e.bytes_received);
    for (const auto& refused : e.refusals)
      fmt::format_to(to, "  refused: {}:{}: {}: {}\n", safe(refused.host), refused.port, safe(refused.reason),
                     safe(refused.detail));
    if (e.refusals_omitted) fmt::format_to(to, "  ({} more refused)\n", e.refusals_omitted);
  }
  for (const auto& name : r.unavailable_bindings) fmt::format_to(to, "unavailable binding: {}\n", safe(name));
  for (const auto& problem : r.problems) fmt::format_to(to, "problem: {}\n", safe(problem));
  return out;
}

std::string refusal_report(const refusal& refused) {
  return fmt::format("refused: {}: {}\n", name_of(refused.reason), safe(refused.message));
}

std::string description_report(const description& d, const std::vector<backend_info>& backends) {
  std::string out;
  const auto to = std::back_inserter(out);
  out.append("local backends:\n");
  for (const auto& b : backends)
    fmt::format_to(to, "  {:<18} {:<9} {:<13} {}\n", safe(b.name), name_of(b.isolation),
                   b.available ? "available" : "unavailable", safe(b.reason));
  // A probe that was refused reached no level, whatever the description's default says.
  fmt::format_to(to, "\nchosen: {}   ready: {}   isolation reached: {}\n", d.backend.empty() ? "none" : safe(d.backend),
                 d.ready ? "yes" : "no", d.ready ? name_of(d.isolation) : "none");
  if (!d.interpreter.empty())
    fmt::format_to(to, "interpreter: {}\nlauncher: {}\n", safe(d.interpreter), safe(d.launcher));
  const auto& c = d.limit_ceiling;
  fmt::format_to(to, "limit ceiling: cpu {} s, memory {} B, file size {} B, processes {}, wall {} s\n",
                 c.cpu_seconds.value, c.address_space_bytes.value, c.file_size_bytes.value, c.process_count.value,
                 c.wall_seconds.value);
  fmt::format_to(to, "network: allowlist {}{}\n", d.network_allowlist ? "offered" : "not offered",
                 d.allowed_hosts ? fmt::format(" (capped to {})", safe(fmt::format("{}", fmt::join(*d.allowed_hosts, ", "))))
                                 : std::string());
  append_grades(out, d.guarantees);
  out.append("mechanisms:\n");
  for (const auto& m : d.mechanisms) fmt::format_to(to, "  {}\n", safe(m));
  for (const auto& p : d.problems) fmt::format_to(to, "problem: {}\n", safe(p));
  return out;
}

}  // namespace psych::cli

#include "service/prometheus_text.hpp"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace psych::prometheus {
namespace {

bool is_name(std::string_view name, bool colon_allowed) {
  const auto word = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (name.empty() || !(word(name[0]) || (colon_allowed && name[0] == ':'))) return false;
  for (const char c : name)
    if (!(word(c) || (c >= '0' && c <= '9') || (colon_allowed && c == ':'))) return false;
  return true;
}

/// The caller's constants are checked where they are used: a wrong one is a bug, not an input.
void require_name(std::string_view name, bool metric) {
  if (!is_name(name, metric)) std::abort();
}

/// Label values escape backslash, double quote and newline; HELP text backslash and newline.
std::string escaped(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (quote && c == '"') out += "\\\"";
    else out += c;
  }
  return out;
}

std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

constexpr std::string_view type_name(metric_type type) {
  switch (type) {
    case metric_type::counter: return "counter";
    case metric_type::gauge: return "gauge";
    case metric_type::histogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

void text_writer::family(std::string_view name, metric_type type, std::string_view help) {
  require_name(name, true);
  if (type == metric_type::counter && !name.ends_with("_total")) std::abort();
  family_ = name;
  type_ = type;
  text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escaped(help, false), name, type_name(type));
}

void text_writer::line(std::string_view suffix, std::span<const label> labels, std::string_view value) {
  text_ += family_;
  text_ += suffix;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    require_name(labels[i].name, false);
    text_ += fmt::format("{}{}=\"{}\"", i == 0 ? '{' : ',', labels[i].name, escaped(labels[i].value, true));
  }
  if (!labels.empty()) text_ += '}';
  text_ += fmt::format(" {}\n", value);
}

void text_writer::sample(double value, std::initializer_list<label> labels) {
  if (family_.empty() || type_ == metric_type::histogram) std::abort();
  line({}, {labels.begin(), labels.size()}, number(value));
}

void text_writer::sample(std::uint64_t value, std::initializer_list<label> labels) {
  if (family_.empty() || type_ == metric_type::histogram) std::abort();
  line({}, {labels.begin(), labels.size()}, fmt::format("{}", value));
}

void text_writer::histogram(std::span<const double> upper_bounds, std::span<const std::uint64_t> counts,
                            std::uint64_t count, double sum) {
  if (type_ != metric_type::histogram || upper_bounds.size() != counts.size()) std::abort();
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < upper_bounds.size(); ++i) {
    cumulative += counts[i];
    const std::string bound = number(upper_bounds[i]);
    const label le{"le", bound};
    line("_bucket", {&le, 1}, fmt::format("{}", cumulative));
  }
  const label infinity{"le", "+Inf"};
  line("_bucket", {&infinity, 1}, fmt::format("{}", count));
  line("_sum", {}, number(sum));
  line("_count", {}, fmt::format("{}", count));
}

}  // namespace psych::prometheus

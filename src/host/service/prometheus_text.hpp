#pragma once
// The Prometheus text exposition format, version 0.0.4: metric families, each introduced by its
// `# HELP` and `# TYPE` lines, then one sample a line. Names are the caller's constants and label
// values come from closed enums, so a name the format cannot carry is a bug and traps; a label value
// is escaped all the same, since the format defines how.
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace psych::prometheus {

inline constexpr std::string_view content_type = "text/plain; version=0.0.4; charset=utf-8";

enum class metric_type { counter, gauge, histogram };

struct label {
  std::string_view name, value;
};

class text_writer {
 public:
  /// Starts a family: a counter's name ends in `_total`; a histogram's samples come from histogram().
  void family(std::string_view name, metric_type type, std::string_view help);
  /// One sample of the current family.
  void sample(double value, std::initializer_list<label> labels = {});
  void sample(std::uint64_t value, std::initializer_list<label> labels = {});
  /// The current family's samples when it is a histogram: `counts` per bucket (not cumulative) for
  /// each of `upper_bounds`, then the `+Inf` bucket, which is `count`.
  void histogram(std::span<const double> upper_bounds, std::span<const std::uint64_t> counts, std::uint64_t count,
                 double sum);
  [[nodiscard]] std::string take() && { return std::move(text_); }

 private:
  void line(std::string_view suffix, std::span<const label> labels, std::string_view value);
  std::string text_;
  std::string family_;
  metric_type type_ = metric_type::gauge;
};

}  // namespace psych::prometheus

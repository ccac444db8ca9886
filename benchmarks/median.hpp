#pragma once
// The one figure every benchmark here reports per contender: the median of its rounds.
#include <algorithm>
#include <vector>

namespace psych::bench {

/// The median of `v` (the mean of the middle two for an even count); `v` must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace psych::bench

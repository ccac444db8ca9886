#pragma once
// Things measured side by side: each round runs every contender once, in turn, so that machine
// noise hits them all alike; the first rounds only warm the page cache.
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace psych::bench {

struct contender {
  std::string label;
  std::string bench_name;
  std::function<bool()> once;  ///< false: it failed, and the measurement stops
  std::chrono::milliseconds pause_before{0};  ///< not timed (lets a pool refill, say)
  std::vector<double> seconds;
};

/// `rounds` timed rounds after `warm_up` untimed ones. False as soon as a contender fails.
inline bool measure_interleaved(std::vector<contender>& all, int rounds, int warm_up = 3) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < rounds + warm_up; ++i) {
    for (auto& one : all) {
      std::this_thread::sleep_for(one.pause_before);
      const auto start = clock::now();
      if (!one.once()) return false;
      if (i >= warm_up) one.seconds.push_back(std::chrono::duration<double>(clock::now() - start).count());
    }
  }
  return true;
}

}  // namespace psych::bench

// Instants on a grid of the steady clock: deadlines that need not be exact fall on a few
// instants, and a timer takes all of those due at one of them in one wake (issue 34: the native
// links' keep-alives, the HTTP sessions' idle checks). No state; thread-safe.
#pragma once

#include <chrono>

namespace mcpmqtt {

// `t` on the grid of `step` (counted from the clock's epoch): the step at or after it when `up`,
// else the one at or before it. A step of zero or less leaves `t` as it is.
inline std::chrono::steady_clock::time_point on_grid(std::chrono::steady_clock::time_point t,
                                                     std::chrono::steady_clock::duration step,
                                                     bool up) {
  if (step.count() <= 0) return t;
  const auto since = t.time_since_epoch();
  auto steps = since / step;
  if (up && since % step != std::chrono::steady_clock::duration::zero()) ++steps;
  return std::chrono::steady_clock::time_point(steps * step);
}

}  // namespace mcpmqtt

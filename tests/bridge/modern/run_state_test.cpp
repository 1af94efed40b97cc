// The life of a modern gateway run (bridge/modern/run_state.hpp): every state and event, the
// legal transitions and the illegal ones.
#include "bridge/modern/run_state.hpp"

#include <catch2/catch.hpp>

using namespace mcpmqtt::bridge;

namespace {

constexpr RunState kStates[] = {RunState::running, RunState::parked, RunState::settled,
                                RunState::ended};
constexpr RunEvent kEvents[] = {RunEvent::asked, RunEvent::retried, RunEvent::upstream_done,
                                RunEvent::cancelled, RunEvent::expired};

}  // namespace

TEST_CASE("modern gateway run: every state and event, legal and illegal transitions",
          "[modern-gateway][run-state]") {
  using S = RunState;
  using E = RunEvent;
  struct Row {
    S from;
    E event;
    std::optional<S> to;
  };
  const Row table[] = {
      {S::running, E::asked, S::parked},
      {S::running, E::retried, std::nullopt},  // nothing to retry: the client was not asked
      {S::running, E::upstream_done, S::ended},
      {S::running, E::cancelled, S::ended},
      {S::running, E::expired, std::nullopt},  // no requestState was handed out
      {S::parked, E::asked, std::nullopt},     // asked twice without a retry
      {S::parked, E::retried, S::running},
      {S::parked, E::upstream_done, S::settled},
      {S::parked, E::cancelled, S::ended},
      {S::parked, E::expired, S::ended},
      {S::settled, E::asked, std::nullopt},
      {S::settled, E::retried, S::ended},
      {S::settled, E::upstream_done, S::settled},
      {S::settled, E::cancelled, S::ended},
      {S::settled, E::expired, S::ended},
      {S::ended, E::asked, std::nullopt},
      {S::ended, E::retried, std::nullopt},
      {S::ended, E::upstream_done, std::nullopt},
      {S::ended, E::cancelled, std::nullopt},
      {S::ended, E::expired, std::nullopt},
  };
  std::size_t checked = 0;
  for (S from : kStates) {
    for (E event : kEvents) {
      const Row* row = nullptr;
      for (const auto& r : table)
        if (r.from == from && r.event == event) row = &r;
      INFO(to_string(from) << " + " << to_string(event));
      REQUIRE(row);
      CHECK(next_state(from, event) == row->to);
      ++checked;
    }
  }
  CHECK(checked == std::size(table));
}

TEST_CASE("modern gateway run: a run asked twice over resumes between the rounds and ends once",
          "[modern-gateway][run-state]") {
  std::optional<RunState> s = RunState::running;
  for (RunEvent e : {RunEvent::asked, RunEvent::retried, RunEvent::asked, RunEvent::upstream_done,
                     RunEvent::retried}) {
    REQUIRE(s);
    s = next_state(*s, e);
  }
  CHECK(s == RunState::ended);
  CHECK_FALSE(next_state(RunState::ended, RunEvent::retried));  // a spent state
}

#include "bridge/modern/run_state.hpp"

namespace mcpmqtt::bridge {

std::optional<RunState> next_state(RunState from, RunEvent event) {
  using S = RunState;
  using E = RunEvent;
  switch (from) {
    case S::running:
      switch (event) {
        case E::asked:
          return S::parked;
        case E::upstream_done:
        case E::cancelled:
          return S::ended;
        case E::retried:
        case E::expired:
          return std::nullopt;
      }
      break;
    case S::parked:
      switch (event) {
        case E::retried:
          return S::running;
        case E::upstream_done:
          return S::settled;
        case E::cancelled:
        case E::expired:
          return S::ended;
        case E::asked:
          return std::nullopt;
      }
      break;
    case S::settled:
      switch (event) {
        case E::upstream_done:  // a later outcome replaces or joins the one kept
          return S::settled;
        case E::retried:  // the retry takes the outcome kept for it
        case E::cancelled:
        case E::expired:
          return S::ended;
        case E::asked:
          return std::nullopt;
      }
      break;
    case S::ended:
      return std::nullopt;
  }
  return std::nullopt;
}

const char* to_string(RunState state) {
  switch (state) {
    case RunState::running:
      return "running";
    case RunState::parked:
      return "parked";
    case RunState::settled:
      return "settled";
    case RunState::ended:
      return "ended";
  }
  return "?";
}

const char* to_string(RunEvent event) {
  switch (event) {
    case RunEvent::asked:
      return "asked";
    case RunEvent::retried:
      return "retried";
    case RunEvent::upstream_done:
      return "upstream_done";
    case RunEvent::cancelled:
      return "cancelled";
    case RunEvent::expired:
      return "expired";
  }
  return "?";
}

}  // namespace mcpmqtt::bridge

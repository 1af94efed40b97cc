#include "stdio/child_lifecycle.hpp"

namespace mcpmqtt::stdio {

const char* to_string(ChildState state) {
  switch (state) {
    case ChildState::running:
      return "running";
    case ChildState::stdin_lost:
      return "stdin_lost";
    case ChildState::flushing:
      return "flushing";
    case ChildState::stdin_closed:
      return "stdin_closed";
    case ChildState::term_sent:
      return "term_sent";
    case ChildState::kill_sent:
      return "kill_sent";
    case ChildState::reaped:
      return "reaped";
    case ChildState::finished:
      return "finished";
  }
  return "?";
}

bool ChildLifecycle::allowed(ChildState from, ChildState to) {
  using S = ChildState;
  // The exit may come at any stage before it.
  if (to == S::reaped) return from != S::reaped && from != S::finished;
  switch (from) {
    case S::running:
      return to == S::stdin_lost || to == S::flushing || to == S::stdin_closed;
    case S::stdin_lost:
      return to == S::stdin_closed;
    case S::flushing:
      return to == S::stdin_closed;
    case S::stdin_closed:
      return to == S::term_sent;
    case S::term_sent:
      return to == S::kill_sent;
    case S::kill_sent:
      return false;
    case S::reaped:
      return to == S::finished;
    case S::finished:
      return false;
  }
  return false;
}

bool ChildLifecycle::advance(ChildState to) {
  if (!allowed(state_, to)) return false;
  state_ = to;
  return true;
}

}  // namespace mcpmqtt::stdio

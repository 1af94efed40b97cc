// The life of one modern request run by the gateway (ModernGateway's Run) as states and the
// events that move it: a run answers its downstream request, or parks on an input_required round
// (basic/patterns/mrtr) until the client retries with the input responses.
// Stateless functions; thread-safe.
#pragma once

#include <optional>

namespace mcpmqtt::bridge {

enum class RunState {
  running,  // a downstream request waits for the run's answer (a round may be gathering)
  parked,   // input_required was answered; the upstream request is still pending
  settled,  // parked, and the upstream request's outcome is known: it waits for the retry
  ended,    // answered, cancelled or expired: the run is forgotten
};

enum class RunEvent {
  asked,          // a round closed: the client is asked for input
  retried,        // the client retried with a valid requestState
  upstream_done,  // the upstream request ended (answered, its session gone, or refused here)
  cancelled,      // the client gave up, the bridge needed the session, or the request failed
  expired,        // no retry within the requestState's lifetime
};

// The state `event` leads to from `from`; nullopt when the event cannot happen there.
std::optional<RunState> next_state(RunState from, RunEvent event);

const char* to_string(RunState state);
const char* to_string(RunEvent event);

}  // namespace mcpmqtt::bridge

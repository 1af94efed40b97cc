// The stages of a child process from its start to the release of its descriptors, and the only
// transitions between them: the straight line of an ending (002 §stdio: close stdin, then
// SIGTERM, then SIGKILL), with the exit able to come at any stage. No I/O: the ChildProcess of
// child_channel.cpp drives it and acts on each transition.
//
// One strand (its ChildProcess's); not thread-safe.
#pragma once

namespace mcpmqtt::stdio {

enum class ChildState {
  running,       // stdin open; no ending asked
  stdin_lost,    // stdin closed because the child stopped reading it; no ending asked yet
  flushing,      // ending: stdin closes once the messages queued for it are written
  stdin_closed,  // ending: stdin closed; SIGTERM after terminate_after
  term_sent,     // SIGTERM sent to the process group; SIGKILL after kill_after
  kill_sent,     // SIGKILL sent; waiting for the exit
  reaped,        // the child exited and was reaped; what it wrote is still being read
  finished,      // every descriptor and timer released; nothing more happens
};

const char* to_string(ChildState state);

class ChildLifecycle {
 public:
  ChildState state() const { return state_; }

  // Whether `to` may follow `from`.
  static bool allowed(ChildState from, ChildState to);
  // Moves to `to` when allowed from the current state; false, and no change, otherwise.
  bool advance(ChildState to);

  // The child's stdin is open: messages may still be written to it.
  bool stdin_open() const {
    return state_ == ChildState::running || state_ == ChildState::flushing;
  }
  // The ending has begun (stdin, SIGTERM, SIGKILL) and the child has not exited yet.
  bool ending() const {
    return state_ == ChildState::flushing || state_ == ChildState::stdin_closed ||
           state_ == ChildState::term_sent || state_ == ChildState::kill_sent;
  }
  // The child has exited and been reaped.
  bool reaped() const { return state_ == ChildState::reaped || state_ == ChildState::finished; }
  bool finished() const { return state_ == ChildState::finished; }

 private:
  ChildState state_ = ChildState::running;
};

}  // namespace mcpmqtt::stdio

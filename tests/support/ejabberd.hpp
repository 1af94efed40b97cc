// A real ejabberd (Debian 12's package `ejabberd`, 23.01) for one test, as a second MQTT 5 broker
// independent of Mosquitto: its mod_mqtt on a free loopback port, a private node that shares
// nothing with the system's ejabberd (which is never started or talked to) nor with a parallel
// test's node. Stopped, and everything it wrote removed, when the object goes away.
//
// How the node runs:
// - `erl` directly, not ejabberdctl: ejabberdctl started as root switches to the user
//   `ejabberd` (su), which would need the test's directory chowned, and adds a shell and a status
//   poll (a second VM) per start. The VM runs as the test's own user with what ejabberdctl would
//   set: `erl -noinput -noshell -mnesia dir '"<dir>/spool"' -s ejabberd`, with
//   EJABBERD_CONFIG_PATH, EJABBERD_LOG_PATH and ERL_LIBS in its environment (ERL_LIBS: links to
//   the package's ejabberd-23.01*/ directories, found where it is installed).
// - No Erlang distribution at all (no -sname/-name): the node is `nonode@nohost`, starts no epmd,
//   listens on no distribution port and reads or writes no cookie, so parallel tests cannot
//   collide on a node name, a cookie or a shared epmd, and no epmd is left behind. The price:
//   ejabberdctl cannot reach the node (nothing here needs it); SIGTERM stops it gracefully (the VM
//   turns it into init:stop()).
// - Its only listener is mod_mqtt on 127.0.0.1:port() (no c2s, s2s or HTTP listener). Its
//   configuration, Mnesia spool, log, HOME and working directory are in the test's TempDir;
//   ERL_FLAGS and friends are cleared (nothing of the developer's environment reaches the VM) and
//   NOTIFY_SOCKET too (ejabberd would tell a service manager the test runs under that it is
//   ready).
// - The schedulers sleep instead of spinning (+sbwt none…): the node takes next to no CPU while
//   it waits, on a 2-core machine where builds and other tests run beside it.
// - The node is the VM (beam.smp, in a process group of its own) and its port programs:
//   erl_child_setup, which calls setsid() and starts memsup (os_mon's, which ejabberd starts
//   itself) and inet_gethost, each in a session of its own. A signal to the VM's process group
//   does not reach them (they would exit on their own once the VM's pipes close): kill() and
//   stop() find them under the VM in /proc and SIGKILL them as well.
//
// What differs from Mosquitto (tests/support/mosquitto.hpp):
// - A client must log in: ejabberd has no anonymous MQTT. The anonymous auth back end
//   (login_anon) accepts any user name with any non-empty password; username() and password() are
//   such a pair. The user name is a JID's node part: one with a space gets CONNACK 0x86 (Bad User
//   Name or Password), `name@host` means that host (0x88, Server unavailable). A user name without
//   a password, or neither, gets 0x87 (Not authorized); a password without a user name ends the
//   connection without a CONNACK (ejabberd applies MQTT 3.1.1's rule to MQTT 5 too).
// - PUBLISH and wills on a topic starting with '$' are refused, whatever the client: a QoS 1
//   PUBLISH gets PUBACK 0x90 (Topic Name invalid) and the connection stays up, a QoS 0 one is
//   dropped silently, a CONNECT whose will topic starts with '$' gets CONNACK 0x90. Subscribing to
//   a '$' filter is allowed (nothing ever arrives). A SUBSCRIBE with a `$share/…` filter ends the
//   connection (DISCONNECT 0x9E, Shared Subscriptions not supported).
// - A QoS 1 PUBLISH that no subscriber matches gets PUBACK 0x10 (No matching subscribers), a
//   success code. A message queued for a disconnected session (Session Expiry Interval > 0) comes
//   with the DUP flag set when the client resumes it. Wills (retained or not, with a Will Delay
//   Interval or not) and No Local work as with Mosquitto.
// - Starting takes 1.5–2.5 s on an idle 2-core machine (the VM's boot, then 1.3 s starting
//   ejabberd's applications), 6–9 s with both cores busy; Mosquitto's a few ms. A test should
//   start one node, not one per check.
// - Every start is a fresh broker: the spool (where Mnesia keeps retained messages) is emptied, so
//   retained messages and sessions do not survive stop()/kill() and restart(), as with the
//   Mosquitto fixture's `persistence false` (ejabberd itself would keep retained messages across a
//   graceful restart, and lose the latest ones to a SIGKILL).
// - Settings: packets up to 16 MiB (listener `max_payload_size`), 100,000 queued packets per
//   session (`max_queue`), sessions kept up to a day after a disconnect (`session_expiry`: a
//   client's Session Expiry Interval is capped at that), subscriptions up to 64 topic levels deep
//   (`max_topic_depth`; ejabberd's default of 8 refuses deeper filters with SUBACK 0x8F).
//
// Not thread-safe; owned by one test.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mcpmqtt::test {

class Ejabberd {
 public:
  // Why this machine cannot run the fixture (`erl` or the ejabberd package missing), or empty.
  // A test that needs ejabberd reports a non-empty answer with missing_prerequisite()
  // (tests/support/prerequisite.hpp) and returns.
  static std::string missing();

  // Starts the node and returns once an MQTT v5 CONNECT with username()/password() is accepted;
  // throws std::runtime_error (with the node's log) when it is not within 60 s.
  Ejabberd();
  ~Ejabberd();
  Ejabberd(const Ejabberd&) = delete;
  Ejabberd& operator=(const Ejabberd&) = delete;

  std::uint16_t port() const { return port_; }
  pid_t pid() const { return proc_ ? proc_->pid() : -1; }
  // mqtt://127.0.0.1:PORT
  std::string url() const;
  // Credentials every client presents (see above): any such pair works, these are at hand.
  static std::string username() { return "mcpmqtt-test"; }
  static std::string password() { return "anonymous"; }
  bool running();

  // While the node is down its port stays bound by a socket of ours that does not listen, as
  // with Mosquitto::stop(): clients are refused as by a dead broker and no one else gets the
  // port before restart().
  void stop();     // graceful (SIGTERM: the VM shuts ejabberd down), waits for exit
  void kill();     // SIGKILL to the VM and to its port programs
  void restart();  // a fresh node (empty spool) on the same port

  // What the node printed so far, over every start: ejabberd's log lines at info and above, and
  // the VM's own messages (a boot failure). For failure messages.
  std::string log() const;

 private:
  void start();
  void terminate();  // kill() without holding the port
  void hold_port();
  void release_port();
  TempDir dir_;
  std::uint16_t port_ = 0;
  int held_fd_ = -1;
  std::unique_ptr<Process> proc_;
};

}  // namespace mcpmqtt::test

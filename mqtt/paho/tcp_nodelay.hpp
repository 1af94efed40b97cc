// TCP_NODELAY on the Paho engine's MQTT connections.
//
// Paho C never sets TCP_NODELAY and offers no option or callback for it (Paho MQTT C's
// own tracker records it). At QoS 1 a request/response round trip then waits for Nagle's algorithm
// and the peer's delayed ACK: about 88 ms instead of a third of a millisecond. This library
// therefore defines connect(2) itself: once the Paho engine has been used, it sets TCP_NODELAY on
// TCP sockets, then calls the C library's connect. Paho's calls resolve to it by ordinary dynamic
// symbol interposition (the definition is in the executable, which the dynamic linker searches
// first). Every other socket of the bridge sets TCP_NODELAY itself; for them it changes nothing.
#pragma once

namespace mcpmqtt::mqtt::paho {

// Turns the interposition on for the rest of the process (the Paho engine calls it). Also
// guarantees the interposer is linked into the executable.
void use_tcp_nodelay_interposition();
// True once the interposed connect(2) has set TCP_NODELAY on a socket in this process.
bool tcp_nodelay_active();

}  // namespace mcpmqtt::mqtt::paho

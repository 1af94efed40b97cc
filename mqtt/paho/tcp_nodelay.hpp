// TCP_NODELAY on the MQTT connections.
//
// Paho C never sets TCP_NODELAY and offers no option or callback for it (eclipse/paho.mqtt.c
// issue 530). At QoS 1 a request/response round trip then waits for Nagle's algorithm and the
// peer's delayed ACK: about 88 ms instead of a third of a millisecond. This library therefore
// defines connect(2) itself: for TCP sockets it sets TCP_NODELAY, then calls the C library's
// connect. Paho's calls resolve to it by ordinary dynamic symbol interposition (the definition
// is in the executable, which the dynamic linker searches first). Every outgoing TCP connection
// of the process gets TCP_NODELAY — which the HTTP client wants too.
#pragma once

namespace mcpmqtt::mqtt {

// True once the interposed connect(2) has been used for a TCP socket in this process. Calling it
// also guarantees the interposer is linked into the executable.
bool tcp_nodelay_active();

}  // namespace mcpmqtt::mqtt

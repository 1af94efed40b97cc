// The MQTT 5.0 client protocol of one connect attempt, without I/O: CONNECT to DISCONNECT, QoS
// 0/1/2 both ways, keep-alive, topic aliases, flow and size limits. A PUBLISH carries its user
// properties and, when set, Response Topic and Correlation Data (§4.10), both ways. Its owner
// moves the bytes and keeps the time through an Io: the machine asks it to open, read, write,
// finish, close, arm its one timer and run a completion later; the owner reports back through
// the on_* calls. The native engine's Link drives it over a socket; tests drive it with a
// scripted broker and a virtual clock.
//
// Made for one attempt and done with it. One strand (its owner's); not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "mqtt/codec/codec.hpp"
#include "mqtt/protocol/types.hpp"

namespace mcpmqtt::mqtt::protocol {

class ClientProtocol {
 public:
  using Clock = std::chrono::steady_clock;
  using ConnectDone = std::function<void(const ConnectOutcome&)>;
  using AckDone = std::function<void(const AckOutcome&)>;
  struct Events {
    std::function<void(const ReceivedMessage&)> on_message;
    std::function<void(const std::string& why)> on_lost;
  };

  // What the owner does for the machine. An operation never completes inside the call that
  // started it: the owner calls the matching on_* later.
  class Io {
   public:
    virtual ~Io() = default;
    virtual Clock::time_point now() = 0;
    // Resolve, connect, and the TLS and WebSocket handshakes: on_transport_ready.
    virtual void open() = 0;
    // Reads into [data, data+size): on_read or on_read_failed.
    virtual void read(char* data, std::size_t size) = 0;
    // Writes all of the buffers (for WebSocket: one binary message): on_written. They stay
    // valid until then.
    virtual void write(std::span<const std::string_view> buffers) = 0;
    // After our DISCONNECT is written: half-close (TCP, TLS) or the WebSocket closing handshake.
    virtual void finish() = 0;
    // Closes the transport now; a pending write ends with WriteResult::aborted.
    virtual void close() = 0;
    // on_timer at `at`, replacing the one armed before; cancel_timer disarms it.
    virtual void arm_timer(Clock::time_point at) = 0;
    virtual void cancel_timer() = 0;
    // Runs `fn` later on the strand (a completion must not run inside the caller's call); the
    // owner keeps the machine alive until it has run.
    virtual void post(std::function<void()> fn) = 0;
  };
  enum class WriteResult { ok, failed, aborted };

  ClientProtocol(Io& io, EngineConnect params, Events events);
  ClientProtocol(const ClientProtocol&) = delete;
  ClientProtocol& operator=(const ClientProtocol&) = delete;

  const EngineConnect& params() const { return params_; }

  // ---- the owner's calls ---------------------------------------------------------------------
  void start(ConnectDone done);
  void subscribe(std::vector<SubscribeRequest> filters, AckDone done);
  void unsubscribe(std::vector<std::string> filters, AckDone done);
  void publish(PublishRequest message, AckDone done);
  void disconnect(std::chrono::milliseconds timeout, std::function<void()> done);
  // Closes at once: no DISCONNECT (the broker sends the will), no completion or event runs.
  void abort();
  bool connected() const { return state_ == State::connected; }
  // Opening, connected or disconnecting: a new attempt must wait for it to end.
  bool active() const { return state_ != State::closed && state_ != State::idle; }
  bool closed() const { return state_ == State::closed; }
  // Writes started so far: an Io can tell whether handling a read wrote something back (a
  // PUBACK, which carries the TCP ACK of what was read).
  std::uint64_t writes_started() const { return writes_started_; }
  // Acknowledgements of received publications queued to go out shortly (they carry the TCP ACK
  // of what was read).
  bool acks_posted() const { return acks_posted_; }

  // ---- the Io's reports ----------------------------------------------------------------------
  // `why` says which step failed when !ok.
  void on_transport_ready(bool ok, const std::string& why);
  void on_read(std::size_t n);
  void on_read_failed(const std::string& why);
  void on_written(WriteResult result, const std::string& why);
  void on_timer();

 private:
  enum class State { idle, opening, awaiting_connack, connected, disconnecting, closed };
  enum class OpKind { publish, publish_released, subscribe, unsubscribe };
  struct Op {
    OpKind kind;
    AckDone done;
  };
  // Packets for the transport: header bytes here, payloads from the callers' buffers.
  struct Batch {
    std::string bytes;
    struct Segment {
      std::size_t offset = 0;  // into bytes, when payload is null
      std::size_t size = 0;
      const std::string* payload = nullptr;
    };
    std::vector<Segment> segments;
    std::vector<std::shared_ptr<const std::string>> payloads;  // kept alive until written
    std::vector<AckDone> written;                              // QoS 0 publications' completions
    bool empty() const { return segments.empty(); }
    void clear();
  };

  void start_read();
  void process_input();
  bool handle(const codec::FixedHeader& header, std::string_view body);
  void handle_connack(const codec::Connack& p);
  void handle_publish(const codec::Publish& p);
  void handle_ack(const codec::PubAck& p);
  void handle_suback(const codec::SubAck& p);
  void handle_disconnect(const codec::Disconnect& p);

  // Ends a link that failed before CONNACK: the connect attempt's completion says why.
  void fail_connect(std::string why, std::uint8_t reason_code = 0);
  // Ends an established link: on_lost(why), then every pending completion fails.
  void lose(const std::string& why);
  // The broker broke the protocol: DISCONNECT with the reason, then lose / fail_connect.
  void protocol_error(const codec::Error& e);
  void close_now();
  void fail_pending(const std::string& why);
  void maybe_finish_disconnect();
  void send_disconnect_and_finish();
  void finish_disconnect();

  // The bytes from `from` to the end of filling_.bytes are a packet (or a PUBLISH header) just
  // encoded there: queue them. A payload follows its header from the caller's buffer.
  void queue_encoded(std::size_t from);
  void queue_payload(std::shared_ptr<const std::string> payload);
  void send_ack(codec::PacketType type, std::uint16_t packet_id,
                std::uint8_t reason_code = codec::reason::success);
  // PUBACK or PUBREC of a publication just delivered: written on the next turn of the strand.
  void queue_ack(codec::PacketType type, std::uint16_t packet_id);
  // After a read that delivered or acknowledged publications: the acknowledgements and the next
  // read on the strand's next turn.
  void next_turn();
  // Starts a write of what is queued, unless one is in flight or the link cannot write.
  void flush();
  void write_now();
  std::uint16_t allocate_packet_id();
  void arm_timer();
  // When a silent broker is lost, and when the next PINGREQ is due (connected, keep-alive on).
  Clock::time_point lost_at() const;
  Clock::time_point ping_at() const;
  void fail_soon(AckDone done, std::string why);
  std::string describe_reason(std::uint8_t code, const codec::Properties& props) const;

  Io& io_;
  // Once connected, without what only CONNECT needed (will, user properties, credentials).
  EngineConnect params_;
  Events events_;
  ConnectDone connect_done_;
  State state_ = State::idle;

  // Reading: whole packets are decoded in place, views handed out while a callback runs.
  std::vector<char> rbuf_;  // its size is the buffer's: bytes [rbegin_, rend_) are unread
  std::size_t rbegin_ = 0, rend_ = 0;
  bool reading_ = false;

  // Writing: one write in flight; what is queued meanwhile goes out together next.
  Batch filling_, writing_;
  std::vector<std::string_view> buffers_;
  bool write_in_flight_ = false;
  std::uint64_t writes_started_ = 0;
  bool acks_posted_ = false;  // acknowledgements wait for next_turn()
  bool delivered_ = false;    // the read being handled delivered a publication
  bool disconnect_queued_ = false;

  // Broker limits from CONNACK.
  EngineConnack connack_;
  std::uint32_t broker_max_packet_ = 0;
  int broker_max_qos_ = 2;
  bool retain_available_ = true;

  std::unordered_map<std::uint16_t, Op> ops_;  // by packet identifier
  std::uint16_t next_id_ = 0;
  std::size_t publishes_in_flight_ = 0;              // QoS 1 and 2, awaiting their last ack
  std::unordered_set<std::uint16_t> qos2_received_;  // awaiting PUBREL (exactly once)
  codec::TopicAliases aliases_;
  std::vector<UserPropertyView> property_views_;
  const UserProperties* encoded_for_ = nullptr;  // whose property block encoded_properties_ is
  std::shared_ptr<const UserProperties> encoded_owner_;
  std::vector<codec::UserPropertyRef> encoded_refs_;  // into *encoded_owner_
  std::string encoded_properties_;
  // The block of a publication with a Response Topic or Correlation Data, encoded for it alone.
  std::string request_properties_;

  // Keep-alive (MQTT 5.0 §3.1.2.10) and the connect deadline share one timer.
  Clock::time_point last_sent_{}, last_received_{}, deadline_{};
  std::chrono::milliseconds keep_alive_{0};
  Clock::duration grid_{0};  // EngineConnect::keep_alive_grid, at most a quarter of keep_alive_
  bool ping_outstanding_ = false;

  std::function<void()> disconnect_done_;
};

}  // namespace mcpmqtt::mqtt::protocol

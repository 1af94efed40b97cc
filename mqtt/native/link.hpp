// One network connection of the native MQTT engine: the MQTT 5.0 client protocol (CONNECT to
// DISCONNECT, QoS 0/1/2 both ways, keep-alive, topic aliases, flow and size limits) over a
// transport — TCP, TLS, WebSocket or WebSocket over TLS — on the owner's strand.
//
// A Link is made for one connect attempt and ends with it: lost, failed or disconnected, it is
// done, and the engine makes a new one for the next attempt. Every handler holds the link alive
// through shared_from_this(); the engine aborts it when it goes away.
//
// Internal to mqtt/native. One strand; not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include "mqtt/codec/codec.hpp"
#include "mqtt/engine.hpp"

namespace mcpmqtt::mqtt::native {

class Link : public std::enable_shared_from_this<Link> {
 public:
  // Made by make_link() for the transport the parameters name.
  static std::shared_ptr<Link> make(boost::asio::any_io_executor strand, EngineConnect params,
                                    Engine::Events events);
  virtual ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  void start(Engine::ConnectDone done);
  void subscribe(std::vector<SubscribeRequest> filters, Engine::AckDone done);
  void unsubscribe(std::vector<std::string> filters, Engine::AckDone done);
  void publish(PublishRequest message, Engine::AckDone done);
  void disconnect(std::chrono::milliseconds timeout, std::function<void()> done);
  // Closes at once: no DISCONNECT (the broker sends the will), no completion or event runs.
  void abort();
  bool connected() const { return state_ == State::connected; }
  // Opening, connected or disconnecting: a new attempt must wait for it to end.
  bool active() const { return state_ != State::closed && state_ != State::idle; }

 protected:
  Link(boost::asio::any_io_executor strand, EngineConnect params, Engine::Events events);

  // ---- what a transport does; each completes by calling the matching on_* below -----------
  // Resolve, connect, and the TLS and WebSocket handshakes: on_transport_ready.
  virtual void transport_open() = 0;
  // Reads into [data, data+size): on_read.
  virtual void transport_read(char* data, std::size_t size) = 0;
  // Writes all of the buffers (for WebSocket: one binary message): on_written.
  virtual void transport_write(const std::vector<boost::asio::const_buffer>& buffers) = 0;
  // After our DISCONNECT is written: half-close (TCP, TLS) or the WebSocket closing handshake.
  // Reads that follow end with an error or end of stream; nothing calls back otherwise.
  virtual void transport_finish() = 0;
  // Closes the socket now; pending operations end with operation_aborted.
  virtual void transport_close() = 0;
  // The TCP socket's descriptor, for TCP_QUICKACK; -1 when closed.
  virtual int native_handle() = 0;

  void on_transport_ready(const boost::system::error_code& ec, const std::string& failed_step);
  void on_read(const boost::system::error_code& ec, std::size_t n);
  void on_written(const boost::system::error_code& ec);

  boost::asio::any_io_executor strand_;
  const EngineConnect params_;

 private:
  enum class State { idle, opening, awaiting_connack, connected, disconnecting, closed };
  enum class OpKind { publish, publish_released, subscribe, unsubscribe };
  struct Op {
    OpKind kind;
    Engine::AckDone done;
  };
  // Packets for the socket: header bytes here, payloads from the callers' buffers.
  struct Batch {
    std::string bytes;
    struct Segment {
      std::size_t offset = 0;  // into bytes, when payload is null
      std::size_t size = 0;
      const std::string* payload = nullptr;
    };
    std::vector<Segment> segments;
    std::vector<std::shared_ptr<const std::string>> payloads;  // kept alive until written
    std::vector<Engine::AckDone> written;                      // QoS 0 publications' completions
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
  // Starts a write of what is queued, unless one is in flight or the link cannot write.
  void flush();
  void write_now();
  std::uint16_t allocate_packet_id();
  void arm_timer();
  void on_timer();
  void fail_soon(Engine::AckDone done, std::string why);
  std::string describe_reason(std::uint8_t code, const codec::Properties& props) const;

  Engine::Events events_;
  Engine::ConnectDone connect_done_;
  State state_ = State::idle;

  // Reading: whole packets are decoded in place, views handed out while a callback runs.
  std::vector<char> rbuf_;  // its size is the buffer's: bytes [rbegin_, rend_) are unread
  std::size_t rbegin_ = 0, rend_ = 0;
  bool reading_ = false;

  // Writing: one write in flight; what is queued meanwhile goes out together next.
  Batch filling_, writing_;
  std::vector<boost::asio::const_buffer> buffers_;
  bool write_in_flight_ = false;
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
  std::string encoded_properties_;

  // Keep-alive (MQTT 5.0 §3.1.2.10) and the connect deadline share one timer.
  boost::asio::steady_timer timer_;
  std::chrono::steady_clock::time_point last_sent_{}, last_received_{}, deadline_{};
  std::chrono::milliseconds keep_alive_{0};
  bool ping_outstanding_ = false;

  std::function<void()> disconnect_done_;
};

}  // namespace mcpmqtt::mqtt::native

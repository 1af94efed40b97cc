// One network connection of the native MQTT engine: a transport — TCP, TLS, WebSocket or
// WebSocket over TLS — that drives the MQTT 5.0 client protocol (protocol::ClientProtocol) on
// the owner's strand: it moves the protocol's bytes, runs its timer on the steady clock and posts
// its completions.
//
// A Link is made for one connect attempt and ends with it: lost, failed or disconnected, it is
// done, and the engine makes a new one for the next attempt. Every handler holds the link alive
// through shared_from_this(); the engine aborts it when it goes away.
//
// Internal to mqtt/native. One strand; not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include "loop/timer_list.hpp"
#include "mqtt/engine.hpp"
#include "mqtt/protocol/client_protocol.hpp"

namespace mcpmqtt::mqtt::native {

class Link : public std::enable_shared_from_this<Link>,
             private protocol::ClientProtocol::Io,
             private loop::TimerList::Target {
 public:
  // Made by make_link() for the transport the parameters name.
  static std::shared_ptr<Link> make(boost::asio::any_io_executor strand, EngineConnect params,
                                    Engine::Events events);
  ~Link() override;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  void start(Engine::ConnectDone done) { protocol_.start(std::move(done)); }
  void subscribe(std::vector<SubscribeRequest> filters, Engine::AckDone done) {
    protocol_.subscribe(std::move(filters), std::move(done));
  }
  void unsubscribe(std::vector<std::string> filters, Engine::AckDone done) {
    protocol_.unsubscribe(std::move(filters), std::move(done));
  }
  void publish(PublishRequest message, Engine::AckDone done) {
    protocol_.publish(std::move(message), std::move(done));
  }
  void disconnect(std::chrono::milliseconds timeout, std::function<void()> done) {
    protocol_.disconnect(timeout, std::move(done));
  }
  // Closes at once: no DISCONNECT (the broker sends the will), no completion or event runs.
  void abort() { protocol_.abort(); }
  bool connected() const { return protocol_.connected(); }
  // Opening, connected or disconnecting: a new attempt must wait for it to end.
  bool active() const { return protocol_.active(); }

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

 private:
  // protocol::ClientProtocol::Io
  protocol::ClientProtocol::Clock::time_point now() override;
  void open() override { transport_open(); }
  void read(char* data, std::size_t size) override { transport_read(data, size); }
  void write(std::span<const std::string_view> buffers) override;
  void finish() override { transport_finish(); }
  void close() override { transport_close(); }
  void arm_timer(protocol::ClientProtocol::Clock::time_point at) override;
  void cancel_timer() override;
  void post(std::function<void()> fn) override;
  // loop::TimerList::Target
  void on_due(std::uint64_t generation) override;

  protocol::ClientProtocol protocol_;
  // The protocol's one timer is an entry in the io_context's TimerList; the generation tells
  // the entry armed last from one already on its way when the protocol armed again.
  loop::TimerList& timers_;
  std::uint64_t timer_generation_ = 0;
  std::vector<boost::asio::const_buffer> buffers_;

 protected:
  // The parameters of this attempt (the protocol's copy).
  const EngineConnect& params_;
};

}  // namespace mcpmqtt::mqtt::native

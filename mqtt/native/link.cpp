#include "mqtt/native/link.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace mcpmqtt::mqtt::native {

namespace {

bool is_eof(const boost::system::error_code& ec) {
  return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset ||
         ec == boost::asio::error::broken_pipe;
}

protocol::ClientProtocol::Events protocol_events(Engine::Events events) {
  return {std::move(events.on_message), std::move(events.on_lost)};
}

// Keep-alive deadlines on whole seconds of the steady clock: an ingress holding 10,000 idle
// session connections (a PINGREQ every 60 s each) wakes once a second for the ~167 due then, not
// 167 times (issue 34; bench/README.md, "Idle sessions").
constexpr std::chrono::milliseconds kKeepAliveGrid{1000};

EngineConnect on_keep_alive_grid(EngineConnect params) {
  params.keep_alive_grid = kKeepAliveGrid;
  return params;
}

}  // namespace

Link::Link(boost::asio::any_io_executor strand, EngineConnect params, Engine::Events events)
    : strand_(std::move(strand)),
      protocol_(*this, on_keep_alive_grid(std::move(params)), protocol_events(std::move(events))),
      timers_(loop::TimerList::of(strand_)),
      params_(protocol_.params()) {}

Link::~Link() {
  timers_.cancel(*this);
}

void Link::on_transport_ready(const boost::system::error_code& ec, const std::string& why) {
  protocol_.on_transport_ready(!ec, why);
}

void Link::on_read(const boost::system::error_code& ec, std::size_t n) {
  if (ec) {
    return protocol_.on_read_failed(is_eof(ec) ? "the broker closed the connection"
                                               : "the connection failed: " + ec.message());
  }
  const auto writes = protocol_.writes_started();
  protocol_.on_read(n);
  // Linux leaves quick-ACK mode on its own; without it a delayed ACK (40 ms) of ours can hold a
  // broker whose Nagle waits for it (the broker's TCP_NODELAY is off by default). A read that
  // was answered at once, or whose PUBACK goes on the strand's next turn, sends the ACK with the
  // answer: no call for it (issue 34).
  if (protocol_.writes_started() != writes || protocol_.acks_posted()) return;
  if (const int fd = protocol_.closed() ? -1 : native_handle(); fd >= 0) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
  }
}

void Link::on_written(const boost::system::error_code& ec) {
  using Result = protocol::ClientProtocol::WriteResult;
  if (!ec) return protocol_.on_written(Result::ok, {});
  protocol_.on_written(
      ec == boost::asio::error::operation_aborted ? Result::aborted : Result::failed,
      "writing to the broker failed: " + ec.message());
}

protocol::ClientProtocol::Clock::time_point Link::now() {
  return protocol::ClientProtocol::Clock::now();
}

void Link::write(std::span<const std::string_view> buffers) {
  buffers_.clear();
  for (const auto& b : buffers)
    buffers_.emplace_back(b.data(), b.size());
  transport_write(buffers_);
}

void Link::arm_timer(protocol::ClientProtocol::Clock::time_point at) {
  // Target is a private base: the aliasing constructor converts where the base is accessible.
  timers_.arm(std::shared_ptr<loop::TimerList::Target>(shared_from_this(), this),
              ++timer_generation_, at);
}

void Link::cancel_timer() {
  ++timer_generation_;
  timers_.cancel(*this);
}

void Link::on_due(std::uint64_t generation) {
  // On the timer's thread: the generation is compared on the strand, where it changes.
  boost::asio::post(strand_, [self = shared_from_this(), generation] {
    if (generation == self->timer_generation_) self->protocol_.on_timer();
  });
}

void Link::post(std::function<void()> fn) {
  boost::asio::post(strand_, [self = shared_from_this(), fn = std::move(fn)] { fn(); });
}

}  // namespace mcpmqtt::mqtt::native

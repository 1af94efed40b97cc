// The native engine (mqtt.client: "native"): a Link per connect attempt, on the owner's strand.
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include "mqtt/engine.hpp"
#include "mqtt/native/link.hpp"

namespace mcpmqtt::mqtt {

namespace {

class NativeEngine final : public Engine {
 public:
  NativeEngine(boost::asio::any_io_executor strand, Events events)
      : strand_(std::move(strand)), events_(std::move(events)) {}
  ~NativeEngine() override {
    // The link may still have handlers queued: it ends on the strand, without a word to us.
    if (link_) boost::asio::dispatch(strand_, [link = std::move(link_)] { link->abort(); });
  }

  void connect(const EngineConnect& params, ConnectDone done) override {
    if (link_ && link_->active()) {
      boost::asio::post(strand_, [done = std::move(done)] {
        ConnectOutcome out;
        out.why = "a connection is already open or opening";
        done(out);
      });
      return;
    }
    link_ = native::Link::make(strand_, params, events_);
    link_->start(std::move(done));
  }
  void subscribe(std::vector<SubscribeRequest> filters, AckDone done) override {
    if (!link_) return fail_soon(std::move(done));
    link_->subscribe(std::move(filters), std::move(done));
  }
  void unsubscribe(std::vector<std::string> filters, AckDone done) override {
    if (!link_) return fail_soon(std::move(done));
    link_->unsubscribe(std::move(filters), std::move(done));
  }
  void publish(PublishRequest message, AckDone done) override {
    if (!link_) return fail_soon(std::move(done));
    link_->publish(std::move(message), std::move(done));
  }
  void disconnect(std::chrono::milliseconds timeout, std::function<void()> done) override {
    if (!link_) {
      if (done) boost::asio::post(strand_, std::move(done));
      return;
    }
    link_->disconnect(timeout, std::move(done));
  }
  bool connected() const override { return link_ && link_->connected(); }

 private:
  void fail_soon(AckDone done) {
    if (!done) return;
    boost::asio::post(strand_, [done = std::move(done)] {
      done(AckOutcome{false, "not connected", {}});
    });
  }

  boost::asio::any_io_executor strand_;
  Events events_;
  std::shared_ptr<native::Link> link_;
};

}  // namespace

std::unique_ptr<Engine> make_native_engine(boost::asio::any_io_executor strand,
                                           Engine::Events events) {
  return std::make_unique<NativeEngine>(std::move(strand), std::move(events));
}

}  // namespace mcpmqtt::mqtt

#include "mqtt/paho/executor_gate.hpp"

#include <algorithm>

#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>

namespace mcpmqtt::mqtt::paho {

namespace {

// Closes every gate of its execution context when the context shuts down.
class GateService : public boost::asio::execution_context::service {
 public:
  using key_type = GateService;
  static inline boost::asio::execution_context::id id;

  explicit GateService(boost::asio::execution_context& ctx)
      : boost::asio::execution_context::service(ctx) {}

  void add(const std::shared_ptr<ExecutorGate>& gate) {
    std::lock_guard lock(mu_);
    // Forget gates nobody holds any more, so the list does not grow with every connection
    // (amortised: only when it has doubled since the last sweep).
    if (gates_.size() >= sweep_at_) {
      std::erase_if(gates_, [](const std::weak_ptr<ExecutorGate>& g) { return g.expired(); });
      sweep_at_ = std::max<std::size_t>(64, 2 * gates_.size());
    }
    if (shut_down_)
      gate->close();
    else
      gates_.push_back(gate);
  }

 private:
  void shutdown() override {
    std::vector<std::weak_ptr<ExecutorGate>> gates;
    {
      std::lock_guard lock(mu_);
      shut_down_ = true;
      gates.swap(gates_);
    }
    for (auto& weak : gates) {
      if (auto g = weak.lock()) g->close();
    }
  }

  std::mutex mu_;
  bool shut_down_ = false;
  std::vector<std::weak_ptr<ExecutorGate>> gates_;
  std::size_t sweep_at_ = 64;
};

}  // namespace

std::shared_ptr<ExecutorGate> ExecutorGate::open(const boost::asio::any_io_executor& ex) {
  auto gate = std::make_shared<ExecutorGate>(ex);
  auto& ctx = boost::asio::query(ex, boost::asio::execution::context);
  boost::asio::use_service<GateService>(ctx).add(gate);
  return gate;
}

}  // namespace mcpmqtt::mqtt::paho

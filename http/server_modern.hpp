// The HTTP side of a request of MCP revision 2026-07-28 (modern): a ModernReply over the
// Exchange of the POST that carried it. application/json when the answer comes alone, else an
// SSE stream that the final message ends (streamable-http §Sending Messages; resumability is
// gone in 2026-07-28, so no event ids, no priming event, no retry field).
//
// Thread-safe: the methods may be called from any strand (a mutex orders them).
#pragma once

#include <memory>
#include <mutex>

#include "http/server_backend.hpp"
#include "http/server_exchange.hpp"

namespace mcpmqtt::http {

class ExchangeModernReply : public ModernReply {
 public:
  explicit ExchangeModernReply(std::shared_ptr<Exchange> exchange)
      : exchange_(std::move(exchange)) {}

  void notify(const jsonrpc::Message& message) override;
  void finish(const jsonrpc::Message& message, unsigned status) override;
  void watch(std::function<void()> on_gone) override { exchange_->watch(std::move(on_gone)); }

 private:
  std::mutex mu_;
  std::shared_ptr<Exchange> exchange_;
  bool streaming_ = false;
  bool done_ = false;
};

// A JSON-RPC error response as a whole HTTP response (not yet finished by the connection).
Response modern_error_response(unsigned status, const jsonrpc::Message& error);

}  // namespace mcpmqtt::http

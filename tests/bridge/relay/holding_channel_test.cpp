#include "bridge/relay/holding_channel.hpp"

#include <catch2/catch.hpp>

#include "tests/support/memory_channel.hpp"

using namespace mcpmqtt;
using namespace mcpmqtt::test;
using bridge::CloseReason;
using bridge::HoldingChannel;

namespace {
struct Recorder {
  std::vector<std::string> messages;
  std::vector<std::string> closes;
  bridge::Channel::Receiver receiver() {
    return {[this](jsonrpc::Message m) { messages.emplace_back(m.text()); },
            [this](const CloseReason& why) { closes.push_back(why.detail); }};
  }
};
}  // namespace

TEST_CASE("holding channel: holds until started, then delivers in order and passes through",
          "[holding]") {
  auto inner = std::make_shared<MemoryChannel>();
  std::vector<std::string> seen;
  HoldingChannel::Hooks hooks;
  hooks.on_held = [&](const jsonrpc::Message& m) {
    seen.emplace_back(m.method());
    return true;
  };
  auto h = HoldingChannel::create(inner, hooks);
  CHECK(inner->started);
  inner->inject(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})");
  inner->inject(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  CHECK(seen == std::vector<std::string>{"initialize", "notifications/initialized"});
  REQUIRE(h->held().size() == 2);
  Recorder r;
  h->start(r.receiver());
  CHECK(r.messages.size() == 2);
  inner->inject(R"({"jsonrpc":"2.0","id":2,"method":"ping"})");
  CHECK(r.messages.size() == 3);
  h->send(*jsonrpc::Message::parse(R"({"jsonrpc":"2.0","id":2,"result":{}})"));
  CHECK(inner->take().size() == 1);
}

TEST_CASE(
    "holding channel: a declined message is not held, and a close while held is reported after "
    "the held messages",
    "[holding]") {
  auto inner = std::make_shared<MemoryChannel>();
  HoldingChannel::Hooks hooks;
  hooks.on_held = [](const jsonrpc::Message& m) { return m.method() == "initialize"; };
  auto h = HoldingChannel::create(inner, hooks);
  inner->inject(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  inner->inject(R"({"jsonrpc":"2.0","id":2,"method":"initialize"})");
  inner->peer_close({CloseReason::Kind::normal, "stdin closed"});
  CHECK(h->held().size() == 1);
  REQUIRE(h->closed_while_held());
  Recorder r;
  h->start(r.receiver());
  CHECK(r.messages ==
        std::vector<std::string>{R"({"jsonrpc":"2.0","id":2,"method":"initialize"})"});
  CHECK(r.closes == std::vector<std::string>{"stdin closed"});
}

TEST_CASE("holding channel: too many messages before the session is ready close it with an error",
          "[holding]") {
  auto inner = std::make_shared<MemoryChannel>();
  auto h = HoldingChannel::create(inner, {}, 2);
  for (int i = 0; i < 3; ++i)
    inner->inject(R"({"jsonrpc":"2.0","method":"n"})");
  CHECK(inner->closed);
  Recorder r;
  h->start(r.receiver());
  CHECK(r.messages.empty());
  CHECK(r.closes ==
        std::vector<std::string>{"more than 2 messages arrived before the session was ready"});
}

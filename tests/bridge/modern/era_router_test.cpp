// The era of a stdio connection, message by message (bridge/modern/era_router.hpp).
#include "bridge/modern/era_router.hpp"

#include <catch2/catch.hpp>

#include "tests/support/memory_channel.hpp"

using namespace mcpmqtt;
using namespace mcpmqtt::test;
using bridge::CloseReason;
using bridge::EraRouter;

namespace {

const std::string kMeta =
    R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}})";
const std::string kDiscover =
    R"({"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{)" +
    kMeta + "}}";
const std::string kInitialize =
    R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}})";
const std::string kModernCall =
    R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",)" + kMeta + "}}";

struct Fixture {
  std::shared_ptr<MemoryChannel> host = std::make_shared<MemoryChannel>("stdio");
  std::vector<std::string> modern;
  std::vector<jsonrpc::Id> cancels;
  std::shared_ptr<bridge::Channel> legacy;
  std::shared_ptr<MemoryChannel> legacy_peer;  // what the legacy session saw
  std::optional<CloseReason> closed;
  std::shared_ptr<EraRouter> router;

  Fixture() {
    EraRouter::Hooks hooks;
    hooks.on_legacy = [this](std::shared_ptr<bridge::Channel> ch) { legacy = std::move(ch); };
    hooks.on_modern_request = [this](const jsonrpc::Message& m) { modern.emplace_back(m.text()); };
    hooks.on_modern_cancel = [this](const jsonrpc::Id& id) { cancels.push_back(id); };
    hooks.on_closed = [this](const CloseReason& why) { closed = why; };
    router = EraRouter::create(host, hooks);
    router->start();
  }
  // Starts the legacy channel as an ingress session would, recording what reaches it.
  std::vector<std::string> legacy_received;
  std::optional<CloseReason> legacy_closed;
  void start_legacy() {
    REQUIRE(legacy);
    legacy->start(bridge::Channel::Receiver{
        [this](jsonrpc::Message m) { legacy_received.emplace_back(m.text()); },
        [this](const CloseReason& why) { legacy_closed = why; }});
  }
};

}  // namespace

TEST_CASE(
    "era router basic/versioning §Compatibility Matrix: the server/discover probe is answered "
    "without pinning, then "
    "initialize pins the connection to MCP 2025",
    "[era-router][stdio]") {
  Fixture f;
  f.host->inject(kDiscover);
  REQUIRE(f.modern.size() == 1);
  CHECK(f.router->era() == EraRouter::Era::undecided);
  f.router->send_modern(*jsonrpc::Message::parse(
      R"({"jsonrpc":"2.0","id":"server-discover-probe-1","result":{"supportedVersions":["2026-07-28"]}})"));
  CHECK(f.host->take().size() == 1);
  f.host->inject(kInitialize);
  CHECK(f.router->era() == EraRouter::Era::legacy);
  f.start_legacy();
  CHECK(f.legacy_received == std::vector<std::string>{kInitialize});
  // From now on everything is the 2025 session's, even a modern-looking request.
  f.host->inject(kModernCall);
  CHECK(f.legacy_received.size() == 2);
  CHECK(f.modern.size() == 1);
  f.legacy->send(*jsonrpc::Message::parse(R"({"jsonrpc":"2.0","id":0,"result":{}})"));
  CHECK(f.host->take() == std::vector<std::string>{R"({"jsonrpc":"2.0","id":0,"result":{}})"});
  // stdin closes: the session hears it, then the owner.
  f.host->peer_close({CloseReason::Kind::normal, "stdin closed"});
  REQUIRE(f.legacy_closed);
  CHECK(f.legacy_closed->detail == "stdin closed");
  CHECK(f.closed);
}

TEST_CASE(
    "era router basic/versioning: a modern request pins the connection modern, a later "
    "initialize gets -32022 naming the supported versions",
    "[era-router][stdio]") {
  Fixture f;
  f.host->inject(kModernCall);
  CHECK(f.router->era() == EraRouter::Era::modern);
  CHECK(f.modern.size() == 1);
  f.host->inject(kInitialize);
  auto sent = f.host->take();
  REQUIRE(sent.size() == 1);
  CHECK(
      sent[0] ==
      R"({"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported protocol version: 2025-11-25","data":{"supported":["2026-07-28"],"requested":"2025-11-25"}}})");
  f.host->inject(R"({"jsonrpc":"2.0","id":5,"method":"tools/list"})");
  sent = f.host->take();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].find(R"("code":-32022)") != std::string::npos);
  CHECK(sent[0].find("did not name a protocol version") != std::string::npos);
  // 2026-07-28 cancellation on stdio: notifications/cancelled, with or without the envelope.
  f.host->inject(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,)" +
                 kMeta + "}}");
  f.host->inject(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}})");
  CHECK(f.cancels == std::vector<jsonrpc::Id>{jsonrpc::Id::integer(1), jsonrpc::Id::string("x")});
  CHECK_FALSE(f.legacy);
  f.host->peer_close({CloseReason::Kind::normal, "stdin closed"});
  CHECK(f.closed);
}

TEST_CASE("era router: the probe copy — server/discover then EOF — closes without pinning",
          "[era-router][stdio]") {
  Fixture f;
  f.host->inject(kDiscover);
  f.host->peer_close({CloseReason::Kind::normal, "stdin closed"});
  CHECK(f.router->era() == EraRouter::Era::undecided);
  CHECK_FALSE(f.legacy);
  REQUIRE(f.closed);
  CHECK(f.closed->kind == CloseReason::Kind::normal);
}

TEST_CASE("era router: a legacy close before the session started is reported when it starts",
          "[era-router][stdio]") {
  Fixture f;
  f.host->inject(kInitialize);
  f.host->peer_close({CloseReason::Kind::normal, "stdin closed"});
  f.start_legacy();
  CHECK(f.legacy_received.size() == 1);
  REQUIRE(f.legacy_closed);
}

// requestState tokens (bridge/modern/request_state.hpp) and the channel the gateway plays a client
// on (bridge/relay/local_channel.hpp).
#include "bridge/modern/request_state.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "bridge/relay/local_channel.hpp"
#include "common/base64url.hpp"
#include "common/hex.hpp"

using namespace mcpmqtt;
using bridge::CloseReason;

TEST_CASE("request state mrtr §Server Requirements 4: HMAC-protected, any change refused",
          "[request-state][mrtr]") {
  bridge::RequestStateCodec codec(std::string(32, 's'));
  const std::string payload = R"({"run":1,"n":"ab","e":123})";
  const auto token = codec.mint(payload);
  CHECK(token.rfind("v1.", 0) == 0);
  CHECK(token.find('=') == std::string::npos);  // base64url without padding
  REQUIRE(codec.open(token));
  CHECK(*codec.open(token) == payload);
  CHECK_FALSE(codec.open(token + "-TAMPERED"));
  CHECK_FALSE(codec.open("v2" + token.substr(2)));
  CHECK_FALSE(codec.open(""));
  CHECK_FALSE(codec.open("v1.."));
  for (std::size_t i = 3; i < token.size(); i += 7) {
    auto t = token;
    t[i] = t[i] == 'A' ? 'B' : 'A';
    INFO(i);
    CHECK_FALSE(codec.open(t));
  }
  // Another secret does not open it.
  bridge::RequestStateCodec other(std::string(32, 't'));
  CHECK_FALSE(other.open(token));
}

TEST_CASE("request state: base64url both ways, strictly, digests", "[request-state]") {
  for (std::string v : {"", "a", "ab", "abc", "abcd", "\xff\xfe\x00x"}) {
    INFO(v);
    CHECK(base64url_decode(base64url_encode(v)) == v);
  }
  CHECK(base64url_encode("\xfb\xff") == "-_8");
  CHECK_FALSE(base64url_decode("a"));     // a lone character is no byte
  CHECK_FALSE(base64url_decode("-_9"));   // stray bits
  CHECK_FALSE(base64url_decode("ab+/"));  // the standard alphabet is not base64url
  CHECK(bridge::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto r = bridge::random_bytes(32);
  REQUIRE(r);
  CHECK(r->size() == 32);
  CHECK(*r != *bridge::random_bytes(32));
}

TEST_CASE(
    "HMAC-SHA256 with a key prepared once: RFC 4231 §4.2 and §4.3, parts as one message, "
    "concurrent signers",
    "[request-state][hmac]") {
  const auto hex = [](const std::string& bytes) { return hex_encode(bytes); };
  // RFC 4231 §4.2 (test case 1) and §4.3 (test case 2), HMAC-SHA-256.
  const bridge::HmacKey one(std::string(20, '\x0b'));
  CHECK(hex(one.sign("Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const bridge::HmacKey jefe("Jefe");
  CHECK(hex(jefe.sign("what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(jefe.sign({"what do ya ", "", "want for nothing?"}) ==
        jefe.sign("what do ya want for nothing?"));
  CHECK(jefe.sign("x") == bridge::hmac_sha256("Jefe", "x"));
  CHECK(bridge::HmacKey("").sign("x") == bridge::hmac_sha256("", "x"));
  // The prepared key is only read: signers on several threads get the same MACs.
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i)
        if (jefe.sign({"what do ya want ", "for nothing?"}) !=
            jefe.sign("what do ya want for nothing?"))
          ++wrong;
    });
  for (auto& t : threads)
    t.join();
  CHECK(wrong == 0);
}

TEST_CASE("local channel: held until started, both ends told of the other's close",
          "[local-channel]") {
  std::vector<std::string> to_peer;
  std::optional<CloseReason> peer_heard;
  auto ch =
      bridge::LocalChannel::create("[t]",
                                   {[&](jsonrpc::Message m) { to_peer.emplace_back(m.text()); },
                                    [&](const CloseReason& why) { peer_heard = why; }},
                                   2);
  ch->deliver(jsonrpc::Message::notification("a"));
  ch->deliver(jsonrpc::Message::notification("b"));
  std::vector<std::string> to_owner;
  std::optional<CloseReason> owner_heard;
  ch->start({[&](jsonrpc::Message m) { to_owner.emplace_back(m.method()); },
             [&](const CloseReason& why) { owner_heard = why; }});
  CHECK(to_owner == std::vector<std::string>{"a", "b"});
  ch->send(jsonrpc::Message::notification("c"));
  CHECK(to_peer.size() == 1);
  ch->close({CloseReason::Kind::peer_gone, "gone"});
  REQUIRE(peer_heard);
  CHECK(peer_heard->detail == "gone");
  CHECK_FALSE(owner_heard);  // Channel contract: not for a close the owner asked for
  ch->send(jsonrpc::Message::notification("d"));
  CHECK(to_peer.size() == 1);

  // The peer hangs up before the owner starts: the owner hears it when it starts.
  auto early = bridge::LocalChannel::create("[e]", {});
  early->deliver(jsonrpc::Message::notification("x"));
  early->hang_up({CloseReason::Kind::normal, "cancelled"});
  std::optional<CloseReason> heard;
  early->start({[](jsonrpc::Message) {}, [&](const CloseReason& why) { heard = why; }});
  REQUIRE(heard);
  CHECK(heard->detail == "cancelled");

  // Too many held: the channel gives up.
  auto full = bridge::LocalChannel::create("[f]", {}, 1);
  full->deliver(jsonrpc::Message::notification("1"));
  full->deliver(jsonrpc::Message::notification("2"));
  CHECK(full->closed());
}

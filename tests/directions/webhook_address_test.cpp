// Which addresses a webhook may go to (directions/webhook_service.hpp): SEP-1803 targets are
// checked so that the bridge cannot be made to POST into its own network (no SSRF).
#include <catch2/catch.hpp>

#include "directions/webhook_service.hpp"

namespace mcpmqtt::directions {
namespace {

std::string refusal(const std::string& address, const std::vector<std::string>& allowed = {}) {
  return webhook_address_refusal(boost::asio::ip::make_address(address), allowed);
}

TEST_CASE("webhook targets: public addresses pass, non-public ones are refused with their class",
          "[directions][webhooks]") {
  for (const char* ok : {"93.184.215.14", "8.8.8.8", "2606:4700::1111", "2a00:1450:4001::1"})
    CHECK(refusal(ok).empty());
  const std::vector<std::pair<const char*, const char*>> refused = {
      {"127.0.0.1", "loopback"},
      {"10.1.2.3", "private"},
      {"172.31.255.255", "private"},
      {"192.168.0.1", "private"},
      {"169.254.169.254", "link-local"},
      {"100.64.0.1", "shared (carrier-grade NAT)"},
      {"0.0.0.0", "unspecified"},
      {"224.0.0.1", "multicast or reserved"},
      {"255.255.255.255", "multicast or reserved"},
      {"192.0.0.8", "reserved (IETF protocol assignments)"},
      {"192.0.2.1", "documentation"},
      {"198.51.100.7", "documentation"},
      {"203.0.113.9", "documentation"},
      {"198.19.0.1", "benchmarking"},
      {"::1", "loopback"},
      {"::", "unspecified"},
      {"fe80::1", "link-local"},
      {"fd00::1", "private (unique local)"},
      {"ff02::1", "multicast"},
      {"::ffff:127.0.0.1", "loopback"},
      {"::ffff:10.0.0.1", "private"},
      {"2001:db8::1", "documentation"},
      {"100::1", "discard-only"},
  };
  for (const auto& [address, cls] : refused) {
    INFO(address);
    const auto why = refusal(address);
    CHECK(why.find(std::string(", a ") + cls + " address") != std::string::npos);
    CHECK(why.find("events.webhooks.allow_targets") != std::string::npos);
  }
}

TEST_CASE("webhook targets: IPv6 forms that carry an IPv4 address are as public as that address",
          "[directions][webhooks]") {
  // RFC 6052 §2.1, the well-known NAT64 prefix: 64:ff9b::7f00:1 is 127.0.0.1.
  CHECK(refusal("64:ff9b::7f00:1").find("loopback (through NAT64") != std::string::npos);
  CHECK(refusal("64:ff9b::a9fe:a9fe").find("link-local (through NAT64") != std::string::npos);
  CHECK(refusal("64:ff9b::808:808").empty());  // 8.8.8.8
  // RFC 8215: the local-use NAT64 prefix leads into the local network.
  CHECK(refusal("64:ff9b:1::808:808").find("local-use NAT64") != std::string::npos);
  // RFC 3056: 6to4, the gateway's IPv4 address in bits 16 to 47.
  CHECK(refusal("2002:c0a8:0001::1").find("private (through 6to4") != std::string::npos);
  CHECK(refusal("2002:7f00:0001::").find("loopback (through 6to4") != std::string::npos);
  CHECK(refusal("2002:0808:0808::1").empty());
  // RFC 4380: Teredo hides where it leads.
  CHECK(refusal("2001:0:4136:e378:8000:63bf:3fff:fdd2").find("Teredo") != std::string::npos);
  // RFC 4291 §2.5.5.1: the deprecated IPv4-compatible form.
  CHECK(refusal("::10.0.0.1").find("private") != std::string::npos);
}

TEST_CASE("webhook targets: allow_targets admits the addresses and networks it lists, no others",
          "[directions][webhooks]") {
  CHECK(refusal("127.0.0.1", {"127.0.0.1"}).empty());
  CHECK(refusal("::ffff:127.0.0.1", {"127.0.0.1"}).empty());
  CHECK(refusal("10.20.30.40", {"10.0.0.0/8"}).empty());
  CHECK_FALSE(refusal("10.20.30.40", {"10.0.0.0/16"}).empty());
  CHECK(refusal("fd12::5", {"fd12::/16"}).empty());
  CHECK_FALSE(refusal("127.0.0.2", {"127.0.0.1"}).empty());
  CHECK_FALSE(refusal("::1", {"127.0.0.1"}).empty());
}

TEST_CASE("webhook targets: an allow_targets entry that is not an address or network is named",
          "[directions][webhooks]") {
  CHECK(check_allow_target("127.0.0.1").empty());
  CHECK(check_allow_target("10.0.0.0/8").empty());
  CHECK(check_allow_target("::1/128").empty());
  CHECK(check_allow_target("localhost") ==
        "\"localhost\" is not an IP address or network (such as \"10.0.0.0/8\")");
  CHECK(check_allow_target("10.0.0.0/33") ==
        "\"10.0.0.0/33\" has no valid prefix length (0 to 32)");
  CHECK(check_allow_target("::/") == "\"::/\" has no valid prefix length (0 to 128)");
}

}  // namespace
}  // namespace mcpmqtt::directions

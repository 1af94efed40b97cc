#include "bridge/modern/round_state.hpp"

#include <optional>

#include <rapidjson/document.h>

#include "bridge/jsonrpc/json_access.hpp"
#include "bridge/modern/protocol.hpp"

namespace mcpmqtt::bridge {

using jsonrpc::member;
using rapidjson::Value;

std::string params_digest(const jsonrpc::Message& m) {
  const Value* params = m.params();
  if (!params || !params->IsObject()) return sha256_hex("");
  rapidjson::Document d;
  d.CopyFrom(*params, d.GetAllocator());
  d.RemoveMember("_meta");
  d.RemoveMember("inputResponses");
  d.RemoveMember("requestState");
  return sha256_hex(modern::canonical_json(static_cast<const Value&>(d)));
}

std::string mint_round_state(const RequestStateCodec& codec, const RoundTicket& ticket,
                             const RoundOwner& owner, const std::string& digest,
                             std::int64_t expiry_ms) {
  const std::string payload =
      R"({"run":)" + std::to_string(ticket.run) + R"(,"n":)" + jsonrpc::quote(ticket.nonce) +
      R"(,"r":)" + std::to_string(ticket.round) + R"(,"p":)" +
      jsonrpc::quote(sha256_hex(owner.principal)) + R"(,"k":)" +
      jsonrpc::quote(sha256_hex(owner.key)) + R"(,"m":)" + jsonrpc::quote(owner.method) +
      R"(,"d":)" + jsonrpc::quote(digest) + R"(,"e":)" + std::to_string(expiry_ms) +
      (owner.replica.empty() ? "" : R"(,"o":)" + jsonrpc::quote(owner.replica)) + "}";
  return codec.mint(payload);
}

std::string round_state_replica(std::string_view token) {
  const auto payload = RequestStateCodec::peek(token);
  if (!payload) return {};
  rapidjson::Document d;
  d.Parse(payload->data(), payload->size());
  const Value* o = d.HasParseError() ? nullptr : member(&d, "o");
  return o && o->IsString() ? std::string(o->GetString(), o->GetStringLength()) : std::string();
}

Expected<RoundTicket, std::string> open_round_state(const RequestStateCodec& codec,
                                                    std::string_view token, const RoundOwner& owner,
                                                    const jsonrpc::Message& retry,
                                                    std::int64_t now_ms) {
  auto fail = [](std::string why) { return unexpected(std::move(why)); };
  const auto payload = codec.open(token);
  if (!payload) return fail("not minted by this bridge, or altered");
  rapidjson::Document d;
  d.Parse(payload->data(), payload->size());
  auto str = [&](const char* k) -> std::string {
    const Value* v = member(&d, k);
    return v && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : std::string();
  };
  auto num = [&](const char* k) -> std::optional<std::int64_t> {
    const Value* v = member(&d, k);
    if (v && v->IsInt64()) return v->GetInt64();
    return std::nullopt;
  };
  const auto run = num("run");
  const auto round = num("r");
  const auto expiry = num("e");
  if (d.HasParseError() || !d.IsObject() || !run || !round || !expiry)
    return fail("malformed payload");
  if (*expiry <= now_ms) return fail("expired");
  if (str("p") != sha256_hex(owner.principal)) return fail("minted for another principal");
  if (str("k") != sha256_hex(owner.key)) return fail("minted for another server or capabilities");
  if (str("m") != owner.method) return fail("minted for " + str("m"));
  if (str("d") != params_digest(retry)) return fail("minted for a request with other params");
  return RoundTicket{static_cast<std::uint64_t>(*run), str("n"),
                     static_cast<std::uint32_t>(*round)};
}

}  // namespace mcpmqtt::bridge

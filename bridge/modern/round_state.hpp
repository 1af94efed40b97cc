// The requestState the modern gateway hands out with each input round (basic/patterns/mrtr
// §Server Requirements 4–5): what it binds — the run and round, a nonce, digests of the
// principal and the pool key, the method, a digest of the request's params and an expiry — in a
// RequestStateCodec token, and the checks a retry's token passes.
// Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/modern/request_state.hpp"
#include "common/expected.hpp"

namespace mcpmqtt::bridge {

// What one round's state names: the run it resumes, and the round within it.
struct RoundTicket {
  std::uint64_t run = 0;
  std::string nonce;
  std::uint32_t round = 0;
};

// Who and what a state is minted for (or, on the retry, presented by).
struct RoundOwner {
  std::string principal;
  std::string key;  // the pool key: server-name, principal, capabilities
  std::string method;
  std::string replica;  // the ingress replica holding the run (ingress.replicas.id); minted only
};

// The digest a state binds the request by: its params without what changes between rounds
// (_meta, inputResponses, requestState).
std::string params_digest(const jsonrpc::Message& request);

std::string mint_round_state(const RequestStateCodec& codec, const RoundTicket& ticket,
                             const RoundOwner& owner, const std::string& params_digest,
                             std::int64_t expiry_ms);

// The replica a state names as holding its run, read without checking the MAC (the owner checks
// it when the retry reaches it); empty for a token that names none or is not a state at all.
std::string round_state_replica(std::string_view token);

// The ticket of `token` when the codec minted it, it has not expired at `now_ms`, and it was
// minted for `owner` and for a request with the params of `retry`; else why not.
Expected<RoundTicket, std::string> open_round_state(const RequestStateCodec& codec,
                                                    std::string_view token, const RoundOwner& owner,
                                                    const jsonrpc::Message& retry,
                                                    std::int64_t now_ms);

}  // namespace mcpmqtt::bridge

// JWK Sets (auth/token.hpp KeySet::parse) from any bytes.
//
// Checked: a document over the size limit or with more entries than the key limit is refused;
// an accepted set has one key or one skip per entry of its "keys" array (counted here with
// RapidJSON on its own), one reason per skip, at most max_keys keys, each with an OpenSSL key and
// a kty of RSA, EC or OKP, its alg (if any) of that kty; candidates() offers only keys that suit
// the alg and carry the kid asked for, and has_kid() agrees; tighter limits refuse more, never
// less; a signature of zeros verifies with no RSA or EC key.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "auth/internal.hpp"
#include "auth/token.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace auth = mcpmqtt::auth;
using mcpmqtt::fuzz::check;

namespace {

std::string_view kty_of(auth::Alg alg) {
  return alg == auth::Alg::ES256 ? "EC" : alg == auth::Alg::EdDSA ? "OKP" : "RSA";
}

// The entries of the document's "keys" array as RapidJSON reads it (nullopt: none to count).
std::optional<std::size_t> entries_of(std::string_view text) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(text.data(),
                                                                                  text.size());
  if (d.HasParseError() || !d.IsObject()) return std::nullopt;
  const auto it = d.FindMember("keys");
  if (it == d.MemberEnd() || !it->value.IsArray()) return std::nullopt;
  return it->value.Size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auth::KeySet::Limits limits;
  auto set = auth::KeySet::parse(text, limits);
  if (!set) {
    check(!set.error().empty(), "a refusal without a reason");
    return 0;
  }
  check(size <= limits.max_document_bytes, "a document over the size limit");
  const auto entries = entries_of(text);
  check(entries.has_value(), "accepted without a keys array");
  check(*entries <= limits.max_keys, "more entries than the limit");
  check(set->size() + set->skipped() == *entries, "a key neither kept nor skipped");
  check(set->empty() == (set->size() == 0), "empty()");
  std::size_t reasons = set->skipped_reasons().empty() ? 0 : 1;
  for (std::size_t at = 0; (at = set->skipped_reasons().find("; ", at)) != std::string::npos; ++at)
    ++reasons;
  check(reasons == set->skipped(), "not one reason per skipped key");

  // Every key, through the lookups a verifier makes.
  for (const auto alg : {auth::Alg::RS256, auth::Alg::PS256, auth::Alg::ES256, auth::Alg::EdDSA}) {
    std::size_t suitable = 0;
    for (const auto* k : set->candidates("", alg)) {
      check(k->key != nullptr, "a key without an OpenSSL key");
      check(k->kty == kty_of(alg), "a candidate of another kty");
      check(!k->alg || *k->alg == alg, "a candidate whose own alg is another");
      ++suitable;
      if (!k->kid.empty()) {
        check(set->has_kid(k->kid), "has_kid() misses a key");
        bool listed = false;
        for (const auto* same : set->candidates(k->kid, alg)) {
          check(same->kid == k->kid, "a candidate with another kid");
          listed = listed || same == k;
        }
        check(listed, "a key missing from the candidates for its own kid");
      }
      // A signature of zeros is no RSA or ECDSA signature, whatever the key. (Ed25519 is left
      // out: with a small-order public key, a degenerate signature can verify.)
      if (alg != auth::Alg::EdDSA) {
        auth::Token token;
        token.alg = alg;
        token.kid = k->kid;
        token.typ = "at+jwt";
        token.signing_input = "e30.e30";
        token.claims_json = "{}";
        token.signature.assign(k->key->signature_bytes, '\0');
        const auto r = auth::verify(token, *set, auth::Rules{}, 0);
        check(!r.has_value(), "a signature of zeros verified");
      }
    }
    check(suitable <= set->size(), "more candidates than keys");
  }
  // Every kept key serves some alg.
  std::set<const auth::Jwk*> usable;
  for (const auto alg : {auth::Alg::RS256, auth::Alg::PS256, auth::Alg::ES256, auth::Alg::EdDSA})
    for (const auto* k : set->candidates("", alg))
      usable.insert(k);
  check(usable.size() == set->size(), "a key no alg can use");

  // Tighter limits refuse more, never less, and never read a kept key otherwise.
  auth::KeySet::Limits tight;
  tight.max_document_bytes = size / 2 + 1;
  tight.max_keys = *entries / 2;
  auto smaller = auth::KeySet::parse(text, tight);
  if (smaller) {
    check(smaller->size() == set->size() && smaller->skipped() == set->skipped(),
          "tight limits read the set otherwise");
  }
  return 0;
}

// Access tokens (auth/token.hpp) from any bytes: parse_token, then verify against a fixed key set
// read from the JWK Set literal below.
//
// Input: one byte of settings, then the compact token. Settings: bit 0, sign the token as its
// issuer would (the fuzzer's own keys, made at start-up, one per key type: the signature and kid
// are replaced after parsing, so that the claims' rules are reached whatever the input's
// signature); bit 1, typ at+jwt not required; bits 2-3, the allow-list (all; RS256; ES256 and
// EdDSA; none); bits 4-5, the clock skew (60, 0, 300 or -5 s).
//
// Checked: a parsed token is at most kMaxTokenBytes, its signing input, claims and signature are
// the input's parts (base64url has one text per byte string, so they encode back to the very
// text), its alg is allowed and its typ lower case; refusals at parsing are malformed or
// unsupported_alg; verify never says malformed or unavailable of a parsed token and decides the
// same twice; a token signed by its issuer is refused only for its claims or typ; accepted claims
// obey the rules (issuer, an audience, exp and nbf against the skew, a subject); no refusal's
// detail repeats a part of the token.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "auth/token.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace auth = mcpmqtt::auth;
using mcpmqtt::fuzz::check;

namespace {

// Public keys only; their private halves signed the seeds (tests/fuzz/make_seeds.py) and were
// discarded. "rsa" names no alg (RS256 and PS256), the oct key is skipped.
constexpr std::string_view kJwks = R"({"keys":[
{"kty":"RSA","kid":"rsa","n":"vzEZJKXOmcxWFbXLfIu9He5WweNjTlRy7B19SUVs4ZH2zKZuV3hNeDWJtwQyii8jpUenisZSAqA6kPWu8NICLtyFoowBhvY0LvPqnMq0np9-Z5ozaVefu2CYU7uaS_iolepAbe5BCWzv_QJtk2xI3znomIVDy3z798PrqjUPUSiNGETIDjCQCrmENPAIwhwyaUtp6I3O0-q652aeQ6IFtDkqeuYqSIdTnheYsp_4vI0dDXBWJbDYAl6kTAvfTWToChcUB1IfFjevuN_DriJWWbu4ogui3Q_q5tauxqDZHukHgMP4IbYwnhi15fmsDROpx_k8N5oyH4YduoinIvpWJQ","e":"AQAB"},
{"kty":"EC","kid":"ec","crv":"P-256","alg":"ES256","use":"sig","x":"mfF_7NTmCVXk2utZbT8whIAvfD-wWF8QarB101P85zU","y":"T3vZY7X_mOMe1GgkwX_SuxpCDWJQanutK7-HsLa4pYw"},
{"kty":"OKP","kid":"ed","crv":"Ed25519","alg":"EdDSA","x":"7K8njtKEAy7MnihIUojrFxFiRvE6hRZsCnaJD-YSbhU"},
{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}]})";

constexpr std::int64_t kNow = 1'900'000'000;

struct FuzzPkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct FuzzMdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct FuzzBnFree {
  void operator()(BIGNUM* p) const { BN_free(p); }
};
struct FuzzSigFree {
  void operator()(ECDSA_SIG* p) const { ECDSA_SIG_free(p); }
};
using FuzzPkey = std::unique_ptr<EVP_PKEY, FuzzPkeyFree>;

const unsigned char* fuzz_bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

std::string bn_of(EVP_PKEY* key, const char* name, int pad) {
  BIGNUM* raw = nullptr;
  check(EVP_PKEY_get_bn_param(key, name, &raw) == 1, "a key parameter");
  std::unique_ptr<BIGNUM, FuzzBnFree> bn(raw);
  std::string out(static_cast<std::size_t>(pad ? pad : BN_num_bytes(bn.get())), '\0');
  BN_bn2binpad(bn.get(), reinterpret_cast<unsigned char*>(out.data()),
               static_cast<int>(out.size()));
  return out;
}

// The issuer's side: a key of each type, made once, and the JWK Set of their public halves.
struct Signer {
  FuzzPkey rsa{EVP_RSA_gen(2048)};
  FuzzPkey ec{EVP_EC_gen("P-256")};
  FuzzPkey ed{EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519")};
  auth::KeySet keys;

  Signer() {
    check(rsa && ec && ed, "key generation");
    std::string x(32, '\0');
    std::size_t len = x.size();
    check(EVP_PKEY_get_raw_public_key(ed.get(), reinterpret_cast<unsigned char*>(x.data()), &len) ==
              1,
          "Ed25519 public key");
    const std::string jwks =
        R"({"keys":[{"kty":"RSA","kid":"rsa","n":")" +
        auth::base64url_encode(bn_of(rsa.get(), OSSL_PKEY_PARAM_RSA_N, 0)) + R"(","e":")" +
        auth::base64url_encode(bn_of(rsa.get(), OSSL_PKEY_PARAM_RSA_E, 0)) +
        R"("},{"kty":"EC","kid":"ec","crv":"P-256","x":")" +
        auth::base64url_encode(bn_of(ec.get(), OSSL_PKEY_PARAM_EC_PUB_X, 32)) + R"(","y":")" +
        auth::base64url_encode(bn_of(ec.get(), OSSL_PKEY_PARAM_EC_PUB_Y, 32)) +
        R"("},{"kty":"OKP","kid":"ed","crv":"Ed25519","x":")" + auth::base64url_encode(x) +
        R"("}]})";
    auto parsed = auth::KeySet::parse(jwks);
    check(parsed.has_value() && parsed->size() == 3, "the signer's own JWK Set");
    keys = std::move(*parsed);
  }

  // The JWS signature of `input` under `alg` (ES256: R || S), and the kid of its key.
  std::string sign(auth::Alg alg, std::string_view input, std::string& kid) const {
    EVP_PKEY* key = alg == auth::Alg::ES256   ? ec.get()
                    : alg == auth::Alg::EdDSA ? ed.get()
                                              : rsa.get();
    kid = alg == auth::Alg::ES256 ? "ec" : alg == auth::Alg::EdDSA ? "ed" : "rsa";
    std::unique_ptr<EVP_MD_CTX, FuzzMdCtxFree> ctx(EVP_MD_CTX_new());
    EVP_PKEY_CTX* pctx = nullptr;
    check(ctx &&
              EVP_DigestSignInit(ctx.get(), &pctx, alg == auth::Alg::EdDSA ? nullptr : EVP_sha256(),
                                 nullptr, key) == 1,
          "EVP_DigestSignInit");
    if (alg == auth::Alg::PS256) {
      check(EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
                EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, 32) == 1,
            "PSS parameters");
    }
    std::size_t len = 0;
    check(EVP_DigestSign(ctx.get(), nullptr, &len, fuzz_bytes(input), input.size()) == 1,
          "signature length");
    std::string sig(len, '\0');
    check(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                         fuzz_bytes(input), input.size()) == 1,
          "EVP_DigestSign");
    sig.resize(len);
    if (alg != auth::Alg::ES256) return sig;
    const unsigned char* p = fuzz_bytes(sig);
    std::unique_ptr<ECDSA_SIG, FuzzSigFree> der(d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(len)));
    check(der != nullptr, "d2i_ECDSA_SIG");
    std::string raw(64, '\0');
    auto* out = reinterpret_cast<unsigned char*>(raw.data());
    BN_bn2binpad(ECDSA_SIG_get0_r(der.get()), out, 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(der.get()), out + 32, 32);
    return raw;
  }
};

const auth::KeySet& fixed_keys() {
  static const auth::KeySet keys = [] {
    auto parsed = auth::KeySet::parse(kJwks);
    check(parsed.has_value() && parsed->size() == 3 && parsed->skipped() == 1, "the fixed JWK Set");
    return std::move(*parsed);
  }();
  return keys;
}

const Signer& signer() {
  static const Signer s;
  return s;
}

bool contains(const std::string& hay, std::string_view needle) {
  return hay.find(needle) != std::string::npos;
}

bool base64url_text(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
}

// No refusal repeats a part of the token. Only parts of 24 base64url characters or more are
// looked for: a detail is words, numbers and configured URLs, never such a run, so a fuzzed part
// of any other form could match it by chance.
void check_detail(const auth::Rejection& r, const std::vector<std::string_view>& parts) {
  check(!r.detail.empty(), "a refusal without a detail");
  for (const auto part : parts) {
    if (part.size() >= 24 && base64url_text(part))
      check(!contains(r.detail, part), "a detail repeats the token");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned settings = data[0];
  const std::string_view compact(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool resign = settings & 1;

  auth::Rules rules;
  rules.issuer = "https://issuer.fuzz";
  rules.audiences = {"https://bridge.fuzz/mcp", "https://bridge.fuzz"};
  rules.require_at_jwt = !(settings & 2);
  switch ((settings >> 2) & 3) {
    case 1:
      rules.algorithms = {auth::Alg::RS256};
      break;
    case 2:
      rules.algorithms = {auth::Alg::ES256, auth::Alg::EdDSA};
      break;
    case 3:
      rules.algorithms.clear();
      break;
    default:
      break;
  }
  constexpr std::int64_t kSkews[] = {60, 0, 300, -5};
  rules.clock_skew = std::chrono::seconds(kSkews[(settings >> 4) & 3]);

  std::vector<std::string_view> parts;
  for (std::string_view rest = compact;;) {
    const auto dot = rest.find('.');
    parts.push_back(rest.substr(0, dot));
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }

  // base64url: a text that decodes is the one text of its bytes.
  if (auto bytes = auth::base64url_decode(compact)) {
    check(auth::base64url_encode(*bytes) == compact, "base64url: two texts for one byte string");
  }
  check(auth::base64url_decode(auth::base64url_encode(compact)) == compact,
        "base64url: a round trip that changes the bytes");

  auto token = auth::parse_token(compact, rules.algorithms);
  if (!token) {
    const auto f = token.error().failure;
    check(f == auth::Failure::malformed || f == auth::Failure::unsupported_alg,
          "parse_token refused for a reason of verify's");
    check_detail(token.error(), parts);
    return 0;
  }
  check(compact.size() <= auth::kMaxTokenBytes, "a token over the limit");
  check(parts.size() == 3, "a token of other than three parts");
  check(token->signing_input.size() == parts[0].size() + 1 + parts[1].size() &&
            compact.substr(0, token->signing_input.size()) == token->signing_input,
        "the signing input is not the token's first two parts");
  check(auth::base64url_encode(token->claims_json) == parts[1], "the claims are not the payload");
  check(auth::base64url_encode(token->signature) == parts[2],
        "the signature is not the third part");
  check(!token->signature.empty(), "an empty signature");
  bool allowed = false;
  for (const auto a : rules.algorithms)
    allowed = allowed || a == token->alg;
  check(allowed, "an alg outside the allow-list");
  for (const char c : token->typ)
    check(!(c >= 'A' && c <= 'Z'), "typ not in lower case");

  const auth::KeySet* keys = &fixed_keys();
  if (resign) {
    token->signature = signer().sign(token->alg, token->signing_input, token->kid);
    keys = &signer().keys;
  }
  const auto result = auth::verify(*token, *keys, rules, kNow);
  const auto again = auth::verify(*token, *keys, rules, kNow);
  check(result.has_value() == again.has_value() &&
            (result.has_value() || result.error().failure == again.error().failure),
        "verify decides differently the second time");
  if (!result) {
    const auto f = result.error().failure;
    check(f != auth::Failure::malformed && f != auth::Failure::unavailable,
          "verify says malformed or unavailable of a parsed token");
    if (resign) {
      check(f != auth::Failure::unknown_kid && f != auth::Failure::bad_signature &&
                f != auth::Failure::unsupported_alg,
            "a token its issuer signed is refused for its signature");
    }
    check_detail(result.error(), parts);
    return 0;
  }
  const auth::Claims& c = *result;
  const std::int64_t skew = std::max<std::int64_t>(0, rules.clock_skew.count());
  check(c.issuer == rules.issuer, "accepted from another issuer");
  check(!c.subject.empty(), "accepted without a subject");
  bool audience = false;
  for (const auto& a : c.audiences)
    for (const auto& r : rules.audiences)
      audience = audience || a == r;
  check(audience, "accepted for another audience");
  check(c.expires_at > kNow - skew, "accepted after exp and the skew");
  check(c.not_before <= kNow + skew, "accepted before nbf and the skew");
  check(!rules.require_at_jwt || token->typ == "at+jwt" || token->typ == "application/at+jwt",
        "accepted without typ at+jwt");
  for (const auto& s : c.scopes)
    check(!s.empty() && s.find(' ') == std::string::npos, "a scope that is no scope-token");
  return 0;
}

#include "tests/support/test_issuer.hpp"

#include <cstdio>
#include <stdexcept>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

namespace mcpmqtt::test {

namespace {

struct IssuerPkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct IssuerMdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct IssuerBnFree {
  void operator()(BIGNUM* p) const { BN_free(p); }
};
struct IssuerBioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct IssuerEcdsaSigFree {
  void operator()(ECDSA_SIG* p) const { ECDSA_SIG_free(p); }
};

[[noreturn]] void openssl_failed(const char* what) {
  char buf[256] = "";
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  ERR_clear_error();
  throw std::runtime_error(std::string("test issuer: ") + what + ": " + buf);
}

const unsigned char* issuer_bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// A BIGNUM parameter of a key, big-endian, `pad` bytes long when pad > 0.
std::string bn_param(EVP_PKEY* key, const char* name, int pad = 0) {
  BIGNUM* raw = nullptr;
  if (EVP_PKEY_get_bn_param(key, name, &raw) != 1) openssl_failed(name);
  std::unique_ptr<BIGNUM, IssuerBnFree> bn(raw);
  std::string out(static_cast<std::size_t>(pad > 0 ? pad : BN_num_bytes(bn.get())), '\0');
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  if (pad > 0 ? BN_bn2binpad(bn.get(), p, pad) != pad : BN_bn2bin(bn.get(), p) < 0)
    openssl_failed("BN_bn2bin");
  return out;
}

}  // namespace

struct TestIssuer::Key {
  std::string kid;
  std::string alg;
  KeyOptions options;
  std::shared_ptr<EVP_PKEY> pkey;
};

std::string b64url(std::string_view bytes) {
  static constexpr char kChars[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::uint32_t buffer = 0;
  int held = 0;
  for (const char c : bytes) {
    buffer = (buffer << 8) | static_cast<unsigned char>(c);
    held += 8;
    while (held >= 6) {
      held -= 6;
      out += kChars[(buffer >> held) & 0x3F];
    }
  }
  if (held > 0) out += kChars[(buffer << (6 - held)) & 0x3F];
  return out;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", u);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

ClaimSet& ClaimSet::set(const std::string& name, std::string json_value) {
  for (auto& m : members_) {
    if (m.first == name) {
      m.second = std::move(json_value);
      return *this;
    }
  }
  members_.emplace_back(name, std::move(json_value));
  return *this;
}

ClaimSet& ClaimSet::remove(const std::string& name) {
  std::erase_if(members_, [&](const auto& m) { return m.first == name; });
  return *this;
}

std::string ClaimSet::json() const {
  std::string out = "{";
  for (const auto& [name, value] : members_) {
    if (out.size() > 1) out += ',';
    out += json_string(name) + ":" + value;
  }
  return out + "}";
}

std::string JoseHeader::json() const {
  std::string out = "{\"alg\":" + json_string(alg);
  if (kid) out += ",\"kid\":" + json_string(*kid);
  if (typ) out += ",\"typ\":" + json_string(*typ);
  if (!extra.empty()) out += "," + extra;
  return out + "}";
}

TestIssuer::TestIssuer(std::string issuer, std::string audience)
    : issuer_(std::move(issuer)), audience_(std::move(audience)) {}

TestIssuer& TestIssuer::add_key(const std::string& kid, const std::string& alg,
                                KeyOptions options) {
  auto k = std::make_shared<Key>();
  k->kid = kid;
  k->alg = alg;
  k->options = std::move(options);
  if (!k->options.same_key_as.empty()) {
    k->pkey = key(k->options.same_key_as).pkey;
    keys_.push_back(std::move(k));
    return *this;
  }
  EVP_PKEY* raw = nullptr;
  if (alg == "RS256" || alg == "PS256") {
    raw = EVP_RSA_gen(static_cast<unsigned>(k->options.rsa_bits));
  } else if (alg == "ES256") {
    raw = EVP_EC_gen("P-256");
  } else if (alg == "EdDSA") {
    raw = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  } else {
    throw std::runtime_error("test issuer: no key kind for alg " + alg);
  }
  if (!raw) openssl_failed("key generation");
  k->pkey.reset(raw, IssuerPkeyFree{});
  keys_.push_back(std::move(k));
  return *this;
}

const TestIssuer::Key& TestIssuer::key(const std::string& kid) const {
  for (const auto& k : keys_)
    if (k->kid == kid) return *k;
  throw std::runtime_error("test issuer: no key " + kid);
}

std::string TestIssuer::jwk(const Key& k, bool with_private) const {
  EVP_PKEY* p = k.pkey.get();
  std::string out = "{";
  if (k.alg == "RS256" || k.alg == "PS256") {
    out += "\"kty\":\"RSA\",\"n\":\"" + b64url(bn_param(p, OSSL_PKEY_PARAM_RSA_N)) + "\",\"e\":\"" +
           b64url(bn_param(p, OSSL_PKEY_PARAM_RSA_E)) + "\"";
    if (with_private) out += ",\"d\":\"" + b64url(bn_param(p, OSSL_PKEY_PARAM_RSA_D)) + "\"";
  } else if (k.alg == "ES256") {
    out += "\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"" +
           b64url(bn_param(p, OSSL_PKEY_PARAM_EC_PUB_X, 32)) + "\",\"y\":\"" +
           b64url(bn_param(p, OSSL_PKEY_PARAM_EC_PUB_Y, 32)) + "\"";
    if (with_private) out += ",\"d\":\"" + b64url(bn_param(p, OSSL_PKEY_PARAM_PRIV_KEY, 32)) + "\"";
  } else {
    std::string x(32, '\0');
    std::size_t len = x.size();
    if (EVP_PKEY_get_raw_public_key(p, reinterpret_cast<unsigned char*>(x.data()), &len) != 1)
      openssl_failed("Ed25519 public key");
    out += "\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" + b64url(x) + "\"";
    if (with_private) {
      std::string d(32, '\0');
      len = d.size();
      if (EVP_PKEY_get_raw_private_key(p, reinterpret_cast<unsigned char*>(d.data()), &len) != 1)
        openssl_failed("Ed25519 private key");
      out += ",\"d\":\"" + b64url(d) + "\"";
    }
  }
  if (k.options.jwk_kid) out += ",\"kid\":" + json_string(k.kid);
  if (k.options.jwk_alg) out += ",\"alg\":" + json_string(k.alg);
  if (!k.options.use.empty()) out += ",\"use\":" + json_string(k.options.use);
  return out + "}";
}

std::string TestIssuer::jwks() const {
  std::string out = "{\"keys\":[";
  bool first = true;
  for (const auto& k : keys_) {
    if (!k->options.published) continue;
    if (!first) out += ',';
    first = false;
    out += jwk(*k, false);
  }
  return out + "]}";
}

std::string TestIssuer::public_jwk(const std::string& kid) const {
  return jwk(key(kid), false);
}

std::string TestIssuer::private_jwk(const std::string& kid) const {
  return jwk(key(kid), true);
}

ClaimSet TestIssuer::claims(std::int64_t now) const {
  ClaimSet c;
  c.str("iss", issuer_).str("sub", "user-1").str("aud", audience_).num("iat", now);
  c.num("exp", now + 300).str("scope", "mcp:all");
  return c;
}

std::string TestIssuer::sign(const std::string& kid, std::string_view input) const {
  const Key& k = key(kid);
  std::unique_ptr<EVP_MD_CTX, IssuerMdCtxFree> ctx(EVP_MD_CTX_new());
  EVP_PKEY_CTX* pctx = nullptr;
  const EVP_MD* md = k.alg == "EdDSA" ? nullptr : EVP_sha256();
  if (!ctx || EVP_DigestSignInit(ctx.get(), &pctx, md, nullptr, k.pkey.get()) != 1)
    openssl_failed("EVP_DigestSignInit");
  if (k.alg == "PS256" && (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
                           EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, EVP_sha256()) != 1 ||
                           EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, 32) != 1)) {
    openssl_failed("PSS parameters");
  }
  std::size_t len = 0;
  if (EVP_DigestSign(ctx.get(), nullptr, &len, issuer_bytes(input), input.size()) != 1)
    openssl_failed("EVP_DigestSign (length)");
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     issuer_bytes(input), input.size()) != 1) {
    openssl_failed("EVP_DigestSign");
  }
  sig.resize(len);
  if (k.alg != "ES256") return sig;
  // DER (SEC 1) to the JWS form, R || S of 32 bytes each (RFC 7518 §3.4).
  const unsigned char* p = issuer_bytes(sig);
  std::unique_ptr<ECDSA_SIG, IssuerEcdsaSigFree> ecdsa(
      d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size())));
  if (!ecdsa) openssl_failed("d2i_ECDSA_SIG");
  std::string raw(64, '\0');
  auto* out = reinterpret_cast<unsigned char*>(raw.data());
  if (BN_bn2binpad(ECDSA_SIG_get0_r(ecdsa.get()), out, 32) != 32 ||
      BN_bn2binpad(ECDSA_SIG_get0_s(ecdsa.get()), out + 32, 32) != 32) {
    openssl_failed("BN_bn2binpad");
  }
  return raw;
}

std::string TestIssuer::mint_raw(const std::string& kid, std::string_view header_json,
                                 std::string_view claims_json) const {
  const std::string input = b64url(header_json) + "." + b64url(claims_json);
  return input + "." + b64url(sign(kid, input));
}

std::string TestIssuer::mint(const std::string& kid, const JoseHeader& header,
                             std::string_view claims_json) const {
  return mint_raw(kid, header.json(), claims_json);
}

std::string TestIssuer::mint(const std::string& kid, std::string_view claims_json) const {
  JoseHeader h;
  h.alg = key(kid).alg;
  h.kid = kid;
  return mint(kid, h, claims_json);
}

std::string TestIssuer::mint(const std::string& kid, const ClaimSet& claims) const {
  return mint(kid, claims.json());
}

std::string TestIssuer::unsigned_token(std::string_view claims_json) {
  return b64url(R"({"alg":"none","typ":"at+jwt"})") + "." + b64url(claims_json) + ".";
}

std::string TestIssuer::hs256_with_public_key(const std::string& kid,
                                              std::string_view claims_json) const {
  const Key& k = key(kid);
  std::unique_ptr<BIO, IssuerBioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), k.pkey.get()) != 1) openssl_failed("PEM public key");
  char* pem = nullptr;
  const long pem_len = BIO_get_mem_data(bio.get(), &pem);
  JoseHeader h;
  h.alg = "HS256";
  h.kid = kid;
  const std::string input = b64url(h.json()) + "." + b64url(claims_json);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (!HMAC(EVP_sha256(), pem, static_cast<int>(pem_len), issuer_bytes(input), input.size(), mac,
            &mac_len)) {
    openssl_failed("HMAC");
  }
  return input + "." + b64url(std::string_view(reinterpret_cast<const char*>(mac), mac_len));
}

std::string TestIssuer::tamper_signature(std::string token) {
  // The first character of the signature: its high bits are always data, never padding.
  const auto dot = token.rfind('.');
  if (dot == std::string::npos || dot + 1 >= token.size())
    throw std::runtime_error("test issuer: no signature to tamper with");
  char& c = token[dot + 1];
  c = c == 'A' ? 'B' : 'A';
  return token;
}

}  // namespace mcpmqtt::test

// JWK Sets (RFC 7517 §5) read into OpenSSL public keys: RSA (RFC 7518 §6.3.1), EC P-256
// (RFC 7518 §6.2.1) and Ed25519 (RFC 8037 §2). A key this server cannot or must not use is
// skipped with a reason; only a document that is no JWK Set at all is refused.
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/param_build.h>

#include "auth/internal.hpp"
#include "auth/token.hpp"

namespace mcpmqtt::auth {

using detail::member;
using detail::PkeyPtr;
using detail::text_of;
using rapidjson::Value;

namespace {

struct BnFree {
  void operator()(BIGNUM* p) const { BN_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct ParamBldFree {
  void operator()(OSSL_PARAM_BLD* p) const { OSSL_PARAM_BLD_free(p); }
};
struct ParamFree {
  void operator()(OSSL_PARAM* p) const { OSSL_PARAM_free(p); }
};
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;

// What one JWK entry gives: a key, or why it was skipped.
using KeyRead = Expected<Jwk, std::string>;

KeyRead skip(std::string why) {
  return unexpected(std::move(why));
}

const unsigned char* bytes_of(const std::string& s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// A string member decoded from base64url; nullopt (and `why` set) when absent, of another type
// or not base64url.
std::optional<std::string> base64url_member(const Value& jwk, std::string_view name,
                                            std::string& why) {
  const Value* v = member(jwk, name);
  if (!v || !v->IsString()) {
    why = std::string(name) + " is missing or not a string";
    return std::nullopt;
  }
  auto decoded = base64url_decode(text_of(*v));
  if (!decoded) why = std::string(name) + " is not base64url";
  return decoded;
}

// A key built from parameters (OSSL_PKEY_PARAM_*) through the provider of `type`.
PkeyPtr key_from_params(const char* type, const OSSL_PARAM* params) {
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, const_cast<OSSL_PARAM*>(params)) !=
          1) {
    return nullptr;
  }
  return PkeyPtr(raw);
}

KeyRead read_rsa(const Value& jwk) {
  std::string why;
  auto n = base64url_member(jwk, "n", why);
  if (!n) return skip(why);
  auto e = base64url_member(jwk, "e", why);
  if (!e) return skip(why);
  // Some libraries put a zero byte before the modulus (RFC 7518 §6.3.1.1 asks issuers not to).
  const auto n_start = n->find_first_not_of('\0');
  const auto e_start = e->find_first_not_of('\0');
  if (n_start == std::string::npos || e_start == std::string::npos) return skip("n or e is zero");
  const std::size_t n_len = n->size() - n_start;
  // The bit count without building a BIGNUM first: a 1 MiB modulus is refused by its length.
  if (n_len > static_cast<std::size_t>(kMaxRsaBits / 8)) {
    return skip("RSA modulus of more than " + std::to_string(kMaxRsaBits) + " bits");
  }
  BnPtr bn_n(BN_bin2bn(bytes_of(*n) + n_start, static_cast<int>(n_len), nullptr));
  BnPtr bn_e(BN_bin2bn(bytes_of(*e) + e_start, static_cast<int>(e->size() - e_start), nullptr));
  if (!bn_n || !bn_e) return skip("out of memory reading n and e");
  const int bits = BN_num_bits(bn_n.get());
  if (bits < kMinRsaBits) {
    return skip("RSA key of " + std::to_string(bits) + " bits, fewer than " +
                std::to_string(kMinRsaBits));
  }
  if (bits > kMaxRsaBits) {
    return skip("RSA key of " + std::to_string(bits) + " bits, more than " +
                std::to_string(kMaxRsaBits));
  }
  // e: odd, at least 3, at most 64 bits (every real key's is 65537).
  if (!BN_is_odd(bn_e.get()) || BN_is_one(bn_e.get()) || BN_num_bits(bn_e.get()) > 64 ||
      !BN_is_odd(bn_n.get())) {
    return skip("RSA exponent or modulus unusable (e must be odd and above 1, n odd)");
  }
  std::unique_ptr<OSSL_PARAM_BLD, ParamBldFree> bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1) {
    return skip("OpenSSL could not take n and e");
  }
  std::unique_ptr<OSSL_PARAM, ParamFree> params(OSSL_PARAM_BLD_to_param(bld.get()));
  PkeyPtr key = params ? key_from_params("RSA", params.get()) : nullptr;
  if (!key) return skip("OpenSSL refused n and e");
  Jwk out;
  out.kty = "RSA";
  auto pk = std::make_shared<PublicKey>();
  pk->signature_bytes = static_cast<std::size_t>((bits + 7) / 8);
  pk->pkey = std::move(key);
  out.key = std::move(pk);
  return out;
}

KeyRead read_ec(const Value& jwk) {
  const Value* crv = member(jwk, "crv");
  if (!crv || !crv->IsString()) return skip("crv is missing or not a string");
  if (text_of(*crv) != "P-256") return skip("curve not P-256 (the only EC curve used: ES256)");
  std::string why;
  auto x = base64url_member(jwk, "x", why);
  if (!x) return skip(why);
  auto y = base64url_member(jwk, "y", why);
  if (!y) return skip(why);
  // RFC 7518 §6.2.1.2: the full length of a coordinate, leading zeros kept.
  if (x->size() != 32 || y->size() != 32) return skip("P-256 x and y must be 32 bytes each");
  std::string point(1, '\x04');  // SEC 1 §2.3.3, uncompressed
  point += *x;
  point += *y;
  char group[] = "P-256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
      OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()),
      OSSL_PARAM_construct_end()};
  PkeyPtr key = key_from_params("EC", params);
  // Decoding a point checks it is on the curve; the public check says so explicitly (and that
  // it is not the point at infinity), whatever a provider does on import.
  bool valid = false;
  if (key) {
    PkeyCtxPtr check(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
    valid = check && EVP_PKEY_public_check(check.get()) == 1;
  }
  if (!valid) return skip("x and y are not a point of P-256");
  Jwk out;
  out.kty = "EC";
  auto pk = std::make_shared<PublicKey>();
  pk->signature_bytes = 64;
  pk->pkey = std::move(key);
  out.key = std::move(pk);
  return out;
}

KeyRead read_okp(const Value& jwk) {
  const Value* crv = member(jwk, "crv");
  if (!crv || !crv->IsString()) return skip("crv is missing or not a string");
  if (text_of(*crv) != "Ed25519") return skip("OKP curve not Ed25519 (the only one used: EdDSA)");
  std::string why;
  auto x = base64url_member(jwk, "x", why);
  if (!x) return skip(why);
  if (x->size() != 32) return skip("Ed25519 x must be 32 bytes");
  PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, bytes_of(*x), x->size()));
  if (!key) return skip("OpenSSL refused x");
  Jwk out;
  out.kty = "OKP";
  auto pk = std::make_shared<PublicKey>();
  pk->signature_bytes = 64;
  pk->pkey = std::move(key);
  out.key = std::move(pk);
  return out;
}

// One entry of "keys".
KeyRead read_jwk(const Value& jwk) {
  if (!jwk.IsObject()) return skip("not a JSON object");
  if (!detail::distinct_members(jwk)) return skip("a member name twice");
  const Value* kty = member(jwk, "kty");
  if (!kty || !kty->IsString()) return skip("kty is missing or not a string");
  const std::string_view type = text_of(*kty);
  if (type != "RSA" && type != "EC" && type != "OKP") {
    return skip(type == "oct" ? std::string("kty oct: a shared secret, never used here")
                              : std::string("kty not RSA, EC or OKP"));
  }
  // RFC 7518 §6.3.2.1, §6.2.2.1, RFC 8037 §2: "d" is the private part.
  if (member(jwk, "d")) return skip("a private key (it holds d): publish public keys only");
  if (const Value* use = member(jwk, "use"); use && (!use->IsString() || text_of(*use) != "sig"))
    return skip("use is not sig");
  if (const Value* ops = member(jwk, "key_ops")) {
    bool verify = false;
    if (ops->IsArray()) {
      for (const auto& op : ops->GetArray())
        if (op.IsString() && text_of(op) == "verify") verify = true;
    }
    if (!verify) return skip("key_ops without verify");
  }
  std::optional<Alg> alg;
  if (const Value* a = member(jwk, "alg")) {
    if (!a->IsString()) return skip("alg is not a string");
    alg = alg_from_name(text_of(*a));
    if (!alg) return skip("alg not RS256, PS256, ES256 or EdDSA");
    if (detail::kty_for(*alg) != type) return skip("alg does not suit the kty");
  }
  std::string kid;
  if (const Value* k = member(jwk, "kid")) {
    if (!k->IsString()) return skip("kid is not a string");
    kid.assign(text_of(*k));
  }
  KeyRead read = type == "RSA" ? read_rsa(jwk) : type == "EC" ? read_ec(jwk) : read_okp(jwk);
  // A key OpenSSL refused leaves its reasons in the thread's error queue.
  ERR_clear_error();
  if (read) {
    read->kid = std::move(kid);
    read->alg = alg;
  }
  return read;
}

// The kid of an entry as a log may show it: printable ASCII, at most 40 characters, and no ';'
// (which separates the reasons).
std::string kid_for_log(const Value& jwk) {
  const Value* k = jwk.IsObject() ? member(jwk, "kid") : nullptr;
  if (!k || !k->IsString()) return "";
  std::string out;
  for (const char c : text_of(*k)) {
    if (out.size() == 40) {
      out += "...";
      break;
    }
    out += (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != ';') ? c : '?';
  }
  return out;
}

}  // namespace

Expected<KeySet, std::string> KeySet::parse(std::string_view document, Limits limits) {
  if (document.size() > limits.max_document_bytes) {
    return unexpected("a JWK Set of " + std::to_string(document.size()) +
                      " bytes, more than the limit of " +
                      std::to_string(limits.max_document_bytes));
  }
  rapidjson::Document doc;
  if (auto problem = detail::read_object(document, doc))
    return unexpected("the JWK Set is " + *problem);
  const Value* keys = member(doc, "keys");
  if (!keys || !keys->IsArray())
    return unexpected(std::string("the JWK Set has no \"keys\" array"));
  if (keys->Size() > limits.max_keys) {
    return unexpected("the JWK Set has " + std::to_string(keys->Size()) +
                      " keys, more than the limit of " + std::to_string(limits.max_keys));
  }
  KeySet set;
  std::size_t index = 0;
  for (const auto& entry : keys->GetArray()) {
    auto read = read_jwk(entry);
    if (read) {
      set.keys_.push_back(std::move(*read));
    } else {
      ++set.skipped_;
      if (!set.skipped_reasons_.empty()) set.skipped_reasons_ += "; ";
      set.skipped_reasons_ += "key " + std::to_string(index);
      if (auto kid = kid_for_log(entry); !kid.empty())
        set.skipped_reasons_ += " (kid \"" + kid + "\")";
      set.skipped_reasons_ += ": " + read.error();
    }
    ++index;
  }
  return set;
}

std::vector<const Jwk*> KeySet::candidates(std::string_view kid, Alg alg) const {
  std::vector<const Jwk*> out;
  for (const auto& k : keys_) {
    if (!kid.empty() && k.kid != kid) continue;
    if (k.kty != detail::kty_for(alg)) continue;
    if (k.alg && *k.alg != alg) continue;
    out.push_back(&k);
  }
  return out;
}

bool KeySet::has_kid(std::string_view kid) const {
  if (kid.empty()) return false;
  for (const auto& k : keys_)
    if (k.kid == kid) return true;
  return false;
}

}  // namespace mcpmqtt::auth

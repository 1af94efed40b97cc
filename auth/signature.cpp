// JWS signatures checked with OpenSSL's EVP_DigestVerify (RFC 7518 §3.3, §3.4, §3.5; RFC 8037
// §3.1).
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/rsa.h>

#include "auth/internal.hpp"
#include "auth/token.hpp"

namespace mcpmqtt::auth::detail {

namespace {

struct MdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct EcdsaSigFree {
  void operator()(ECDSA_SIG* p) const { ECDSA_SIG_free(p); }
};
struct SignatureBnFree {
  void operator()(BIGNUM* p) const { BN_free(p); }
};

const unsigned char* as_bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// RFC 7518 §3.4: a JWS ECDSA signature is R || S, each 32 bytes for P-256; OpenSSL verifies the
// DER SEQUENCE of two INTEGERs (SEC 1 §C.5). Empty when it cannot be built.
std::string ecdsa_der(std::string_view raw) {
  std::unique_ptr<BIGNUM, SignatureBnFree> r(BN_bin2bn(as_bytes(raw), 32, nullptr));
  std::unique_ptr<BIGNUM, SignatureBnFree> s(BN_bin2bn(as_bytes(raw) + 32, 32, nullptr));
  std::unique_ptr<ECDSA_SIG, EcdsaSigFree> sig(ECDSA_SIG_new());
  if (!r || !s || !sig || ECDSA_SIG_set0(sig.get(), r.get(), s.get()) != 1) return {};
  // The signature owns both numbers now.
  (void)r.release();
  (void)s.release();
  const int len = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (len <= 0) return {};
  std::string der(static_cast<std::size_t>(len), '\0');
  auto* out = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(sig.get(), &out) != len) return {};
  return der;
}

bool check(Alg alg, const PublicKey& key, std::string_view input, std::string_view signature) {
  if (!key.pkey || signature.size() != key.signature_bytes) return false;
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx) return false;
  EVP_PKEY_CTX* pctx = nullptr;  // owned by ctx
  // Ed25519 hashes inside the signature scheme: no digest, one-shot only (RFC 8032 §5.1).
  const EVP_MD* md = alg == Alg::EdDSA ? nullptr : EVP_sha256();
  if (EVP_DigestVerifyInit(ctx.get(), &pctx, md, nullptr, key.pkey.get()) != 1) return false;
  switch (alg) {
    case Alg::RS256:
      if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1) return false;
      break;
    case Alg::PS256:
      // RFC 7518 §3.5: MGF1 with SHA-256, and a salt as long as the hash output.
      if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
          EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, EVP_sha256()) != 1 ||
          EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, 32) != 1) {
        return false;
      }
      break;
    case Alg::ES256: {
      const std::string der = ecdsa_der(signature);
      return !der.empty() && EVP_DigestVerify(ctx.get(), as_bytes(der), der.size(), as_bytes(input),
                                              input.size()) == 1;
    }
    case Alg::EdDSA:
      break;
  }
  return EVP_DigestVerify(ctx.get(), as_bytes(signature), signature.size(), as_bytes(input),
                          input.size()) == 1;
}

}  // namespace

std::string_view kty_for(Alg alg) {
  switch (alg) {
    case Alg::RS256:
    case Alg::PS256:
      return "RSA";
    case Alg::ES256:
      return "EC";
    case Alg::EdDSA:
      return "OKP";
  }
  return "";
}

bool verify_signature(Alg alg, const PublicKey& key, std::string_view input,
                      std::string_view signature) {
  const bool ok = check(alg, key, input, signature);
  // A refusal leaves reasons in the thread's error queue, which would grow with every bad token.
  if (!ok) ERR_clear_error();
  return ok;
}

}  // namespace mcpmqtt::auth::detail

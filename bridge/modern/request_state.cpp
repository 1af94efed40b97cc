#include "bridge/modern/request_state.hpp"

#include <new>
#include <stdexcept>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "common/base64url.hpp"
#include "common/hex.hpp"

namespace mcpmqtt::bridge {

namespace {

constexpr std::string_view kPrefix = "v1.";
}  // namespace

std::optional<std::string> random_bytes(std::size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    return std::nullopt;
  return out;
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return hex_encode(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

struct HmacKey::Prepared {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* keyed = nullptr;  // initialised with the key; duplicated for each signature
  ~Prepared() {
    EVP_MAC_CTX_free(keyed);
    EVP_MAC_free(mac);
  }
};

HmacKey::HmacKey(std::string_view key) : prepared_(std::make_unique<Prepared>()) {
  prepared_->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (prepared_->mac) prepared_->keyed = EVP_MAC_CTX_new(prepared_->mac);
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_END};
  // An empty key is a valid HMAC key; OpenSSL wants a non-null pointer for it.
  static const unsigned char kNoKey = 0;
  const auto* bytes = key.empty() ? &kNoKey : reinterpret_cast<const unsigned char*>(key.data());
  if (!prepared_->keyed || EVP_MAC_init(prepared_->keyed, bytes, key.size(), params) != 1)
    throw std::runtime_error("OpenSSL cannot prepare an HMAC-SHA256 key");
}

HmacKey::~HmacKey() = default;

std::string HmacKey::sign(std::initializer_list<std::string_view> parts) const {
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(EVP_MAC_CTX_dup(prepared_->keyed),
                                                                &EVP_MAC_CTX_free);
  unsigned char out[EVP_MAX_MD_SIZE];
  std::size_t len = 0;
  bool ok = ctx != nullptr;
  for (auto p : parts)
    ok = ok &&
         EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(p.data()), p.size()) == 1;
  ok = ok && EVP_MAC_final(ctx.get(), out, &len, sizeof out) == 1;
  // Fails only when out of memory: the same as any allocation failing.
  if (!ok) throw std::bad_alloc();
  return std::string(reinterpret_cast<const char*>(out), len);
}

RequestStateCodec::RequestStateCodec(std::string secret) : key_(secret) {}

std::string RequestStateCodec::mac(std::string_view signed_part) const {
  return key_.sign(signed_part);
}

std::string RequestStateCodec::mint(std::string_view payload) const {
  std::string token(kPrefix);
  token += base64url_encode(payload);
  const std::string tag = base64url_encode(mac(token));
  token += '.';
  token += tag;
  return token;
}

std::optional<std::string> RequestStateCodec::open(std::string_view token) const {
  if (token.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const auto dot = token.rfind('.');
  if (dot == std::string_view::npos || dot < kPrefix.size()) return std::nullopt;
  const auto signed_part = token.substr(0, dot);
  const auto tag = base64url_decode(token.substr(dot + 1));
  if (!tag) return std::nullopt;
  const std::string expected = mac(signed_part);
  if (tag->size() != expected.size() ||
      CRYPTO_memcmp(tag->data(), expected.data(), expected.size()) != 0)
    return std::nullopt;
  return base64url_decode(signed_part.substr(kPrefix.size()));
}

std::optional<std::string> RequestStateCodec::peek(std::string_view token) {
  if (token.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const auto dot = token.rfind('.');
  if (dot == std::string_view::npos || dot < kPrefix.size()) return std::nullopt;
  return base64url_decode(token.substr(kPrefix.size(), dot - kPrefix.size()));
}

}  // namespace mcpmqtt::bridge

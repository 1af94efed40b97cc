#include "bridge/modern/request_state.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "common/base64url.hpp"

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
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof digest);
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

RequestStateCodec::RequestStateCodec(std::string secret) : secret_(std::move(secret)) {}

std::string RequestStateCodec::mac(std::string_view signed_part) const {
  return hmac_sha256(secret_, signed_part);
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

#include "bridge/modern/request_state.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

namespace mcpmqtt::bridge {

namespace {

constexpr std::string_view kPrefix = "v1.";
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int value_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

}  // namespace

std::string base64url(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    const bool two = i + 1 < in.size();
    if (two) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    if (two) out += kAlphabet[(v >> 6) & 63];
  }
  return out;
}

std::optional<std::string> unbase64url(std::string_view in) {
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() / 4 * 3 + 2);
  unsigned bits = 0;
  int count = 0;
  for (char c : in) {
    const int v = value_of(c);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<unsigned>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>((bits >> count) & 0xff);
    }
  }
  // The bits left over must be zero (the canonical encoding).
  if ((bits & ((1u << count) - 1)) != 0) return std::nullopt;
  return out;
}

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

RequestStateCodec::RequestStateCodec(std::string secret) : secret_(std::move(secret)) {}

std::string RequestStateCodec::mac(std::string_view signed_part) const {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string RequestStateCodec::mint(std::string_view payload) const {
  std::string token(kPrefix);
  token += base64url(payload);
  const std::string tag = base64url(mac(token));
  token += '.';
  token += tag;
  return token;
}

std::optional<std::string> RequestStateCodec::open(std::string_view token) const {
  if (token.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const auto dot = token.rfind('.');
  if (dot == std::string_view::npos || dot < kPrefix.size()) return std::nullopt;
  const auto signed_part = token.substr(0, dot);
  const auto tag = unbase64url(token.substr(dot + 1));
  if (!tag) return std::nullopt;
  const std::string expected = mac(signed_part);
  if (tag->size() != expected.size() ||
      CRYPTO_memcmp(tag->data(), expected.data(), expected.size()) != 0)
    return std::nullopt;
  return unbase64url(signed_part.substr(kPrefix.size()));
}

}  // namespace mcpmqtt::bridge

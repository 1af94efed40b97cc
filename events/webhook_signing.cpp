#include "events/webhook_signing.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace mcpmqtt::bridge {

std::string base64(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::string> unbase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  std::size_t len = static_cast<std::size_t>(n);
  // EVP_DecodeBlock counts the padding as zero bytes.
  if (!text.empty() && text.back() == '=') --len;
  if (text.size() > 1 && text[text.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

std::string sign_webhook(std::string_view key, std::string_view id, std::string_view timestamp,
                         std::string_view body) {
  std::string signed_content;
  signed_content.reserve(id.size() + timestamp.size() + body.size() + 2);
  signed_content.append(id).append(".").append(timestamp).append(".").append(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(signed_content.data()), signed_content.size(), mac,
       &len);
  return "v1," + base64(std::string_view(reinterpret_cast<const char*>(mac), len));
}

std::optional<std::string> webhook_secret_key(std::string_view secret) {
  constexpr std::string_view prefix = "whsec_";
  if (secret.substr(0, prefix.size()) != prefix) return std::nullopt;
  return unbase64(secret.substr(prefix.size()));
}

std::string webhook_signature(std::string_view secret, std::string_view id,
                              std::string_view timestamp, std::string_view body) {
  const auto key = webhook_secret_key(secret);
  return key ? sign_webhook(*key, id, timestamp, body) : std::string();
}

}  // namespace mcpmqtt::bridge

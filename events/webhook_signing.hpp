// Standard Webhooks signing: the `whsec_` secret's key, the `v1,` HMAC-SHA256 signature of a
// message, and the encodings they are written in (base64, hex).
//
// Free functions with no state; safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mcpmqtt::bridge {

// Standard Webhooks signature of one message: `v1,` + base64(HMAC-SHA256(key, id.ts.body)),
// `secret` being the `whsec_…` form. Empty for a malformed secret.
std::string webhook_signature(std::string_view secret, std::string_view id,
                              std::string_view timestamp, std::string_view body);
// The same with the secret's key already decoded (once per registration, not per POST).
std::string sign_webhook(std::string_view key, std::string_view id, std::string_view timestamp,
                         std::string_view body);
// The key of a `whsec_…` secret, or nullopt when it is not one.
std::optional<std::string> webhook_secret_key(std::string_view secret);

// Standard base64 with padding (RFC 4648 §4), and its inverse.
std::string base64(std::string_view data);
std::optional<std::string> unbase64(std::string_view text);

}  // namespace mcpmqtt::bridge

// An access token for the HTTP egress to a protected upstream, by the OAuth 2.1 client
// credentials grant (RFC 6749 §4.4): the token endpoint from the issuer's metadata
// (MetadataDiscovery), the client authenticated with client_secret_basic (RFC 6749 §2.3.1) or
// client_secret_post, `resource` naming the upstream (RFC 8707 §2). The token is cached until
// refresh_margin (or a tenth of its life, whichever is less) before it expires; callers while a
// request is under way share it. After a failure, token() answers that failure without asking
// again for retry_min, doubling up to retry_max, unless a token still valid is cached. Neither
// the secret nor a token is ever logged.
//
// One strand of its own. token(), refused() and stop() may be called from any thread; `done`
// runs on this object's strand: post back to your own.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "common/expected.hpp"
#include "http/client_channel.hpp"
#include "http/client_fetch.hpp"
#include "http/oauth_discovery.hpp"
#include "http/oauth_documents.hpp"

namespace mcpmqtt::http {

class ClientCredentials final : public BearerSource,
                                public std::enable_shared_from_this<ClientCredentials> {
 public:
  enum class AuthMethod {
    client_secret_basic,  // Authorization: Basic (RFC 6749 §2.3.1), the default
    client_secret_post,   // client_id and client_secret in the form body
  };
  struct Options {
    AuthServerOptions server;  // the issuer, timeouts, max_document_bytes, TLS
    std::string client_id;
    std::string client_secret;  // read from a file by the caller; never logged
    std::string scope;          // space-separated; empty: none requested
    std::string resource;       // RFC 8707 §2: the upstream's URL, absolute, no fragment
    AuthMethod auth_method = AuthMethod::client_secret_basic;
    std::chrono::seconds refresh_margin{60};
    // A token response without expires_in is used this long.
    std::chrono::seconds default_lifetime{300};
    std::chrono::milliseconds retry_min{std::chrono::seconds(1)};
    std::chrono::milliseconds retry_max{std::chrono::seconds(60)};
  };

  struct Error {
    std::string error;        // the AS's `error` (RFC 6749 §5.2), e.g. invalid_client; or ""
    std::string description;  // its `error_description`, cleaned for display; or ""
    std::string reason;       // a sentence for people and logs, naming the token endpoint
  };
  using Done = std::function<void(const Expected<std::string, Error>&)>;

  // Refused, with a sentence naming the option, when the issuer or resource is not a usable
  // URL, client_id or client_secret is empty, a bound is not positive, or the CA file cannot
  // be loaded.
  static Expected<std::shared_ptr<ClientCredentials>, std::string> create(
      boost::asio::any_io_executor executor, Options options);

  // The access token to send as `Authorization: Bearer`.
  void token(Done done);
  // Ends a request under way; every pending token() is answered with an error.
  void stop() override;

  // BearerSource, for the HTTP egress: token() with the error's reason. refused(): the upstream
  // answered 401 to `token`; if it is still the cached one (a 401 to an older token, answered
  // late, keeps a new one), the next token() asks for a new one.
  void bearer(BearerSource::Done done) override;
  void refused(const std::string& token) override;
  std::string describe() const override;

  // The authorization server's metadata, once discovered; null before.
  std::shared_ptr<const oauth::AuthServerMetadata> metadata() const;

 private:
  ClientCredentials(boost::asio::any_io_executor strand, Options options, Fetch::Settings settings);
  void do_request();
  void on_metadata(Expected<oauth::AuthServerMetadata, MetadataDiscovery::Failure> result);
  void request_token();
  void on_token(Fetch::Result result);
  void succeed(oauth::TokenResponse response);
  void fail(Error error);
  void answer(const Expected<std::string, Error>& result);

  boost::asio::any_io_executor strand_;
  const Options options_;
  const Fetch::Settings settings_;

  mutable std::mutex mutex_;  // guards metadata_, read from other threads
  std::shared_ptr<const oauth::AuthServerMetadata> metadata_;

  // On the strand.
  std::shared_ptr<MetadataDiscovery> discovery_;
  std::shared_ptr<Fetch> fetch_;
  std::vector<Done> waiters_;
  std::string token_;  // a secret
  std::chrono::steady_clock::time_point expires_{};
  std::chrono::steady_clock::time_point refresh_at_{};
  std::optional<Error> last_error_;
  std::chrono::steady_clock::time_point hold_until_{};
  std::chrono::milliseconds backoff_{0};
  bool stopped_ = false;
};

}  // namespace mcpmqtt::http

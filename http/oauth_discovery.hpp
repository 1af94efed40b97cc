// Finds an authorization server's metadata from its issuer identifier: RFC 8414 §3 first
// (/.well-known/oauth-authorization-server inserted before the issuer's path), then OpenID
// Connect Discovery 1.0 §4 ({issuer}/.well-known/openid-configuration) when the first answers
// with an HTTP error. A first URL that cannot be reached, times out, or answers 200 with a
// document that is malformed or names another issuer ends the discovery with that reason: the
// second is on the same server, and metadata that fails RFC 8414 §3.3 must not be used.
//
// Shared by IssuerKeys (resource server) and ClientCredentials (client). One strand (the
// executor given to start()); cancel() on that strand; `done` runs there exactly once.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "common/expected.hpp"
#include "http/client_fetch.hpp"
#include "http/oauth_documents.hpp"

namespace mcpmqtt::http {

// How the OAuth pieces reach an authorization server: its issuer identifier, bounds on each
// exchange, and TLS trust as the HTTP egress has it.
struct AuthServerOptions {
  std::string issuer;  // https; http only for a loopback address (oauth::check_issuer)
  std::chrono::milliseconds connect_timeout{5'000};  // resolve, connect, TLS handshake
  std::chrono::milliseconds timeout{15'000};         // one exchange, connect to the body's end
  std::size_t max_document_bytes = 256 * 1024;       // a metadata, JWK Set or token response
  bool tls_verify = true;  // verify the certificate chain and the host name
  std::string ca_file;     // PEM bundle to trust; empty: the system's store
};
// Checks `options` (the issuer, positive bounds, the CA file) and makes the settings of its
// fetches. For an http (loopback) issuer every address a host resolves to must be a loopback
// one. The error is a sentence naming the option, for start-up.
Expected<Fetch::Settings, std::string> make_fetch_settings(const AuthServerOptions& options);

class MetadataDiscovery : public std::enable_shared_from_this<MetadataDiscovery> {
 public:
  // The error is a sentence for /readyz and logs: "cannot fetch https://…: Connection refused".
  struct Failure {
    std::string reason;
    bool cancelled = false;
  };
  using Done = std::function<void(Expected<oauth::AuthServerMetadata, Failure>)>;

  // `issuer` was checked by oauth::check_issuer.
  static std::shared_ptr<MetadataDiscovery> start(boost::asio::any_io_executor strand,
                                                  std::string issuer, Fetch::Settings settings,
                                                  Done done);
  void cancel();

 private:
  MetadataDiscovery(boost::asio::any_io_executor strand, std::string issuer,
                    Fetch::Settings settings, Done done);
  void fetch(std::string url, bool last);
  void on_fetched(const std::string& url, bool last, Fetch::Result result);
  void finish(Expected<oauth::AuthServerMetadata, Failure> result);

  boost::asio::any_io_executor strand_;
  std::string issuer_;
  Fetch::Settings settings_;
  Done done_;
  std::shared_ptr<Fetch> fetch_;
  std::string first_failure_;
};

// "cannot fetch URL: reason" or "URL answered HTTP 404 Not Found": one failed GET of a document,
// as /readyz and logs say it.
std::string describe_fetch_failure(const std::string& url, const Fetch::Result& result);

}  // namespace mcpmqtt::http

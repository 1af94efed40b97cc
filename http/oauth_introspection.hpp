// RFC 7662 token introspection for the HTTP ingress as a resource server
// (http.oauth.introspection): an opaque access token POSTed to the issuer's
// introspection_endpoint (from its metadata, as IssuerKeys discovered it) as
// `token=…&token_type_hint=access_token`, the bridge authenticated as a confidential client with
// client_secret_basic (RFC 7662 §2.1, RFC 6749 §2.3.1). Requests for the same token while one is
// under way share it; at most max_in_flight different tokens are asked about at once (past it,
// a call is answered at once with that reason: a 503). Each exchange is bounded as Fetch bounds
// it (timeout, response size). Neither a token nor the secret is ever logged.
//
// One strand of its own. introspect(), stop() and problem() may be called from any thread;
// `done` runs on this object's strand.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "common/expected.hpp"
#include "http/client_fetch.hpp"
#include "http/oauth_discovery.hpp"
#include "http/oauth_documents.hpp"
#include "http/server_auth.hpp"

namespace mcpmqtt::http {

class TokenIntrospection : public Introspector,
                           public std::enable_shared_from_this<TokenIntrospection> {
 public:
  struct Options {
    AuthServerOptions server;  // the issuer, timeouts, max_document_bytes, TLS
    std::string client_id;
    std::string client_secret;  // read from a file by the caller; never logged
    std::size_t max_in_flight = 64;
  };
  // The issuer's metadata as last discovered (IssuerKeys::metadata), null before.
  using Metadata = std::function<std::shared_ptr<const oauth::AuthServerMetadata>()>;

  // Refused, with a sentence naming the option, when client_id or client_secret is empty,
  // max_in_flight is 0, or the issuer or CA file is unusable.
  static Expected<std::shared_ptr<TokenIntrospection>, std::string> create(
      boost::asio::any_io_executor executor, Options options, Metadata metadata);

  void introspect(std::string token, std::string key, Done done) override;
  // "" until the metadata is in (the key source says why it is not); then why it names no
  // introspection_endpoint, or "".
  std::string problem() const override;
  // Ends every exchange; every pending call is answered with an error.
  void stop();

 private:
  TokenIntrospection(boost::asio::any_io_executor strand, Options options, Fetch::Settings settings,
                     Metadata metadata);
  void on_answer(const std::string& key, const std::string& endpoint, Fetch::Result result);
  void answer(const std::string& key, const Expected<std::string, std::string>& result);

  boost::asio::any_io_executor strand_;
  const Options options_;
  const Fetch::Settings settings_;
  const Metadata metadata_;

  // On the strand: the exchanges under way, by token digest, and who waits for each.
  struct Call {
    std::shared_ptr<Fetch> fetch;
    std::vector<Done> waiters;
  };
  std::unordered_map<std::string, Call> calls_;
  bool stopped_ = false;
};

}  // namespace mcpmqtt::http

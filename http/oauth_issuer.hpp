// The signing keys of one OAuth 2.1 authorization server, for the HTTP ingress as a resource
// server: its metadata found from the issuer identifier (MetadataDiscovery: RFC 8414, then
// OpenID Connect Discovery), its JWK Set fetched from `jwks_uri` and parsed by auth::KeySet, kept
// fresh per the response's caching headers (clamped to [min_refresh, max_refresh]), fetched again
// at once for a token with an unknown `kid` (at most once per unknown_kid_min_interval). While the
// issuer is unreachable or serves a document that is refused, the last good set stays in use for
// at most max_stale past its freshness, and fetches are retried with a backoff.
//
// One strand of its own. start(), stop() and refresh_for_unknown_kid() may be called from any
// thread; keys(), metadata() and problem() are thread-safe snapshots.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "auth/token.hpp"
#include "common/expected.hpp"
#include "http/client_fetch.hpp"
#include "http/oauth_discovery.hpp"
#include "http/oauth_documents.hpp"

namespace mcpmqtt::http {

class IssuerKeys : public std::enable_shared_from_this<IssuerKeys> {
 public:
  struct Options {
    AuthServerOptions server;  // the issuer, timeouts, max_document_bytes, TLS
    // When to fetch the JWK Set again: its Cache-Control max-age or Expires, no-store/no-cache
    // meaning min_refresh, clamped to [min_refresh, max_refresh]; default_refresh without either.
    std::chrono::milliseconds min_refresh{std::chrono::seconds(60)};
    std::chrono::milliseconds max_refresh{std::chrono::hours(24)};
    std::chrono::milliseconds default_refresh{std::chrono::minutes(5)};
    // An unknown kid fetches the set again unless a fetch started less than this long ago.
    std::chrono::milliseconds unknown_kid_min_interval{std::chrono::seconds(30)};
    // How long past its freshness a set stays in use while no new one can be had.
    std::chrono::milliseconds max_stale{std::chrono::hours(24)};
    // Retries after a failed fetch: retry_min, doubling up to retry_max.
    std::chrono::milliseconds retry_min{std::chrono::seconds(1)};
    std::chrono::milliseconds retry_max{std::chrono::seconds(60)};
    auth::KeySet::Limits key_limits;  // max_document_bytes is taken from `server`
  };

  // Refused, with a sentence naming the option, when the issuer is not https (http only for a
  // loopback address), a bound is not positive or min_refresh exceeds max_refresh, or the CA
  // file cannot be loaded.
  static Expected<std::shared_ptr<IssuerKeys>, std::string> create(
      boost::asio::any_io_executor executor, Options options);

  // Fetches the metadata and the keys, then keeps them fresh until stop().
  void start();
  // Ends every fetch and timer; every pending refresh_for_unknown_kid is answered.
  void stop();

  // The keys to verify tokens with; null while none are usable (not fetched yet, or stale past
  // max_stale): the caller then answers 503 with problem().
  std::shared_ptr<const auth::KeySet> keys() const;
  // The authorization server's metadata, once discovered; null before.
  std::shared_ptr<const oauth::AuthServerMetadata> metadata() const;
  // Why the last fetch failed ("cannot fetch https://…/.well-known/oauth-authorization-server:
  // Connection refused"), or why there are no keys yet; "" after a successful fetch. With keys()
  // non-null this is a warning only: tokens are still checked with the set in use.
  std::string problem() const;

  struct Refreshed {
    std::shared_ptr<const auth::KeySet> keys;  // as keys() after the refresh
    bool fetched = false;  // false: rate-limited (unknown_kid_min_interval), failed or stopped
    std::string problem;   // as problem() after the refresh
  };
  // A token names a kid the set does not hold: fetch the set again now, unless a fetch started
  // within unknown_kid_min_interval (then answered at once with the current set). Callers while
  // a fetch is under way share it. `done` runs on this object's strand: post back to your own.
  void refresh_for_unknown_kid(std::function<void(Refreshed)> done);

  const Options& options() const { return options_; }

 private:
  IssuerKeys(boost::asio::any_io_executor strand, Options options, Fetch::Settings settings);
  void do_refresh();
  void on_metadata(Expected<oauth::AuthServerMetadata, MetadataDiscovery::Failure> result);
  void fetch_keys();
  void on_keys(const std::string& url, Fetch::Result result);
  void succeed(std::shared_ptr<const auth::KeySet> keys, std::chrono::milliseconds next);
  void fail(std::string reason);
  void on_stale();
  std::string stale_text() const;
  void answer_waiters(bool fetched);
  void set_problem(std::string problem);
  void arm_refresh(std::chrono::milliseconds after);

  boost::asio::any_io_executor strand_;
  const Options options_;
  const Fetch::Settings settings_;

  // Guards the snapshots read from other threads.
  mutable std::mutex mutex_;
  std::shared_ptr<const auth::KeySet> keys_;
  std::shared_ptr<const oauth::AuthServerMetadata> metadata_;
  std::string problem_;

  // On the strand.
  std::shared_ptr<MetadataDiscovery> discovery_;
  std::shared_ptr<Fetch> fetch_;
  std::vector<std::function<void(Refreshed)>> waiters_;
  boost::asio::steady_timer refresh_timer_;
  boost::asio::steady_timer stale_timer_;
  std::chrono::steady_clock::time_point last_started_{};
  std::chrono::steady_clock::time_point metadata_since_{};
  std::chrono::milliseconds backoff_{0};
  bool started_ = false;
  bool stopped_ = false;
  bool busy_ = false;
  bool rediscover_ = true;  // the metadata is fetched again before the next JWK Set
  bool stale_ = false;      // the set was dropped past max_stale; no fetch succeeded since
};

}  // namespace mcpmqtt::http

#include "http/oauth_issuer.hpp"

#include <algorithm>
#include <ctime>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "common/log.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

Expected<std::shared_ptr<IssuerKeys>, std::string> IssuerKeys::create(net::any_io_executor executor,
                                                                      Options options) {
  auto settings = make_fetch_settings(options.server);
  if (!settings) return unexpected(std::move(settings.error()));
  const auto positive = [](milliseconds d) { return d.count() > 0; };
  if (!positive(options.min_refresh) || !positive(options.max_refresh) ||
      !positive(options.default_refresh) || !positive(options.max_stale) ||
      !positive(options.retry_min) || !positive(options.retry_max) ||
      options.unknown_kid_min_interval.count() < 0) {
    return unexpected(std::string(
        "the issuer's refresh bounds (min_refresh, max_refresh, default_refresh, max_stale, "
        "retry_min, retry_max) must be positive"));
  }
  if (options.min_refresh > options.max_refresh || options.retry_min > options.retry_max) {
    return unexpected(
        std::string("min_refresh must not exceed max_refresh, nor retry_min retry_max"));
  }
  if (!options.server.tls_verify) {
    log::http()->warn(
        "[oauth {}] TLS verification is off (tls_verify: false): anyone on the path can "
        "replace the keys tokens are checked with",
        options.server.issuer);
  }
  options.key_limits.max_document_bytes = settings->max_body_bytes;
  auto strand = net::make_strand(executor);
  return std::shared_ptr<IssuerKeys>(
      new IssuerKeys(std::move(strand), std::move(options), std::move(settings).value()));
}

IssuerKeys::IssuerKeys(net::any_io_executor strand, Options options, Fetch::Settings settings)
    : strand_(std::move(strand)),
      options_(std::move(options)),
      settings_(std::move(settings)),
      problem_("the signing keys of " + options_.server.issuer + " are not fetched yet"),
      refresh_timer_(strand_),
      stale_timer_(strand_) {}

std::shared_ptr<const auth::KeySet> IssuerKeys::keys() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return keys_;
}

std::shared_ptr<const oauth::AuthServerMetadata> IssuerKeys::metadata() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return metadata_;
}

std::string IssuerKeys::problem() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return problem_;
}

void IssuerKeys::set_problem(std::string problem) {
  std::lock_guard<std::mutex> lock(mutex_);
  problem_ = std::move(problem);
}

void IssuerKeys::start() {
  net::post(strand_, [self = shared_from_this()] {
    if (self->started_ || self->stopped_) return;
    self->started_ = true;
    self->do_refresh();
  });
}

void IssuerKeys::stop() {
  net::post(strand_, [self = shared_from_this()] {
    if (self->stopped_) return;
    self->stopped_ = true;
    self->busy_ = false;
    if (self->discovery_) self->discovery_->cancel();
    if (self->fetch_) self->fetch_->cancel();
    self->refresh_timer_.cancel();
    self->stale_timer_.cancel();
    self->answer_waiters(false);
  });
}

void IssuerKeys::refresh_for_unknown_kid(std::function<void(Refreshed)> done) {
  net::post(strand_, [self = shared_from_this(), done = std::move(done)]() mutable {
    if (self->stopped_ || !self->started_) {
      return done(Refreshed{self->keys(), false,
                            "the signing keys of " + self->options_.server.issuer +
                                " are not being fetched (stopped, or not started)"});
    }
    if (self->busy_) {
      self->waiters_.push_back(std::move(done));
      return;
    }
    // An unknown kid is cheap to send: without this bound, every such request would reach the
    // issuer.
    if (Clock::now() - self->last_started_ < self->options_.unknown_kid_min_interval) {
      log::http()->debug("[oauth {}] unknown kid: the JWK Set was fetched less than {} ago",
                         self->options_.server.issuer,
                         log::duration_text(self->options_.unknown_kid_min_interval));
      return done(Refreshed{self->keys(), false, self->problem()});
    }
    self->waiters_.push_back(std::move(done));
    self->do_refresh();
  });
}

void IssuerKeys::arm_refresh(milliseconds after) {
  refresh_timer_.expires_after(after);
  // A weak reference: dropping the last owner ends the refreshing.
  refresh_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->stopped_) return;
    self->do_refresh();
  });
}

void IssuerKeys::do_refresh() {
  if (stopped_ || busy_) return;
  busy_ = true;
  last_started_ = Clock::now();
  refresh_timer_.cancel();
  const bool metadata_old = Clock::now() - metadata_since_ >= options_.max_refresh;
  if (!rediscover_ && !metadata_old && metadata()) return fetch_keys();
  discovery_ = MetadataDiscovery::start(
      strand_, options_.server.issuer, settings_,
      [self = shared_from_this()](auto result) { self->on_metadata(std::move(result)); });
}

void IssuerKeys::on_metadata(Expected<oauth::AuthServerMetadata, MetadataDiscovery::Failure> r) {
  discovery_.reset();
  if (stopped_) return;
  if (!r) return fail(r.error().reason);
  if (r->jwks_uri.empty()) {
    return fail("the authorization server metadata at " + r->source +
                " has no jwks_uri: the bridge cannot check JWT access tokens without the "
                "issuer's keys");
  }
  const auto previous = metadata();
  if (!previous || previous->jwks_uri != r->jwks_uri || previous->source != r->source) {
    log::http()->info("[oauth {}] authorization server metadata from {}: jwks_uri {}",
                      options_.server.issuer, r->source, r->jwks_uri);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    metadata_ = std::make_shared<const oauth::AuthServerMetadata>(std::move(r).value());
  }
  metadata_since_ = Clock::now();
  rediscover_ = false;
  fetch_keys();
}

void IssuerKeys::fetch_keys() {
  const std::string url = metadata()->jwks_uri;
  auto parsed = parse_url(url);
  if (!parsed) return fail("cannot fetch " + url + ": " + parsed.error());
  Fetch::Request request;
  request.url = std::move(parsed).value();
  request.headers.emplace_back("Accept", "application/jwk-set+json, application/json");
  fetch_ = Fetch::start(strand_, std::move(request), settings_,
                        [self = shared_from_this(), url](Fetch::Result result) {
                          self->on_keys(url, std::move(result));
                        });
}

void IssuerKeys::on_keys(const std::string& url, Fetch::Result result) {
  fetch_.reset();
  if (stopped_) return;
  if (!result || result->status != 200) {
    // The jwks_uri may have moved: the next attempt reads the metadata again.
    rediscover_ = true;
    return fail(describe_fetch_failure(url, result));
  }
  auto set = auth::KeySet::parse(result->body, options_.key_limits);
  if (!set) return fail("the JWK Set at " + url + " is refused: " + set.error());
  if (set->empty()) {
    std::string why = "the JWK Set at " + url + " has no key the bridge can use";
    if (set->skipped() > 0) why += " (" + set->skipped_reasons() + ")";
    return fail(why);
  }
  const auto lifetime = oauth::freshness_lifetime(
      result->field("Cache-Control"), result->field("Expires"), result->field("Date"),
      result->field("Age"), static_cast<std::int64_t>(std::time(nullptr)));
  const auto next = oauth::refresh_interval(lifetime, options_.default_refresh,
                                            options_.min_refresh, options_.max_refresh);
  auto keys = std::make_shared<const auth::KeySet>(std::move(set).value());
  // The keys in place first, then the log line: whoever reads it and sends a token is served.
  succeed(keys, next);
  if (log::http()->should_log(spdlog::level::info)) {
    std::string skipped;
    if (keys->skipped() > 0) {
      skipped = ", " + std::to_string(keys->skipped()) + " skipped: " + keys->skipped_reasons();
    }
    log::http()->info("[oauth {}] JWK Set {}: {} key{}{}; next refresh in {}",
                      options_.server.issuer, url, keys->size(), keys->size() == 1 ? "" : "s",
                      skipped, log::duration_text(next));
  }
}

void IssuerKeys::succeed(std::shared_ptr<const auth::KeySet> keys, milliseconds next) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    keys_ = std::move(keys);
    problem_.clear();
  }
  stale_ = false;
  busy_ = false;
  backoff_ = milliseconds(0);
  arm_refresh(next);
  // The set outlives its freshness by max_stale at most, should no fetch succeed meanwhile.
  stale_timer_.expires_after(next + options_.max_stale);
  stale_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->stopped_) return;
    self->on_stale();
  });
  answer_waiters(true);
}

void IssuerKeys::fail(std::string reason) {
  busy_ = false;
  backoff_ =
      backoff_.count() == 0 ? options_.retry_min : std::min(backoff_ * 2, options_.retry_max);
  // The state first, then the log line: whoever reads the line (an operator, a test) and asks
  // /readyz then gets this reason, not the one before it.
  // Once the set is gone for staleness, /readyz and 503s keep saying so, with the latest cause.
  set_problem(stale_ ? stale_text() + ": " + reason : reason);
  const auto current = keys();
  if (current) {
    log::http()->warn("[oauth {}] {}; the {} key{} fetched before stay in use; retry in {}",
                      options_.server.issuer, reason, current->size(),
                      current->size() == 1 ? "" : "s", log::duration_text(backoff_));
  } else {
    log::http()->warn("[oauth {}] {}; no token can be checked until it succeeds; retry in {}",
                      options_.server.issuer, reason, log::duration_text(backoff_));
  }
  arm_refresh(backoff_);
  answer_waiters(false);
}

std::string IssuerKeys::stale_text() const {
  return "the signing keys of " + options_.server.issuer + " could not be refreshed for " +
         log::duration_text(options_.max_stale) + " past their freshness and are no longer used";
}

void IssuerKeys::on_stale() {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!keys_) return;
    keys_.reset();
    why = stale_text();
    if (!problem_.empty()) why += ": " + problem_;
    problem_ = why;
  }
  stale_ = true;
  log::http()->warn("[oauth {}] {}", options_.server.issuer, why);
}

void IssuerKeys::answer_waiters(bool fetched) {
  auto waiters = std::move(waiters_);
  waiters_.clear();
  if (waiters.empty()) return;
  Refreshed r{keys(), fetched, problem()};
  if (stopped_)
    r.problem =
        "the signing keys of " + options_.server.issuer + " are no longer fetched: stopping";
  for (auto& done : waiters)
    done(r);
}

}  // namespace mcpmqtt::http

#include "http/oauth_client_credentials.hpp"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/http/verb.hpp>

#include "common/log.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

Expected<std::shared_ptr<ClientCredentials>, std::string> ClientCredentials::create(
    net::any_io_executor executor, Options options) {
  auto settings = make_fetch_settings(options.server);
  if (!settings) return unexpected(std::move(settings.error()));
  if (options.client_id.empty() || options.client_secret.empty()) {
    return unexpected(
        std::string("the client credentials grant needs a client_id and a client_secret"));
  }
  auto resource = parse_url(options.resource);
  if (!resource)
    return unexpected("the resource \"" + options.resource + "\": " + resource.error());
  if (options.resource.find('#') != std::string::npos) {
    return unexpected("the resource \"" + options.resource +
                      "\" has a fragment, which RFC 8707 §2 forbids");
  }
  if (options.refresh_margin.count() < 0 || options.default_lifetime.count() <= 0 ||
      options.retry_min.count() <= 0 || options.retry_max < options.retry_min) {
    return unexpected(std::string(
        "refresh_margin must not be negative, default_lifetime and retry_min must be positive, "
        "and retry_max at least retry_min"));
  }
  auto strand = net::make_strand(executor);
  return std::shared_ptr<ClientCredentials>(
      new ClientCredentials(std::move(strand), std::move(options), std::move(settings).value()));
}

ClientCredentials::ClientCredentials(net::any_io_executor strand, Options options,
                                     Fetch::Settings settings)
    : strand_(std::move(strand)), options_(std::move(options)), settings_(std::move(settings)) {}

std::shared_ptr<const oauth::AuthServerMetadata> ClientCredentials::metadata() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return metadata_;
}

void ClientCredentials::token(Done done) {
  net::post(strand_, [self = shared_from_this(), done = std::move(done)]() mutable {
    if (self->stopped_) {
      return done(unexpected(Error{"", "", "no access token: the client is stopping"}));
    }
    const auto now = Clock::now();
    if (!self->token_.empty() && now < self->refresh_at_) return done(self->token_);
    if (!self->fetch_ && !self->discovery_ && now < self->hold_until_) {
      // Failed a moment ago: a token still valid serves; else the same answer, without asking.
      if (!self->token_.empty() && now < self->expires_) return done(self->token_);
      if (self->last_error_) return done(unexpected(*self->last_error_));
    }
    self->waiters_.push_back(std::move(done));
    self->do_request();
  });
}

void ClientCredentials::bearer(BearerSource::Done done) {
  token([done = std::move(done)](const Expected<std::string, Error>& r) {
    if (r) return done(*r);
    done(unexpected(r.error().reason));
  });
}

void ClientCredentials::refused(const std::string& token) {
  net::post(strand_, [self = shared_from_this(), token] {
    if (token != self->token_) return;
    log::http()->info("[oauth {}] the access token for {} was refused; requesting another",
                      self->options_.server.issuer, self->options_.resource);
    self->token_.clear();
    self->refresh_at_ = {};
    self->expires_ = {};
  });
}

std::string ClientCredentials::describe() const {
  return "OAuth client \"" + sanitize_excerpt(options_.client_id, 80) + "\" of " +
         options_.server.issuer;
}

void ClientCredentials::stop() {
  net::post(strand_, [self = shared_from_this()] {
    if (self->stopped_) return;
    self->stopped_ = true;
    if (self->discovery_) self->discovery_->cancel();
    if (self->fetch_) self->fetch_->cancel();
    self->token_.clear();
    self->answer(unexpected(Error{"", "", "no access token: the client is stopping"}));
  });
}

void ClientCredentials::do_request() {
  if (fetch_ || discovery_) return;  // the callers share the request under way
  if (metadata()) return request_token();
  discovery_ = MetadataDiscovery::start(
      strand_, options_.server.issuer, settings_,
      [self = shared_from_this()](auto result) { self->on_metadata(std::move(result)); });
}

void ClientCredentials::on_metadata(
    Expected<oauth::AuthServerMetadata, MetadataDiscovery::Failure> r) {
  discovery_.reset();
  if (stopped_) return;
  if (!r) return fail(Error{"", "", r.error().reason});
  if (r->token_endpoint.empty()) {
    return fail(Error{
        "", "", "the authorization server metadata at " + r->source + " has no token_endpoint"});
  }
  log::http()->info("[oauth {}] token endpoint {} (from {})", options_.server.issuer,
                    r->token_endpoint, r->source);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    metadata_ = std::make_shared<const oauth::AuthServerMetadata>(std::move(r).value());
  }
  request_token();
}

void ClientCredentials::request_token() {
  const std::string endpoint = metadata()->token_endpoint;
  auto url = parse_url(endpoint);
  if (!url)
    return fail(Error{"", "", "cannot request a token from " + endpoint + ": " + url.error()});
  Fetch::Request request;
  request.method = boost::beast::http::verb::post;
  request.url = std::move(url).value();
  request.content_type = "application/x-www-form-urlencoded";
  // RFC 6749 §4.4.2; RFC 8707 §2.
  std::string body = "grant_type=client_credentials";
  if (!options_.scope.empty()) body += "&scope=" + oauth::form_urlencode(options_.scope);
  body += "&resource=" + oauth::form_urlencode(options_.resource);
  if (options_.auth_method == AuthMethod::client_secret_basic) {
    request.headers.emplace_back(
        "Authorization", oauth::basic_authorization(options_.client_id, options_.client_secret));
  } else {
    body += "&client_id=" + oauth::form_urlencode(options_.client_id) +
            "&client_secret=" + oauth::form_urlencode(options_.client_secret);
  }
  request.body = std::move(body);
  // RFC 6749 §5.1: token responses are not to be cached by intermediaries either.
  request.headers.emplace_back("Cache-Control", "no-store");
  fetch_ = Fetch::start(
      strand_, std::move(request), settings_,
      [self = shared_from_this()](Fetch::Result result) { self->on_token(std::move(result)); });
}

void ClientCredentials::on_token(Fetch::Result result) {
  fetch_.reset();
  if (stopped_) return;
  const std::string endpoint = metadata()->token_endpoint;
  if (!result) {
    // The endpoint may have moved or the server may be another now: read the metadata again.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      metadata_.reset();
    }
    return fail(Error{"", "", describe_fetch_failure(endpoint, result)});
  }
  if (result->status == 200) {
    auto parsed = oauth::parse_token_response(result->body);
    if (!parsed) {
      return fail(
          Error{"", "", "the token response of " + endpoint + " is refused: " + parsed.error()});
    }
    return succeed(std::move(parsed).value());
  }
  // RFC 6749 §5.2: 400 (or 401 for client authentication) with error and error_description.
  if (auto e = oauth::parse_token_error(result->body)) {
    std::string reason = endpoint + " refused the client credentials grant of client \"" +
                         sanitize_excerpt(options_.client_id, 80) + "\" (HTTP " +
                         std::to_string(result->status) + "): " + e->error;
    if (!e->description.empty()) reason += " (" + e->description + ")";
    return fail(Error{e->error, e->description, std::move(reason)});
  }
  fail(Error{"", "", describe_fetch_failure(endpoint, result)});
}

void ClientCredentials::succeed(oauth::TokenResponse response) {
  const auto now = Clock::now();
  const std::chrono::seconds life =
      response.expires_in ? std::chrono::seconds(*response.expires_in) : options_.default_lifetime;
  // Fetched again a margin before it expires: refresh_margin, or a tenth of a short life.
  const auto margin = std::min<Clock::duration>(
      options_.refresh_margin, std::chrono::duration_cast<Clock::duration>(life) / 10);
  token_ = std::move(response.access_token);
  expires_ = now + life;
  refresh_at_ = expires_ - margin;
  last_error_.reset();
  backoff_ = milliseconds(0);
  hold_until_ = {};
  log::http()->info(
      "[oauth {}] access token for {} by client \"{}\"{}: valid for {}, renewed in {}",
      options_.server.issuer, options_.resource, options_.client_id,
      response.scope.empty() ? "" : " with scope \"" + response.scope + "\"",
      log::duration_text(std::chrono::duration_cast<milliseconds>(life)),
      log::duration_text(std::chrono::duration_cast<milliseconds>(refresh_at_ - now)));
  answer(token_);
}

void ClientCredentials::fail(Error error) {
  backoff_ =
      backoff_.count() == 0 ? options_.retry_min : std::min(backoff_ * 2, options_.retry_max);
  hold_until_ = Clock::now() + backoff_;
  const bool still_valid = !token_.empty() && Clock::now() < expires_;
  log::http()->warn("[oauth {}] no access token for {}: {}{}", options_.server.issuer,
                    options_.resource, error.reason,
                    still_valid ? "; the current one stays in use until it expires" : "");
  last_error_ = error;
  if (still_valid) return answer(token_);
  answer(unexpected(std::move(error)));
}

void ClientCredentials::answer(const Expected<std::string, Error>& result) {
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& done : waiters)
    done(result);
}

}  // namespace mcpmqtt::http

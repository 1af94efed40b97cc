#include "http/oauth_introspection.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/http/verb.hpp>

#include "common/log.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;

Expected<std::shared_ptr<TokenIntrospection>, std::string> TokenIntrospection::create(
    net::any_io_executor executor, Options options, Metadata metadata) {
  auto settings = make_fetch_settings(options.server);
  if (!settings) return unexpected(std::move(settings.error()));
  if (options.client_id.empty() || options.client_secret.empty()) {
    return unexpected(std::string(
        "introspection needs a client_id and a client_secret: the endpoint authenticates its "
        "callers (RFC 7662 §2.1)"));
  }
  if (options.max_in_flight == 0)
    return unexpected(std::string("introspection needs max_in_flight of at least 1"));
  auto strand = net::make_strand(executor);
  return std::shared_ptr<TokenIntrospection>(new TokenIntrospection(
      std::move(strand), std::move(options), std::move(settings).value(), std::move(metadata)));
}

TokenIntrospection::TokenIntrospection(net::any_io_executor strand, Options options,
                                       Fetch::Settings settings, Metadata metadata)
    : strand_(std::move(strand)),
      options_(std::move(options)),
      settings_(std::move(settings)),
      metadata_(std::move(metadata)) {}

std::string TokenIntrospection::problem() const {
  const auto m = metadata_();
  if (!m || !m->introspection_endpoint.empty()) return {};
  return "the authorization server metadata at " + m->source +
         " has no introspection_endpoint: opaque access tokens cannot be checked "
         "(http.oauth.introspection)";
}

void TokenIntrospection::introspect(std::string token, std::string key, Done done) {
  net::post(strand_, [self = shared_from_this(), token = std::move(token), key = std::move(key),
                      done = std::move(done)]() mutable {
    if (self->stopped_) return done(unexpected(std::string("the bridge is stopping")));
    if (auto it = self->calls_.find(key); it != self->calls_.end()) {
      it->second.waiters.push_back(std::move(done));
      return;
    }
    const auto m = self->metadata_();
    if (!m) {
      return done(unexpected("the metadata of " + self->options_.server.issuer +
                             " has not been fetched yet"));
    }
    if (m->introspection_endpoint.empty()) return done(unexpected(self->problem()));
    // Each token asked about holds a connection to the issuer: a flood of new tokens must not
    // open one each.
    if (self->calls_.size() >= self->options_.max_in_flight) {
      return done(unexpected("too many tokens (" + std::to_string(self->options_.max_in_flight) +
                             ") are being introspected at once"));
    }
    const std::string endpoint = m->introspection_endpoint;
    auto url = parse_url(endpoint);
    if (!url) return done(unexpected("cannot introspect at " + endpoint + ": " + url.error()));
    Fetch::Request request;
    request.method = boost::beast::http::verb::post;
    request.url = std::move(url).value();
    request.content_type = "application/x-www-form-urlencoded";
    // RFC 7662 §2.1.
    request.body = "token=" + oauth::form_urlencode(token) + "&token_type_hint=access_token";
    request.headers.emplace_back(
        "Authorization",
        oauth::basic_authorization(self->options_.client_id, self->options_.client_secret));
    auto& call = self->calls_[key];
    call.waiters.push_back(std::move(done));
    call.fetch = Fetch::start(self->strand_, std::move(request), self->settings_,
                              [self, key, endpoint](Fetch::Result result) {
                                self->on_answer(key, endpoint, std::move(result));
                              });
  });
}

void TokenIntrospection::on_answer(const std::string& key, const std::string& endpoint,
                                   Fetch::Result result) {
  if (stopped_) return;
  if (result && result->status == 200) return answer(key, std::move(result->body));
  // Not the token's fault: the issuer is unreachable, failing, or refuses the bridge's own
  // client (401 invalid_client), which is a setup mistake worth a warning.
  std::string why = describe_fetch_failure(endpoint, result);
  if (result) {
    if (auto e = oauth::parse_token_error(result->body)) {
      why += ": " + e->error;
      if (!e->description.empty()) why += " (" + e->description + ")";
    }
    if (result->status == 400 || result->status == 401) {
      why += "; check http.oauth.introspection.client_id and its secret (client \"" +
             sanitize_excerpt(options_.client_id, 80) + "\")";
    }
  }
  log::http()->warn("[oauth {}] introspection failed: {}", options_.server.issuer, why);
  answer(key, unexpected(std::move(why)));
}

void TokenIntrospection::answer(const std::string& key,
                                const Expected<std::string, std::string>& result) {
  auto it = calls_.find(key);
  if (it == calls_.end()) return;
  auto waiters = std::move(it->second.waiters);
  calls_.erase(it);
  for (auto& done : waiters)
    done(result);
}

void TokenIntrospection::stop() {
  net::post(strand_, [self = shared_from_this()] {
    if (self->stopped_) return;
    self->stopped_ = true;
    auto calls = std::move(self->calls_);
    self->calls_.clear();
    for (auto& [key, call] : calls) {
      if (call.fetch) call.fetch->cancel();
      for (auto& done : call.waiters)
        done(unexpected(std::string("the bridge is stopping")));
    }
  });
}

}  // namespace mcpmqtt::http

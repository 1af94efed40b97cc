#include "http/oauth_discovery.hpp"

#include <boost/asio/post.hpp>

#include "http/client_request.hpp"
#include "http/client_upstream.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;

Expected<Fetch::Settings, std::string> make_fetch_settings(const AuthServerOptions& options) {
  auto issuer = oauth::check_issuer(options.issuer);
  if (!issuer) return unexpected(issuer.error());
  if (options.connect_timeout.count() <= 0 || options.timeout.count() <= 0) {
    return unexpected(std::string("the authorization server's timeouts must be positive"));
  }
  if (options.max_document_bytes < 1024) {
    return unexpected(std::string("max_document_bytes must be at least 1 KiB"));
  }
  Fetch::Settings s;
  std::string error;
  s.tls = tls_context(options.tls_verify, options.ca_file, error);
  if (!s.tls) return unexpected("the authorization server's TLS settings: " + error);
  s.tls_verify = options.tls_verify;
  s.connect_timeout = options.connect_timeout;
  s.timeout = options.timeout;
  s.max_body_bytes = options.max_document_bytes;
  if (!issuer->tls) {
    // An http issuer is for loopback only: a name such as localhost must not lead elsewhere.
    s.address_check = [](const net::ip::address& a) -> std::string {
      if (a.is_loopback() ||
          (a.is_v6() && a.to_v6().is_v4_mapped() &&
           net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6()).is_loopback()))
        return {};
      return "an http issuer may only be reached on a loopback address, and the name resolves "
             "to " +
             a.to_string();
    };
  }
  return s;
}

std::string describe_fetch_failure(const std::string& url, const Fetch::Result& result) {
  if (!result) return "cannot fetch " + url + ": " + result.error().reason;
  const auto& r = *result;
  std::string text = url + " answered HTTP " + std::to_string(r.status);
  const auto reason = r.header.reason();
  if (!reason.empty())
    text += " " + sanitize_excerpt(std::string_view(reason.data(), reason.size()), 60);
  if (r.status / 100 == 3) text += " (redirects are not followed)";
  return text;
}

std::shared_ptr<MetadataDiscovery> MetadataDiscovery::start(net::any_io_executor strand,
                                                            std::string issuer,
                                                            Fetch::Settings settings, Done done) {
  std::shared_ptr<MetadataDiscovery> d(new MetadataDiscovery(std::move(strand), std::move(issuer),
                                                             std::move(settings), std::move(done)));
  d->fetch(oauth::authorization_server_metadata_url(d->issuer_), false);
  return d;
}

MetadataDiscovery::MetadataDiscovery(net::any_io_executor strand, std::string issuer,
                                     Fetch::Settings settings, Done done)
    : strand_(std::move(strand)),
      issuer_(std::move(issuer)),
      settings_(std::move(settings)),
      done_(std::move(done)) {}

void MetadataDiscovery::fetch(std::string url, bool last) {
  auto parsed = parse_url(url);
  if (!parsed) {
    // The issuer was checked: only a path the URL parser refuses gets here.
    net::post(strand_, [self = shared_from_this(), url, why = parsed.error()] {
      self->finish(unexpected(Failure{"cannot fetch " + url + ": " + why}));
    });
    return;
  }
  Fetch::Request request;
  request.url = std::move(parsed).value();
  fetch_ = Fetch::start(strand_, std::move(request), settings_,
                        [self = shared_from_this(), url, last](Fetch::Result r) {
                          self->on_fetched(url, last, std::move(r));
                        });
}

void MetadataDiscovery::on_fetched(const std::string& url, bool last, Fetch::Result result) {
  fetch_.reset();
  if (!done_) return;
  if (!result) {
    if (result.error().kind == Fetch::Error::Kind::cancelled) {
      return finish(unexpected(Failure{"cancelled", true}));
    }
    return finish(unexpected(Failure{describe_fetch_failure(url, result)}));
  }
  if (result->status != 200) {
    const auto why = describe_fetch_failure(url, result);
    if (!last) {
      first_failure_ = why;
      return fetch(oauth::openid_configuration_url(issuer_), true);
    }
    return finish(unexpected(Failure{"no authorization server metadata for " + issuer_ + ": " +
                                     first_failure_ + "; " + why}));
  }
  auto metadata = oauth::parse_metadata(result->body, issuer_);
  if (!metadata) {
    return finish(unexpected(Failure{"the authorization server metadata at " + url +
                                     " is refused: " + metadata.error()}));
  }
  metadata->source = url;
  finish(std::move(metadata).value());
}

void MetadataDiscovery::finish(Expected<oauth::AuthServerMetadata, Failure> result) {
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) done(std::move(result));
}

void MetadataDiscovery::cancel() {
  if (!done_) return;
  if (fetch_) return fetch_->cancel();
  net::post(strand_, [self = shared_from_this()] {
    self->finish(unexpected(Failure{"cancelled", true}));
  });
}

}  // namespace mcpmqtt::http

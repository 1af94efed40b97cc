#include "http/client_upstream.hpp"

#include <cerrno>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include <openssl/ssl.h>

#include "common/errno_text.hpp"
#include "http/client_request.hpp"

namespace mcpmqtt::http {
namespace net = boost::asio;

Expected<UpstreamSpec, std::string> make_upstream_spec(const std::string& name,
                                                       const std::string& url_text,
                                                       const std::vector<Header>& headers,
                                                       bool tls_verify) {
  auto url = parse_url(url_text);
  if (!url) return unexpected("url: " + url.error());
  auto checked = check_extra_headers(headers);
  if (!checked) return unexpected("headers: " + checked.error());
  UpstreamSpec spec;
  spec.name = name;
  spec.url = std::move(url).value();
  spec.headers = headers;
  spec.tls_verify = tls_verify;
  return spec;
}

void warn_tls_verify_off_once(const std::shared_ptr<spdlog::logger>& log, const UpstreamSpec& s) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.insert(s.url.display()).second) return;
  }
  log->warn(
      "[upstream {}] TLS verification is off for {} (tls_verify: false): its certificate and "
      "host name are not checked; anyone on the path can read and change the traffic",
      s.name, s.url.display());
}

// Contexts are shared between sessions with the same trust settings: loading the system's CA
// store for every session would cost more than the session's handshake.
std::shared_ptr<net::ssl::context> tls_context(const UpstreamSpec& spec, std::string& error) {
  return tls_context(spec.tls_verify, spec.ca_file, error);
}

std::shared_ptr<net::ssl::context> tls_context(bool tls_verify, const std::string& ca_file,
                                               std::string& error) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, bool>, std::weak_ptr<net::ssl::context>> cache;
  const auto key = std::make_pair(tls_verify ? ca_file : std::string(), tls_verify);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto shared = cache[key].lock()) return shared;
  auto ctx = std::make_shared<net::ssl::context>(net::ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  if (tls_verify) {
    if (!ca_file.empty()) {
      std::FILE* f = std::fopen(ca_file.c_str(), "r");
      if (!f) {
        error = "cannot read the CA file \"" + ca_file + "\": " + errno_text(errno);
        return nullptr;
      }
      std::fclose(f);
      ctx->load_verify_file(ca_file, ec);
      if (ec) {
        error = "cannot load the CA file \"" + ca_file +
                "\": it holds no PEM certificate OpenSSL accepts";
        return nullptr;
      }
    } else {
      ctx->set_default_verify_paths(ec);
      if (ec) {
        error = "cannot load the system's CA certificates: " + ec.message();
        return nullptr;
      }
    }
  }
  for (auto it = cache.begin(); it != cache.end();) {
    it = it->second.expired() ? cache.erase(it) : std::next(it);
  }
  cache[key] = ctx;
  return ctx;
}

}  // namespace mcpmqtt::http

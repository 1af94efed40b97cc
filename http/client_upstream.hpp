// What an upstream server needs before any session with it: the TLS client context, shared by
// the sessions with the same trust settings, and the warning that verification is off, once per
// URL. Thread-safe (a mutex guards each cache).
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>
#include <spdlog/logger.h>

#include "http/client_channel.hpp"

namespace mcpmqtt::http {

// The TLS client context for `spec`, or null with the reason in `error`. A context is built once
// and only read afterwards, which OpenSSL allows from any thread.
std::shared_ptr<boost::asio::ssl::context> tls_context(const UpstreamSpec& spec,
                                                       std::string& error);
// The same for other HTTPS clients of the bridge (the OAuth pieces): `ca_file` empty for the
// system's store.
std::shared_ptr<boost::asio::ssl::context> tls_context(bool tls_verify, const std::string& ca_file,
                                                       std::string& error);
// tls_verify: false is worth one warning per upstream URL, not one per session.
void warn_tls_verify_off_once(const std::shared_ptr<spdlog::logger>& log, const UpstreamSpec& s);

}  // namespace mcpmqtt::http

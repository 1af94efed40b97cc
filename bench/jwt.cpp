// What validating an OAuth access token costs the HTTP ingress per request, with the issuer's
// JWK Set already read and cached (auth/token.hpp): parse_token, then verify (signature, typ,
// iss, aud, exp, nbf, sub, scopes), for each algorithm. No I/O. Tokens and keys come from the
// tests' issuer (tests/support/test_issuer.hpp): RSA 2048, P-256, Ed25519; the JWK Set holds
// eight keys as issuers publish them around a rotation, the token names its kid.
//
//   bench_jwt [--tokens N] [--runs R]    N validations per run (default 5000), R runs (default 7)
//
// Prints, per algorithm, the median of the runs in µs of the thread's CPU time per token (and
// the fastest and slowest run), with the signature check alone beside it: what OpenSSL takes of
// the whole. CPU time rather than wall-clock, so that a machine shared with builds gives figures
// that mean something. Fails when a token is refused.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include <time.h>

#include "auth/internal.hpp"
#include "auth/token.hpp"
#include "http/server_auth.hpp"
#include "tests/support/test_issuer.hpp"

namespace {

using namespace mcpmqtt;

// The JWK Set as the HTTP server's Authenticator asks for it.
class FixedKeys : public http::KeySource {
 public:
  explicit FixedKeys(std::shared_ptr<const auth::KeySet> keys) : keys_(std::move(keys)) {}
  std::shared_ptr<const auth::KeySet> keys() const override { return keys_; }
  std::string problem() const override { return {}; }
  void refresh_for_unknown_kid(std::function<void()> done) override { done(); }

 private:
  std::shared_ptr<const auth::KeySet> keys_;
};

// This thread's CPU time in µs.
double cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

constexpr std::int64_t kBenchNow = 1'900'000'000;

struct Series {
  double median = 0, fastest = 0, slowest = 0;
};

Series summary(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us.front(), us.back()};
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t tokens = 5000;
  std::size_t runs = 7;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--tokens") == 0) tokens = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::strtoull(argv[i + 1], nullptr, 10);
  }
  if (tokens == 0 || runs == 0) {
    std::fprintf(stderr, "usage: bench_jwt [--tokens N] [--runs R]\n");
    return 2;
  }

  test::TestIssuer issuer("https://auth.example.com", "https://bridge.example.com/mcp");
  const char* const kids[] = {"rs256", "ps256", "es256", "eddsa"};
  const char* const algs[] = {"RS256", "PS256", "ES256", "EdDSA"};
  for (int i = 0; i < 4; ++i)
    issuer.add_key(kids[i], algs[i]);
  // A second key of each kind, as around a rotation.
  for (int i = 0; i < 4; ++i)
    issuer.add_key(std::string(kids[i]) + "-next", algs[i]);
  auto keys = auth::KeySet::parse(issuer.jwks());
  if (!keys || keys->size() != 8) {
    std::fprintf(stderr, "bench_jwt: the JWK Set was not read\n");
    return 1;
  }
  auth::Rules rules;
  rules.issuer = issuer.issuer();
  rules.audiences = {issuer.audience(), "https://bridge.example.com"};

  std::printf(
      "bench_jwt: %zu validations per run, %zu runs, median (fastest-slowest) in µs of CPU "
      "per token; JWK Set of %zu keys, read once\n\n",
      tokens, runs, keys->size());
  // The ingress's whole check of a request (http::Authenticator): a token seen before is found
  // by its digest and only its audience and dates are checked again.
  http::ServerOptions so;
  so.public_url = "https://bridge.example.com";
  so.oauth.issuer = issuer.issuer();
  http::Authenticator authenticator(so, "demo");
  authenticator.set_key_source(
      std::make_shared<FixedKeys>(std::make_shared<const auth::KeySet>(*keys)));
  const auto route = http::parse_route("/mcp");
  std::printf(
      "| alg | token bytes | parse_token + verify | of it, the signature alone | the ingress's "
      "check, token seen before |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  int status = 0;
  for (int a = 0; a < 4; ++a) {
    auto claims = issuer.claims(kBenchNow);
    claims.str("client_id", "desktop-app").str("scope", "mcp:weather mcp:tools/read");
    const std::string token = issuer.mint(kids[a], claims);
    std::vector<double> whole, signature;
    std::size_t refused = 0;
    for (std::size_t r = 0; r < runs + 1; ++r) {  // the first run warms up
      const double t0 = cpu_us();
      for (std::size_t i = 0; i < tokens; ++i) {
        auto parsed = auth::parse_token(token, rules.algorithms);
        if (!parsed || !auth::verify(*parsed, *keys, rules, kBenchNow)) ++refused;
      }
      const double t1 = cpu_us();
      const auto parsed = auth::parse_token(token, rules.algorithms);
      const auto* key = keys->candidates(parsed->kid, parsed->alg).front();
      for (std::size_t i = 0; i < tokens; ++i) {
        if (!auth::detail::verify_signature(parsed->alg, *key->key, parsed->signing_input,
                                            parsed->signature)) {
          ++refused;
        }
      }
      const double t2 = cpu_us();
      if (r == 0) continue;
      whole.push_back((t1 - t0) / static_cast<double>(tokens));
      signature.push_back((t2 - t1) / static_cast<double>(tokens));
    }
    // The same through the ingress, with a token valid now (its cache checks the real time).
    auto live = issuer.claims(static_cast<std::int64_t>(std::time(nullptr)));
    live.str("scope", "mcp:weather");
    http::Authenticator::Request req{boost::beast::http::verb::post, "/mcp", 11};
    req.set(boost::beast::http::field::host, "bridge.example.com");
    req.set(boost::beast::http::field::authorization, "Bearer " + issuer.mint(kids[a], live));
    std::vector<double> ingress;
    for (std::size_t r = 0; r < runs + 1; ++r) {
      const double t0 = cpu_us();
      for (std::size_t i = 0; i < tokens; ++i) {
        if (authenticator.check(req, route, "demo", false).kind !=
            http::Authenticator::Outcome::Kind::allowed)
          ++refused;
      }
      if (r) ingress.push_back((cpu_us() - t0) / static_cast<double>(tokens));
    }
    if (refused) {
      std::fprintf(stderr, "bench_jwt: %s: %zu validations refused\n", algs[a], refused);
      status = 1;
    }
    const auto w = summary(whole);
    const auto s = summary(signature);
    const auto c = summary(ingress);
    std::printf("| %s | %zu | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) |\n", algs[a],
                token.size(), w.median, w.fastest, w.slowest, s.median, s.fastest, s.slowest,
                c.median, c.fastest, c.slowest);
  }
  return status;
}

#include "http/server_relay.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <openssl/crypto.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "bridge/modern/request_state.hpp"
#include "common/base64url.hpp"

namespace mcpmqtt::http {

namespace bhttp = boost::beast::http;

// ---- session ids -------------------------------------------------------------------------------

namespace {
constexpr std::size_t kSessionIdRandom = 16;
constexpr std::size_t kSessionIdMac = 16;  // 128 bits of HMAC-SHA256: enough against forgery
}  // namespace

SessionIds::SessionIds(std::string replica, std::string_view secret)
    : replica_(std::move(replica)),
      // A key of its own, so that no other use of the secret yields a valid id.
      key_(bridge::hmac_sha256(secret, "mcp-mqtt-bridge session id")) {}

std::string SessionIds::mac(std::string_view signed_part) const {
  return key_.sign(signed_part).substr(0, kSessionIdMac);
}

std::string SessionIds::mint() const {
  const auto random = bridge::random_bytes(kSessionIdRandom);
  if (!random) return {};
  std::string id = replica_ + "." + base64url_encode(*random);
  const auto tag = base64url_encode(mac(id));
  id += '.';
  id += tag;
  return id;
}

std::optional<std::string> SessionIds::owner(std::string_view id) const {
  const auto last = id.rfind('.');
  if (last == std::string_view::npos) return std::nullopt;
  const auto first = id.find('.');
  if (first == last || first == 0) return std::nullopt;
  const auto tag = base64url_decode(id.substr(last + 1));
  if (!tag || tag->size() != kSessionIdMac) return std::nullopt;
  const auto expected = mac(id.substr(0, last));
  if (CRYPTO_memcmp(tag->data(), expected.data(), kSessionIdMac) != 0) return std::nullopt;
  return std::string(id.substr(0, first));
}

// ---- wire form ---------------------------------------------------------------------------------

namespace relay_wire {

namespace {

void put32(std::string& out, std::size_t n) {
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
}

std::optional<std::size_t> get32(std::string_view& in) {
  if (in.size() < 4) return std::nullopt;
  const auto b = [&](std::size_t i) {
    return static_cast<std::size_t>(static_cast<unsigned char>(in[i]));
  };
  const std::size_t n = (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
  in.remove_prefix(4);
  return n;
}

// Fields that belong to one connection (RFC 9110 §7.6.1) or that the connection writing the
// answer sets itself.
bool hop_by_hop(std::string_view name) {
  static constexpr std::string_view kSkip[] = {"connection",     "keep-alive", "transfer-encoding",
                                               "content-length", "te",         "trailer",
                                               "upgrade",        "date",       "server"};
  return std::any_of(std::begin(kSkip), std::end(kSkip), [&](std::string_view s) {
    return s.size() == name.size() &&
           std::equal(s.begin(), s.end(), name.begin(), [](char a, char b) {
             return a == std::tolower(static_cast<unsigned char>(b));
           });
  });
}

void add_fields(std::vector<std::string_view>& parts, const Response& r) {
  for (const auto& f : r) {
    const auto name = f.name_string();
    if (hop_by_hop(std::string_view(name.data(), name.size()))) continue;
    parts.emplace_back(name.data(), name.size());
    parts.emplace_back(f.value().data(), f.value().size());
  }
}

std::optional<unsigned> status_of(std::string_view s) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 100 || v > 599) return std::nullopt;
  return v;
}

// A response from "reply"/"open" parts: status, [body,] then name/value pairs from `from`.
std::optional<Response> response_of(const std::vector<std::string_view>& parts, std::size_t from,
                                    std::string_view body) {
  const auto status = status_of(parts[1]);
  if (!status || (parts.size() - from) % 2 != 0) return std::nullopt;
  Response r{static_cast<bhttp::status>(*status), 11};
  for (std::size_t i = from; i + 1 < parts.size(); i += 2)
    r.insert(boost::beast::string_view(parts[i].data(), parts[i].size()),
             boost::beast::string_view(parts[i + 1].data(), parts[i + 1].size()));
  r.body() = std::string(body);
  return r;
}

}  // namespace

std::string encode(const std::vector<std::string_view>& parts) {
  std::size_t size = 4;
  for (auto p : parts)
    size += 4 + p.size();
  std::string out;
  out.reserve(size);
  put32(out, parts.size());
  for (auto p : parts) {
    put32(out, p.size());
    out.append(p);
  }
  return out;
}

std::optional<std::vector<std::string_view>> decode(std::string_view message, std::size_t max) {
  const auto count = get32(message);
  if (!count || *count == 0 || *count > max) return std::nullopt;
  std::vector<std::string_view> parts;
  parts.reserve(*count);
  for (std::size_t i = 0; i < *count; ++i) {
    const auto n = get32(message);
    if (!n || *n > message.size()) return std::nullopt;
    parts.push_back(message.substr(0, *n));
    message.remove_prefix(*n);
  }
  if (!message.empty()) return std::nullopt;
  return parts;
}

std::string encode_principal(const bridge::Principal& p) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  auto str = [&](const char* k, const std::string& v) {
    w.Key(k);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  };
  auto list = [&](const char* k, const std::vector<std::string>& v) {
    w.Key(k);
    w.StartArray();
    for (const auto& s : v)
      w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
    w.EndArray();
  };
  w.StartObject();
  str("key", p.key);
  str("iss", p.issuer);
  str("sub", p.subject);
  str("client_id", p.client_id);
  list("scopes", p.scopes);
  w.Key("unrestricted");
  w.Bool(p.unrestricted);
  list("filters", p.server_filters);
  w.Key("exp");
  w.Int64(p.expires_at);
  // The token only where the owner needs it: the MQTT password of the principal's sessions
  // (mqtt.session_credentials "token"), which the broker sees anyway.
  if (p.access_token) str("token", *p.access_token);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::optional<bridge::Principal> decode_principal(std::string_view json) {
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError() || !d.IsObject()) return std::nullopt;
  bridge::Principal p;
  bool ok = true;
  auto str = [&](const char* k, std::string& out) {
    auto it = d.FindMember(k);
    if (it == d.MemberEnd()) return;
    if (!it->value.IsString())
      ok = false;
    else
      out.assign(it->value.GetString(), it->value.GetStringLength());
  };
  auto list = [&](const char* k, std::vector<std::string>& out) {
    auto it = d.FindMember(k);
    if (it == d.MemberEnd()) return;
    if (!it->value.IsArray()) return void(ok = false);
    for (const auto& v : it->value.GetArray()) {
      if (!v.IsString()) return void(ok = false);
      out.emplace_back(v.GetString(), v.GetStringLength());
    }
  };
  str("key", p.key);
  str("iss", p.issuer);
  str("sub", p.subject);
  str("client_id", p.client_id);
  list("scopes", p.scopes);
  list("filters", p.server_filters);
  if (auto it = d.FindMember("unrestricted"); it != d.MemberEnd()) {
    if (!it->value.IsBool()) return std::nullopt;
    p.unrestricted = it->value.GetBool();
  }
  if (auto it = d.FindMember("exp"); it != d.MemberEnd()) {
    if (!it->value.IsInt64()) return std::nullopt;
    p.expires_at = it->value.GetInt64();
  }
  std::string token;
  str("token", token);
  if (!token.empty()) p.access_token = std::make_shared<const std::string>(std::move(token));
  if (!ok || p.key.empty()) return std::nullopt;
  return p;
}

std::string encode_request(const RelayedRequest& r) {
  const auto method = bhttp::to_string(r.method);
  const auto principal = encode_principal(r.principal);
  std::vector<std::string_view> parts{"request", std::string_view(method.data(), method.size()),
                                      r.target, principal, r.body};
  for (const auto& [name, value] : r.headers) {
    parts.emplace_back(name);
    parts.emplace_back(value);
  }
  return encode(parts);
}

std::optional<RelayedRequest> decode_request(const std::vector<std::string_view>& parts) {
  if (parts.size() < 5 || parts[0] != "request" || (parts.size() - 5) % 2 != 0) return std::nullopt;
  RelayedRequest r;
  r.method = bhttp::string_to_verb(boost::beast::string_view(parts[1].data(), parts[1].size()));
  if (r.method != bhttp::verb::post && r.method != bhttp::verb::get &&
      r.method != bhttp::verb::delete_)
    return std::nullopt;
  r.target = std::string(parts[2]);
  auto principal = decode_principal(parts[3]);
  if (!principal) return std::nullopt;
  r.principal = std::move(*principal);
  r.body = std::string(parts[4]);
  for (std::size_t i = 5; i + 1 < parts.size(); i += 2)
    r.headers.emplace_back(std::string(parts[i]), std::string(parts[i + 1]));
  return r;
}

Applied apply(const std::vector<std::string_view>& parts, Exchange& exchange) {
  const auto kind = parts.front();
  if (kind == "push" && parts.size() == 2) {
    exchange.push(std::string(parts[1]));
    return Applied::more;
  }
  if (kind == "event" && parts.size() == 4) {
    exchange.push_event(parts[1], parts[2], parts[3] == "1");
    return Applied::more;
  }
  if (kind == "reply" && parts.size() >= 3) {
    auto r = response_of(parts, 3, parts[2]);
    if (!r) return Applied::malformed;
    exchange.reply(std::move(*r));
    return Applied::done;
  }
  if (kind == "open" && parts.size() >= 2) {
    auto r = response_of(parts, 2, {});
    if (!r) return Applied::malformed;
    exchange.open_stream(std::move(*r));
    return Applied::more;
  }
  if (kind == "end" && parts.size() == 1) {
    exchange.end();
    return Applied::done;
  }
  if (kind == "abort" && parts.size() == 1) {
    exchange.abort();
    return Applied::done;
  }
  return Applied::malformed;
}

}  // namespace relay_wire

// ---- RemoteExchange ----------------------------------------------------------------------------

void RemoteExchange::gone() {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (gone_ || complete_) return;
    gone_ = true;
    f = std::move(on_gone_);
  }
  if (f) f();
}

bool RemoteExchange::complete() const {
  std::lock_guard<std::mutex> lock(mu_);
  return complete_ || gone_;
}

void RemoteExchange::watch(std::function<void()> on_gone) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!gone_) {
      on_gone_ = std::move(on_gone);
      return;
    }
  }
  if (on_gone) on_gone();
}

void RemoteExchange::emit(std::string frame, bool last) {
  std::lock_guard<std::mutex> lock(mu_);
  if (gone_ || complete_) return;
  if (last) complete_ = true;
  // Under the lock: frames leave in call order.
  send_(std::move(frame), last);
}

void RemoteExchange::reply(Response response) {
  const auto status = std::to_string(response.result_int());
  std::vector<std::string_view> parts{"reply", status, response.body()};
  relay_wire::add_fields(parts, response);
  emit(relay_wire::encode(parts), true);
}

void RemoteExchange::open_stream(Response head) {
  const auto status = std::to_string(head.result_int());
  std::vector<std::string_view> parts{"open", status};
  relay_wire::add_fields(parts, head);
  emit(relay_wire::encode(parts), false);
}

void RemoteExchange::push(std::string bytes) {
  emit(relay_wire::encode({"push", bytes}), false);
}

void RemoteExchange::push_event(std::string_view id, std::string_view data, bool last) {
  emit(relay_wire::encode({"event", id, data, last ? "1" : "0"}), false);
}

void RemoteExchange::end() {
  emit(relay_wire::encode({"end"}), true);
}

void RemoteExchange::abort() {
  emit(relay_wire::encode({"abort"}), true);
}

}  // namespace mcpmqtt::http

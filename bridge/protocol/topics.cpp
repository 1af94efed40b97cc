#include "bridge/protocol/topics.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace mcpmqtt::topics {

namespace {

constexpr std::size_t kMaxTopicBytes = 65535;  // MQTT 5.0 §1.5.4: UTF-8 string length

// MQTT strings must be well-formed UTF-8 without U+0000 (MQTT 5.0 §1.5.4): no overlong forms,
// no UTF-16 surrogates, nothing above U+10FFFF (RFC 3629), or the broker refuses the topic.
bool valid_utf8_no_nul(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    const auto second = static_cast<unsigned char>(s[i + 1]);
    if (second < lo || second > hi) return false;
    for (std::size_t k = 2; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    }
    i += n;
  }
  return true;
}

std::vector<std::string_view> split_levels(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const auto slash = s.find('/', start);
    if (slash == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, slash - start));
    start = slash + 1;
  }
}

// Whether `s` holds any of the characters of `set` (a plain scan: find_first_of calls memchr
// once per byte of `s`).
bool contains_any(std::string_view s, std::string_view set) {
  for (char c : s) {
    for (char x : set)
      if (c == x) return true;
  }
  return false;
}

// The rules of check_id and check_server_name, as the first one broken (a literal) or nullptr:
// the is_valid_ forms run on every message that arrives (Scheme::parse) and build no string.
const char* id_problem(std::string_view id) {
  if (id.empty()) return "must not be empty";
  if (id.size() > 256) return "must be at most 256 bytes";
  if (contains_any(id, "/+#")) return "must not contain '/', '+' or '#'";
  if (!valid_utf8_no_nul(id)) return "must be UTF-8 without NUL characters";
  return nullptr;
}

const char* server_name_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > 1024) return "must be at most 1024 bytes";
  if (contains_any(name, "+#")) return "must not contain '+' or '#'";
  if (!valid_utf8_no_nul(name)) return "must be UTF-8 without NUL characters";
  // An empty level: a '/' first, last, or next to another.
  if (name.front() == '/' || name.back() == '/' || name.find("//") != std::string_view::npos)
    return "must be levels separated by single '/', with no empty level (like "
           "type/sub-type/name)";
  return nullptr;
}

}  // namespace

bool is_valid_id(std::string_view id) {
  return id_problem(id) == nullptr;
}

bool is_valid_server_name(std::string_view name) {
  return server_name_problem(name) == nullptr;
}

std::string check_id(std::string_view id) {
  const char* problem = id_problem(id);
  return problem ? problem : "";
}

std::string check_server_id(std::string_view id) {
  auto why = check_id(id);
  if (!why.empty()) return why;
  if (id == "capability" || id == "presence") {
    return "must not be \"capability\" or \"presence\" (the control topic would read as another "
           "topic)";
  }
  return {};
}

std::string check_server_name(std::string_view name) {
  const char* problem = server_name_problem(name);
  return problem ? problem : "";
}

std::string check_server_name_filter(std::string_view filter) {
  if (filter.empty()) return "must not be empty";
  if (filter.size() > 1024) return "must be at most 1024 bytes";
  if (!valid_utf8_no_nul(filter)) return "must be UTF-8 without NUL characters";
  const auto levels = split_levels(filter);
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const auto level = levels[i];
    if (level.find('#') != std::string_view::npos && (level != "#" || i + 1 != levels.size())) {
      return "'#' must be a whole level and the last one";
    }
    if (level.find('+') != std::string_view::npos && level != "+") {
      return "'+' must be a whole level";
    }
  }
  return {};
}

bool filter_matches(std::string_view filter, std::string_view name) {
  const auto f = split_levels(filter);
  const auto n = split_levels(name);
  std::size_t i = 0;
  for (; i < f.size(); ++i) {
    if (f[i] == "#") return true;  // matches the parent level too ("a/#" matches "a")
    if (i >= n.size()) return false;
    if (f[i] != "+" && f[i] != n[i]) return false;
  }
  return i == n.size();
}

namespace {
std::string join(std::initializer_list<std::string_view> parts) {
  std::size_t len = 0;
  for (auto p : parts)
    len += p.size() + 1;
  std::string out;
  out.reserve(len);
  for (auto p : parts) {
    if (!out.empty() && out.back() != '/') out.push_back('/');
    out.append(p);
  }
  return out;
}
}  // namespace

std::string check_prefix(std::string_view prefix) {
  if (prefix.empty()) return "must not be empty (004's own is \"$mcp-\")";
  if (prefix.size() > 256) return "must be at most 256 bytes";
  if (prefix.find_first_of("+#") != std::string_view::npos) return "must not contain '+' or '#'";
  if (!valid_utf8_no_nul(prefix)) return "must be UTF-8 without NUL characters";
  return {};
}

Scheme::Scheme(std::string_view prefix) : prefix_(prefix) {
  if (auto why = check_prefix(prefix); !why.empty()) {
    throw std::invalid_argument("topic prefix \"" + prefix_ + "\" " + why);
  }
  server_ = prefix_ + "server/";
  server_capability_ = server_ + "capability/";
  server_presence_ = server_ + "presence/";
  client_presence_ = prefix_ + "client/presence/";
  client_capability_ = prefix_ + "client/capability/";
  rpc_ = prefix_ + "rpc/";
}

std::string Scheme::server_control(std::string_view sid, std::string_view name) const {
  return join({server_, sid, name});
}
std::string Scheme::server_capability(std::string_view sid, std::string_view name) const {
  return join({server_capability_, sid, name});
}
std::string Scheme::server_presence(std::string_view sid, std::string_view name) const {
  return join({server_presence_, sid, name});
}
std::string Scheme::server_presence_filter(std::string_view filter) const {
  return join({server_presence_, "+", filter});
}
std::string Scheme::server_capability_filter(std::string_view filter) const {
  return join({server_capability_, "+", filter});
}
std::string Scheme::client_presence(std::string_view cid) const {
  return join({client_presence_, cid});
}
std::string Scheme::client_capability(std::string_view cid) const {
  return join({client_capability_, cid});
}
std::string Scheme::rpc(std::string_view cid, std::string_view sid, std::string_view name) const {
  return join({rpc_, cid, sid, name});
}
std::string Scheme::bridge(std::string_view rest) const {
  std::string out;
  out.reserve(prefix_.size() + 7 + rest.size());
  out.append(prefix_).append("bridge/").append(rest);
  return out;
}

const Scheme& standard() {
  static const Scheme scheme;
  return scheme;
}

const Scheme& scheme_for(std::string_view prefix) {
  if (prefix == kDefaultPrefix) return standard();
  // A process uses the prefixes of its configuration: a handful at most, never freed.
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<const Scheme>, std::less<>> schemes;
  std::lock_guard lock(mu);
  auto it = schemes.find(prefix);
  if (it == schemes.end())
    it = schemes.emplace(std::string(prefix), std::make_unique<const Scheme>(prefix)).first;
  return *it->second;
}

const char* to_string(Kind k) {
  switch (k) {
    case Kind::server_control:
      return "server control";
    case Kind::server_capability:
      return "server capability";
    case Kind::server_presence:
      return "server presence";
    case Kind::client_presence:
      return "client presence";
    case Kind::client_capability:
      return "client capability";
    case Kind::rpc:
      return "rpc";
  }
  return "?";
}

std::optional<Parsed> Scheme::parse(std::string_view topic) const {
  if (topic.size() > kMaxTopicBytes) return std::nullopt;
  auto id_then_name = [](std::string_view rest, Kind kind) -> std::optional<Parsed> {
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    Parsed p{kind, std::string(rest.substr(0, slash)), std::string(rest.substr(slash + 1)), {}};
    if (!is_valid_id(p.server_id) || !is_valid_server_name(p.server_name)) return std::nullopt;
    return p;
  };
  auto single_id = [](std::string_view rest, Kind kind) -> std::optional<Parsed> {
    if (!is_valid_id(rest)) return std::nullopt;
    return Parsed{kind, {}, {}, std::string(rest)};
  };
  if (topic.starts_with(server_capability_)) {
    return id_then_name(topic.substr(server_capability_.size()), Kind::server_capability);
  }
  if (topic.starts_with(server_presence_)) {
    return id_then_name(topic.substr(server_presence_.size()), Kind::server_presence);
  }
  if (topic.starts_with(server_)) {
    return id_then_name(topic.substr(server_.size()), Kind::server_control);
  }
  if (topic.starts_with(client_presence_)) {
    return single_id(topic.substr(client_presence_.size()), Kind::client_presence);
  }
  if (topic.starts_with(client_capability_)) {
    return single_id(topic.substr(client_capability_.size()), Kind::client_capability);
  }
  if (topic.starts_with(rpc_)) {
    auto rest = topic.substr(rpc_.size());
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    auto p = id_then_name(rest.substr(slash + 1), Kind::rpc);
    if (!p) return std::nullopt;
    p->client_id = std::string(rest.substr(0, slash));
    if (!is_valid_id(p->client_id)) return std::nullopt;
    return p;
  }
  return std::nullopt;
}

}  // namespace mcpmqtt::topics

#include "bridge/protocol/topics.hpp"

#include <vector>

namespace mcpmqtt::topics {

namespace {

constexpr std::size_t kMaxTopicBytes = 65535;  // MQTT 5.0 §1.5.4: UTF-8 string length

constexpr std::string_view kServer = "$mcp-server/";
constexpr std::string_view kServerCapability = "$mcp-server/capability/";
constexpr std::string_view kServerPresence = "$mcp-server/presence/";
constexpr std::string_view kClientPresence = "$mcp-client/presence/";
constexpr std::string_view kClientCapability = "$mcp-client/capability/";
constexpr std::string_view kRpc = "$mcp-rpc/";

// MQTT strings must be well-formed UTF-8 without U+0000 (MQTT 5.0 §1.5.4).
bool valid_utf8_no_nul(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    std::size_t n = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xE  ? 3
                    : (c >> 3) == 0x1E ? 4
                                       : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    }
    if (n == 2 && c < 0xC2) return false;  // overlong
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

}  // namespace

std::string check_id(std::string_view id) {
  if (id.empty()) return "must not be empty";
  if (id.size() > 256) return "must be at most 256 bytes";
  if (id.find_first_of("/+#") != std::string_view::npos) return "must not contain '/', '+' or '#'";
  if (!valid_utf8_no_nul(id)) return "must be UTF-8 without NUL characters";
  return {};
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
  if (name.empty()) return "must not be empty";
  if (name.size() > 1024) return "must be at most 1024 bytes";
  if (name.find_first_of("+#") != std::string_view::npos) return "must not contain '+' or '#'";
  if (!valid_utf8_no_nul(name)) return "must be UTF-8 without NUL characters";
  for (auto level : split_levels(name)) {
    if (level.empty())
      return "must be levels separated by single '/', with no empty level (like "
             "type/sub-type/name)";
  }
  return {};
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

std::string server_control(std::string_view sid, std::string_view name) {
  return join({kServer, sid, name});
}
std::string server_capability(std::string_view sid, std::string_view name) {
  return join({kServerCapability, sid, name});
}
std::string server_presence(std::string_view sid, std::string_view name) {
  return join({kServerPresence, sid, name});
}
std::string server_presence_filter(std::string_view filter) {
  return join({kServerPresence, "+", filter});
}
std::string client_presence(std::string_view cid) {
  return join({kClientPresence, cid});
}
std::string client_capability(std::string_view cid) {
  return join({kClientCapability, cid});
}
std::string rpc(std::string_view cid, std::string_view sid, std::string_view name) {
  return join({kRpc, cid, sid, name});
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

std::optional<Parsed> parse(std::string_view topic) {
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
  if (topic.starts_with(kServerCapability)) {
    return id_then_name(topic.substr(kServerCapability.size()), Kind::server_capability);
  }
  if (topic.starts_with(kServerPresence)) {
    return id_then_name(topic.substr(kServerPresence.size()), Kind::server_presence);
  }
  if (topic.starts_with(kServer)) {
    return id_then_name(topic.substr(kServer.size()), Kind::server_control);
  }
  if (topic.starts_with(kClientPresence)) {
    return single_id(topic.substr(kClientPresence.size()), Kind::client_presence);
  }
  if (topic.starts_with(kClientCapability)) {
    return single_id(topic.substr(kClientCapability.size()), Kind::client_capability);
  }
  if (topic.starts_with(kRpc)) {
    auto rest = topic.substr(kRpc.size());
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

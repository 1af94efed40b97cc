// The MCP over MQTT topic scheme (bridge/protocol/topics.hpp) on any bytes.
//
// The whole input is a topic: a topic the scheme reads is a valid MQTT Topic Name (the codec's
// rules), each id and name in it passes its check, and the builder of its kind writes the same
// topic back. The input split at its first two newlines gives an id, a server-name and a client
// id (or a filter and a name): each check_* agrees with a definition written here from the
// standard (well-formed UTF-8 decoded code point by code point, MQTT 5.0 §1.5.4, §4.7), every
// topic built from valid parts reads back as those parts, and filter_matches agrees with a
// matcher written here.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/protocol/topics.hpp"
#include "mqtt/codec/codec.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace topics = mcpmqtt::topics;
namespace codec = mcpmqtt::mqtt::codec;
using mcpmqtt::fuzz::check;
using mcpmqtt::fuzz::reference_utf8;

namespace {

std::vector<std::string_view> levels(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const auto slash = s.find('/', start);
    out.push_back(s.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

// An id (server-id or mcp-client-id): 1 to 256 bytes of UTF-8 without NUL, '/', '+' or '#'.
bool ref_id(std::string_view s) {
  return !s.empty() && s.size() <= 256 && reference_utf8(s) &&
         s.find_first_of("/+#") == std::string_view::npos;
}

bool ref_server_id(std::string_view s) {
  return ref_id(s) && s != "capability" && s != "presence";
}

// A server-name: 1 to 1024 bytes of UTF-8 without NUL, '+' or '#', in non-empty levels.
bool ref_server_name(std::string_view s) {
  if (s.empty() || s.size() > 1024 || !reference_utf8(s) ||
      s.find_first_of("+#") != std::string_view::npos)
    return false;
  for (auto level : levels(s))
    if (level.empty()) return false;
  return true;
}

// A filter of server-names: MQTT 5.0 §4.7.1 — '+' a whole level, '#' a whole last level.
bool ref_filter(std::string_view s) {
  if (s.empty() || s.size() > 1024 || !reference_utf8(s)) return false;
  const auto ls = levels(s);
  for (std::size_t i = 0; i < ls.size(); ++i) {
    if (ls[i].find('+') != std::string_view::npos && ls[i] != "+") return false;
    if (ls[i].find('#') != std::string_view::npos && (ls[i] != "#" || i + 1 != ls.size()))
      return false;
  }
  return true;
}

// MQTT 5.0 §4.7.1.2 and §4.7.1.3, recursively over levels.
bool ref_matches(const std::vector<std::string_view>& f, std::size_t i,
                 const std::vector<std::string_view>& n, std::size_t j) {
  if (i == f.size()) return j == n.size();
  if (f[i] == "#") return true;  // this level and everything below, the parent level too
  if (j == n.size()) return false;
  if (f[i] != "+" && f[i] != n[j]) return false;
  return ref_matches(f, i + 1, n, j + 1);
}

void check_parsed(std::string_view topic) {
  const auto p = topics::standard().parse(topic);
  if (!p) return;
  check(codec::valid_topic_name(topic), "parse() read a topic MQTT does not allow");
  std::string rebuilt;
  switch (p->kind) {
    case topics::Kind::server_control:
      rebuilt = topics::standard().server_control(p->server_id, p->server_name);
      break;
    case topics::Kind::server_capability:
      rebuilt = topics::standard().server_capability(p->server_id, p->server_name);
      break;
    case topics::Kind::server_presence:
      rebuilt = topics::standard().server_presence(p->server_id, p->server_name);
      break;
    case topics::Kind::client_presence:
      rebuilt = topics::standard().client_presence(p->client_id);
      break;
    case topics::Kind::client_capability:
      rebuilt = topics::standard().client_capability(p->client_id);
      break;
    case topics::Kind::rpc:
      rebuilt = topics::standard().rpc(p->client_id, p->server_id, p->server_name);
      break;
  }
  check(rebuilt == topic, "a parsed topic is built back differently");
  const bool server =
      p->kind != topics::Kind::client_presence && p->kind != topics::Kind::client_capability;
  if (server) {
    check(topics::is_valid_id(p->server_id) && topics::is_valid_server_name(p->server_name),
          "a parsed server-id or server-name is not valid");
  }
  if (!server || p->kind == topics::Kind::rpc)
    check(topics::is_valid_id(p->client_id), "a parsed client id is not valid");
  check(std::string_view(topics::to_string(p->kind)) != "?", "kind name");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  check_parsed(in);

  // Three parts: a, b, c (split at the first two newlines).
  const auto nl1 = in.find('\n');
  const std::string_view a = in.substr(0, nl1);
  const std::string_view rest =
      nl1 == std::string_view::npos ? std::string_view{} : in.substr(nl1 + 1);
  const auto nl2 = rest.find('\n');
  const std::string_view b = rest.substr(0, nl2);
  const std::string_view c =
      nl2 == std::string_view::npos ? std::string_view{} : rest.substr(nl2 + 1);

  for (std::string_view s : {in, a, b, c}) {
    check(topics::is_valid_id(s) == ref_id(s), "check_id against the definition");
    check(topics::is_valid_server_id(s) == ref_server_id(s), "check_server_id");
    check(topics::is_valid_server_name(s) == ref_server_name(s), "check_server_name");
    // The fast checks of every message (issue 34) agree with the ones that give reasons.
    check(topics::is_valid_id(s) == topics::check_id(s).empty(), "is_valid_id and check_id");
    check(topics::is_valid_server_name(s) == topics::check_server_name(s).empty(),
          "is_valid_server_name and check_server_name");
    check(topics::is_valid_server_name_filter(s) == ref_filter(s), "check_server_name_filter");
    // What a name or id that passes is, MQTT allows as a topic level or a topic name.
    if (topics::is_valid_server_name(s)) {
      check(codec::valid_topic_name(s), "a valid server-name is no valid MQTT topic");
      check(topics::filter_matches(s, s), "a server-name does not match itself");
      check(topics::filter_matches("#", s), "# does not match a server-name");
    }
  }

  // Topics built from valid parts read back as those parts.
  const bool sid_ok = topics::is_valid_server_id(a);
  const bool name_ok = topics::is_valid_server_name(b);
  const bool cid_ok = topics::is_valid_id(c);
  auto expect = [](const std::string& topic, topics::Kind kind, std::string_view sid,
                   std::string_view name, std::string_view cid) {
    const auto p = topics::standard().parse(topic);
    check(p.has_value(), "a topic built from valid parts does not parse");
    check(p->kind == kind && p->server_id == sid && p->server_name == name && p->client_id == cid,
          "a topic built from valid parts reads back differently");
    check(codec::valid_topic_name(topic), "a built topic is no valid MQTT topic");
  };
  if (sid_ok && name_ok) {
    expect(topics::standard().server_control(a, b), topics::Kind::server_control, a, b, {});
    expect(topics::standard().server_capability(a, b), topics::Kind::server_capability, a, b, {});
    expect(topics::standard().server_presence(a, b), topics::Kind::server_presence, a, b, {});
    if (cid_ok) expect(topics::standard().rpc(c, a, b), topics::Kind::rpc, a, b, c);
  }
  if (cid_ok) {
    expect(topics::standard().client_presence(c), topics::Kind::client_presence, {}, {}, c);
    expect(topics::standard().client_capability(c), topics::Kind::client_capability, {}, {}, c);
  }

  // Filters: a against b as a filter and a name, and the presence filter built from it.
  if (topics::is_valid_server_name_filter(a)) {
    const auto f = levels(a);
    const auto n = levels(b);
    check(topics::filter_matches(a, b) == ref_matches(f, 0, n, 0), "filter_matches");
    if (a.find_first_of("+#") == std::string_view::npos)
      check(topics::filter_matches(a, b) == (a == b), "a filter without wildcards");
    // The presence filter is a valid MQTT filter under $mcp-server/presence/+/ and matches the
    // presence topic of every server-name the filter matches.
    const auto presence = topics::standard().server_presence_filter(a);
    check(presence.starts_with("$mcp-server/presence/+/") &&
              presence.substr(std::string_view("$mcp-server/presence/+/").size()) == a,
          "server_presence_filter");
    if (name_ok && topics::filter_matches(a, b)) {
      const auto topic = topics::standard().server_presence("sid", b);
      check(ref_matches(levels(presence), 0, levels(topic), 0),
            "a presence topic outside the presence filter of a matching filter");
    }
  }
  return 0;
}

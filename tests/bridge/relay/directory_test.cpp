#include "bridge/relay/directory.hpp"

#include <set>

#include <catch2/catch.hpp>

using mcpmqtt::bridge::Directory;

namespace {
const std::string kOnline =
    R"({"jsonrpc":"2.0","method":"notifications/server/online","params":{"server_name":"a/b","description":"d","meta":{"rbac":{"roles":[]}}}})";
}

TEST_CASE("presence: online adds, again updates, empty removes", "[directory]") {
  Directory d;
  CHECK(d.apply_presence("s1", "a/b", kOnline) == Directory::Change::added);
  CHECK(d.apply_presence("s1", "a/b", kOnline) == Directory::Change::updated);
  CHECK(d.online("a/b"));
  CHECK(d.instance_count() == 1);
  auto inst = d.instances("a/b");
  REQUIRE(inst.size() == 1);
  CHECK(inst[0].description == "d");
  CHECK(inst[0].meta_json == R"({"rbac":{"roles":[]}})");
  CHECK(d.apply_presence("s1", "a/b", "") == Directory::Change::removed);
  CHECK_FALSE(d.online("a/b"));
  CHECK(d.apply_presence("s1", "a/b", "") == Directory::Change::ignored);
}

TEST_CASE("presence payloads that are not an online notification are ignored with a reason",
          "[directory]") {
  Directory d;
  std::string why;
  CHECK(d.apply_presence("s", "a/b", "{bad", &why) == Directory::Change::ignored);
  CHECK(why.rfind("presence payload is not JSON-RPC: invalid JSON", 0) == 0);
  CHECK(d.apply_presence("s", "a/b", R"({"jsonrpc":"2.0","method":"notifications/other"})", &why) ==
        Directory::Change::ignored);
  CHECK(why == "presence payload is not a notifications/server/online notification");
  CHECK(d.apply_presence("s", "a/b",
                         R"({"jsonrpc":"2.0","id":1,"method":"notifications/server/online"})",
                         &why) == Directory::Change::ignored);
  CHECK_FALSE(d.online("a/b"));
  // A missing params object still lists the instance; a mismatched server_name is noted.
  CHECK(
      d.apply_presence("s", "a/b", R"({"jsonrpc":"2.0","method":"notifications/server/online"})") ==
      Directory::Change::added);
  why.clear();
  CHECK(
      d.apply_presence(
          "t", "a/b",
          R"({"jsonrpc":"2.0","method":"notifications/server/online","params":{"server_name":"x"}})",
          &why) == Directory::Change::added);
  CHECK(why == "params.server_name \"x\" differs from the topic's server-name; using the topic's");
}

TEST_CASE("pick: random covers instances, round robin alternates", "[directory]") {
  Directory d;
  for (const char* id : {"s1", "s2", "s3"})
    d.apply_presence(id, "n", kOnline);
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i)
    seen.insert(d.pick("n", Directory::Pick::random)->server_id);
  CHECK(seen.size() == 3);
  std::vector<std::string> rr;
  for (int i = 0; i < 6; ++i)
    rr.push_back(d.pick("n", Directory::Pick::round_robin)->server_id);
  CHECK(rr == std::vector<std::string>{"s1", "s2", "s3", "s1", "s2", "s3"});
  CHECK_FALSE(d.pick("missing", Directory::Pick::random));
}

TEST_CASE("watch fires once when a name comes online, at once when it already is", "[directory]") {
  Directory d;
  int fired = 0;
  d.watch("n", [&] { ++fired; });
  d.apply_presence("s1", "other", kOnline);
  CHECK(fired == 0);
  d.apply_presence("s1", "n", kOnline);
  CHECK(fired == 1);
  d.apply_presence("s2", "n", kOnline);
  CHECK(fired == 1);
  d.watch("n", [&] { ++fired; });
  CHECK(fired == 2);
  auto id = d.watch("later", [&] { ++fired; });
  d.unwatch(id);
  d.apply_presence("s1", "later", kOnline);
  CHECK(fired == 2);
}

TEST_CASE("listing as JSON, with broker RBAC only when it is a JSON array", "[directory]") {
  Directory d;
  d.set_filters({"#"});
  CHECK_FALSE(d.set_rbac_json("{\"not\":\"array\"}"));
  CHECK_FALSE(d.set_rbac_json("[broken"));
  CHECK(d.to_json() == R"({"filters":["#"],"servers":[]})");
  CHECK(d.set_rbac_json(R"([{"server_name":"a/b","role_name":"user"}])"));
  d.apply_presence("s1", "a/b", kOnline);
  const auto j = d.to_json();
  CHECK(
      j.rfind(
          R"({"filters":["#"],"servers":[{"name":"a/b","instances":[{"server_id":"s1","description":"d","meta":{"rbac":{"roles":[]}},"online_since":")",
          0) == 0);
  CHECK(j.find(R"("rbac":[{"server_name":"a/b","role_name":"user"}])") != std::string::npos);
}

TEST_CASE(
    "presence: past its bound the directory ignores new instances with a reason, and the "
    "pick state of a name that left is forgotten",
    "[directory]") {
  Directory d(3);
  for (const char* id : {"s1", "s2", "s3"})
    CHECK(d.apply_presence(id, "a/b", kOnline) == Directory::Change::added);
  std::string why;
  CHECK(d.apply_presence("s4", "a/c", kOnline, &why) == Directory::Change::ignored);
  CHECK(why == "the directory holds its maximum of 3 server instances; this one is ignored");
  CHECK_FALSE(d.online("a/c"));
  CHECK(d.instance_count() == 3);
  // Known instances still update; a removal makes room.
  CHECK(d.apply_presence("s2", "a/b", kOnline) == Directory::Change::updated);
  CHECK(d.apply_presence("s3", "a/b", "") == Directory::Change::removed);
  CHECK(d.apply_presence("s4", "a/c", kOnline) == Directory::Change::added);
  CHECK(d.instance_count() == 3);

  // Round robin over s1, s2, s3; once the name is gone its position is forgotten, so its next
  // life starts at the first instance again.
  Directory rr;
  for (const char* id : {"s1", "s2", "s3"})
    rr.apply_presence(id, "x/y", kOnline);
  CHECK(rr.pick("x/y", Directory::Pick::round_robin)->server_id == "s1");
  CHECK(rr.pick("x/y", Directory::Pick::round_robin)->server_id == "s2");
  for (const char* id : {"s1", "s2", "s3"})
    rr.apply_presence(id, "x/y", "");
  for (const char* id : {"s1", "s2", "s3"})
    rr.apply_presence(id, "x/y", kOnline);
  CHECK(rr.pick("x/y", Directory::Pick::round_robin)->server_id == "s1");
}

TEST_CASE(
    "listen: an instance's capability messages, its live repeated presence and its end reach "
    "the listeners of that instance only (004 §Capability List Changed, §Server Disconnect)",
    "[directory]") {
  Directory d;
  using Event = Directory::InstanceEvent;
  struct Heard {
    std::vector<std::string> events;
    Directory::InstanceListener listener() {
      return [this](Event e, const std::shared_ptr<const std::string>& payload) {
        switch (e) {
          case Event::offline:
            events.push_back("offline");
            break;
          case Event::unobserved:
            events.push_back("unobserved");
            break;
          case Event::announced_again:
            events.push_back("again");
            break;
          case Event::capability:
            events.push_back("capability " + *payload);
            break;
        }
      };
    }
  };
  // Not online: nothing to listen to.
  Heard none;
  CHECK(d.listen("a/b", "s1", none.listener()) == 0);

  REQUIRE(d.apply_presence("s1", "a/b", kOnline) == Directory::Change::added);
  REQUIRE(d.apply_presence("s2", "a/b", kOnline) == Directory::Change::added);
  Heard one, two, other;
  const auto l1 = d.listen("a/b", "s1", one.listener());
  const auto l2 = d.listen("a/b", "s1", two.listener());
  const auto l3 = d.listen("a/b", "s2", other.listener());
  CHECK((l1 != 0 && l2 != 0 && l3 != 0));
  CHECK(d.listener_count() == 3);

  const auto note = std::make_shared<const std::string>("list changed");
  CHECK(d.apply_capability("s1", "a/b", note) == 2);
  CHECK(d.apply_capability("s9", "a/b", note) == 0);
  // The broker's retained copy and a changed presence are not an announcement again.
  CHECK(d.apply_presence("s1", "a/b", kOnline) == Directory::Change::updated);
  const std::string changed =
      R"({"jsonrpc":"2.0","method":"notifications/server/online","params":{"description":"e"}})";
  CHECK(d.apply_presence("s1", "a/b", changed, nullptr, /*live=*/true) ==
        Directory::Change::updated);
  CHECK(d.apply_presence("s1", "a/b", changed, nullptr, /*live=*/true) ==
        Directory::Change::announced_again);
  d.unlisten(l2);
  CHECK(d.apply_presence("s1", "a/b", "") == Directory::Change::removed);
  // Offline is the last event: the instance's listeners are gone with it.
  CHECK(d.listener_count() == 1);
  CHECK(d.apply_capability("s1", "a/b", note) == 0);
  CHECK(one.events == std::vector<std::string>{"capability list changed", "again", "offline"});
  CHECK(two.events == std::vector<std::string>{"capability list changed", "again"});

  // The directory losing sight of everything ends every listener.
  d.clear();
  CHECK(other.events == std::vector<std::string>{"unobserved"});
  CHECK(d.listener_count() == 0);
  d.unlisten(l3);  // already gone: nothing happens
}

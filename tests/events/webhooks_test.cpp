#include "events/webhooks.hpp"

#include <catch2/catch.hpp>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/memory_channel.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt;
using namespace std::chrono_literals;
using bridge::WebhookDelivery;
using bridge::WebhookOutcome;
using bridge::Webhooks;
using jsonrpc::Message;

namespace {

Message msg(const std::string& text) {
  auto m = Message::parse(text);
  REQUIRE(m);
  return *m;
}

// Records every POST; the test answers them.
struct FakeSender : bridge::WebhookSender {
  struct Sent {
    WebhookDelivery d;
    std::function<void(WebhookOutcome)> done;
  };
  std::vector<Sent> sent;
  void post(WebhookDelivery d, std::function<void(WebhookOutcome)> done) override {
    sent.push_back({std::move(d), std::move(done)});
  }
  // Answers the oldest unanswered POST with `status`.
  WebhookDelivery answer(unsigned status, std::optional<std::chrono::milliseconds> retry = {}) {
    for (auto& s : sent) {
      if (!s.done) continue;
      auto done = std::move(s.done);
      s.done = nullptr;
      WebhookOutcome o;
      o.status = status;
      o.retry_after = retry;
      done(o);
      return s.d;
    }
    FAIL("no POST waits for an answer");
    return {};
  }
  std::size_t waiting() const {
    std::size_t n = 0;
    for (const auto& s : sent)
      n += s.done != nullptr;
    return n;
  }
};

struct Fixture {
  test::TempDir dir;
  test::ManualScheduler scheduler;
  FakeSender sender;
  std::map<std::string, std::set<std::string>> interest;
  std::unique_ptr<Webhooks> w;

  Fixture() { open(); }
  void open(std::chrono::seconds window = 3600s) {
    bridge::WebhookOptions o;
    o.database = dir.path() + "/webhooks.sqlite3";
    o.retry_min = 100ms;
    o.retry_max = 1000ms;
    o.retry_window = window;
    auto made = Webhooks::open(
        o, scheduler, sender,
        [this](const std::string& s, const std::set<std::string>& uris) { interest[s] = uris; });
    REQUIRE(made);
    w = std::move(*made);
  }
  std::string register_(const std::string& principal, const std::string& uris,
                        const std::string& target = "https://example.com/hook") {
    auto r = w->register_subscription(
        principal, "srv",
        msg(R"({"jsonrpc":"2.0","id":1,"method":"resources/subscriptions/register","params":{"uris":)" +
            uris + R"(,"targetUri":")" + target + R"("}})"),
        target);
    REQUIRE(r);
    return *r;
  }
  void event(const std::string& uri, const std::string& payload = R"({"n":1})") {
    w->on_event(
        "srv",
        msg(R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":")" +
            uri + R"(","payload":)" + payload + "}}"));
  }
};

std::string field(const std::string& json, std::initializer_list<const char*> path) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  const rapidjson::Value* v = &d;
  for (auto p : path) {
    if (!v->IsObject() || !v->HasMember(p)) return {};
    v = &(*v)[p];
  }
  return v->IsString() ? v->GetString() : jsonrpc::to_json(*v);
}

}  // namespace

TEST_CASE("Standard Webhooks: the signature of the specification's example", "[webhooks]") {
  CHECK(bridge::webhook_signature(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330",
            R"({"test": 2432232314})") == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  CHECK(bridge::webhook_signature("nope", "a", "1", "{}").empty());
  CHECK(bridge::unbase64(bridge::base64("ab")) == std::optional<std::string>("ab"));
  CHECK(bridge::unbase64(bridge::base64("abc")) == std::optional<std::string>("abc"));
  CHECK(bridge::unbase64(bridge::base64("abcd")) == std::optional<std::string>("abcd"));
}

TEST_CASE(
    "webhooks (SEP-1803 §Out-of-Band): register returns the subscription with a Standard "
    "Webhooks secret once, stores it 0600, and asks for the in-band subscription",
    "[webhooks]") {
  Fixture f;
  const auto r = f.register_("alice", R"(["event://x/tick","event://x/tock"])");
  const auto uri = field(r, {"subscription", "uri"});
  CHECK(uri.rfind("subscription://", 0) == 0);
  CHECK(field(r, {"subscription", "eventUris"}) == R"(["event://x/tick","event://x/tock"])");
  CHECK(field(r, {"subscription", "targetUri"}) == "https://example.com/hook");
  CHECK(field(r, {"subscription", "webhookSecret", "type"}) == "standard");
  const auto key = field(r, {"subscription", "webhookSecret", "key"});
  REQUIRE(key.rfind("whsec_", 0) == 0);
  CHECK(bridge::unbase64(key.substr(6))->size() == 32);
  CHECK(f.interest["srv"] == std::set<std::string>{"event://x/tick", "event://x/tock"});
  struct stat st {};
  REQUIRE(::stat((f.dir.path() + "/webhooks.sqlite3").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  // Reading it back shows the target and URIs, never the secret.
  auto read = f.w->read("alice", "srv", uri);
  REQUIRE(read);
  CHECK(read->find("whsec_") == std::string::npos);
  CHECK(read->find("example.com/hook") != std::string::npos);
  // Another principal neither reads nor deregisters it.
  CHECK_FALSE(f.w->read("mallory", "srv", uri));
  auto dereg = [&](const std::string& who) {
    return f.w->deregister(
        who, "srv",
        msg(R"({"jsonrpc":"2.0","id":2,"method":"resources/subscriptions/deregister","params":{"uri":")" +
            uri + R"("}})"));
  };
  auto refused = dereg("mallory");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == jsonrpc::code::invalid_params);
  CHECK(f.interest["srv"].size() == 2);
  CHECK(dereg("alice"));
  CHECK(f.interest["srv"].empty());
}

TEST_CASE("webhooks: malformed registrations get -32602 naming what is wrong", "[webhooks]") {
  Fixture f;
  for (const auto* params : {R"({"targetUri":"https://e.com"})", R"({"uris":[],"targetUri":"x"})",
                             R"({"uris":["file:///etc"],"targetUri":"x"})"}) {
    auto r = f.w->register_subscription(
        "a", "srv",
        msg(std::string(
                R"({"jsonrpc":"2.0","id":1,"method":"resources/subscriptions/register","params":)") +
            params + "}"),
        "https://e.com");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == jsonrpc::code::invalid_params);
  }
}

TEST_CASE(
    "webhooks: an event goes to each covering registration, signed, its payload as written, "
    "and 2xx delivers it",
    "[webhooks]") {
  Fixture f;
  const auto r = f.register_("alice", R"(["event://x/tick"])");
  f.register_("bob", R"(["event://x/ticks"])");
  const auto key = field(r, {"subscription", "webhookSecret", "key"});
  f.event("event://x/tick/7", R"({"z":1,"big":12345678901234567891,"s":"\u00e9"})");
  f.event("event://x/tic");
  REQUIRE(f.sender.sent.size() == 1);
  const auto& d = f.sender.sent[0].d;
  CHECK(d.target == "https://example.com/hook");
  CHECK(d.id.rfind("msg_", 0) == 0);
  CHECK(d.signature == bridge::webhook_signature(key, d.id, d.timestamp, d.body));
  CHECK(
      d.body.find(
          R"("uri":"event://x/tick/7","payload":{"z":1,"big":12345678901234567891,"s":"\u00e9"}})") !=
      std::string::npos);
  CHECK(field(d.body, {"type"}) == "notifications/resources/updated");
  CHECK(f.w->stats().outbox == 1);
  f.sender.answer(204);
  CHECK(f.w->stats().outbox == 0);
}

TEST_CASE(
    "webhooks: failures are retried with the same webhook-id after a growing delay, "
    "Retry-After honoured, until delivered",
    "[webhooks]") {
  Fixture f;
  f.register_("alice", R"(["event://x"])");
  f.event("event://x");
  const auto first = f.sender.answer(503);
  CHECK(f.sender.waiting() == 0);
  f.scheduler.advance(200ms);  // retry_min 100 ms ±25 %
  REQUIRE(f.sender.waiting() == 1);
  const auto second = f.sender.answer(0);  // no response at all
  CHECK(second.id == first.id);
  CHECK(second.body == first.body);
  f.scheduler.advance(140ms);  // 200 ms ±25 %: not yet
  CHECK(f.sender.waiting() == 0);
  f.scheduler.advance(200ms);
  REQUIRE(f.sender.waiting() == 1);
  f.sender.answer(429, 5000ms);
  f.scheduler.advance(4000ms);
  CHECK(f.sender.waiting() == 0);  // Retry-After: 5 s, longer than the backoff
  f.scheduler.advance(1100ms);
  REQUIRE(f.sender.waiting() == 1);
  CHECK(f.sender.answer(200).id == first.id);
  CHECK(f.w->stats().outbox == 0);
}

TEST_CASE("webhooks: 410 Gone deregisters the registration", "[webhooks]") {
  Fixture f;
  f.register_("alice", R"(["event://x"])");
  f.event("event://x");
  f.event("event://x");
  f.sender.answer(410);
  CHECK(f.interest["srv"].empty());
  CHECK(f.w->stats().registrations == 0);
  CHECK(f.w->stats().outbox == 0);
  f.sender.answer(200);  // the second POST was in flight: its answer changes nothing
  f.event("event://x");
  CHECK(f.sender.sent.size() == 2);
}

TEST_CASE("webhooks: an event not delivered within the window is dead-lettered", "[webhooks]") {
  Fixture f;
  f.w.reset();
  f.open(1s);
  f.register_("alice", R"(["event://x"])");
  f.event("event://x");
  f.sender.answer(500);
  // The retries' delays grow past the one-second window (wall clock): the event goes to the
  // dead letters instead of waiting further.
  for (int i = 0; i < 20 && f.w->stats().outbox > 0; ++i) {
    f.scheduler.advance(1000ms);
    if (f.sender.waiting()) f.sender.answer(500);
    ::usleep(60000);
  }
  f.scheduler.advance(100ms);  // the batched write
  CHECK(f.w->stats().outbox == 0);
}

TEST_CASE(
    "webhooks: registrations and undelivered events survive a reopen (the outbox is written "
    "before the POST)",
    "[webhooks]") {
  Fixture f;
  f.register_("alice", R"(["event://x"])");
  f.event("event://x", R"({"n":1})");
  f.event("event://x", R"({"n":2})");
  const auto id1 = f.sender.sent[0].d.id;
  const auto id2 = f.sender.sent[1].d.id;
  f.sender.answer(200);
  f.scheduler.advance(50ms);  // the delivered one is removed
  // The process goes away with the second POST unanswered.
  f.sender.sent.clear();
  f.interest.clear();
  f.w.reset();
  f.open();
  CHECK(f.w->interest()["srv"] == std::set<std::string>{"event://x"});
  REQUIRE(f.sender.sent.size() == 1);
  CHECK(f.sender.sent[0].d.id == id2);
  CHECK(f.sender.sent[0].d.id != id1);
  CHECK(f.sender.sent[0].d.body.find(R"("payload":{"n":2})") != std::string::npos);
}

TEST_CASE("webhooks: the outbox is bounded in bytes too: past it, events are dead-lettered",
          "[webhooks]") {
  test::TempDir dir;
  test::ManualScheduler scheduler;
  FakeSender sender;
  bridge::WebhookOptions o;
  o.database = dir.path() + "/w.sqlite3";
  o.max_in_flight = 1;
  o.max_outbox_bytes = 4096;
  auto w = Webhooks::open(o, scheduler, sender, {});
  REQUIRE(w);
  REQUIRE((*w)->register_subscription(
      "a", "srv",
      msg(R"({"jsonrpc":"2.0","id":1,"method":"resources/subscriptions/register","params":{"uris":["event://x"],"targetUri":"https://e.com"}})"),
      "https://e.com"));
  const std::string big(1000, 'x');
  for (int i = 0; i < 10; ++i)
    (*w)->on_event(
        "srv",
        msg(R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"event://x","payload":")" +
            big + R"("}})"));
  const auto st = (*w)->stats();
  CHECK(st.outbox < 5);
  CHECK(st.outbox_bytes <= 4096);
  CHECK(st.outbox_bytes > 0);
}

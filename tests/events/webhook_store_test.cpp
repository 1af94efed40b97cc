#include "events/webhook_store.hpp"

#include <catch2/catch.hpp>
#include <sys/stat.h>

#include "events/webhook_signing.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mcpmqtt;
using bridge::WebhookRegistration;
using bridge::WebhookStore;

namespace {

WebhookRegistration registration(const std::string& id) {
  WebhookRegistration r;
  r.id = id;
  r.principal = "p";
  r.server = "srv";
  r.target = "https://example.com/hook?token=x";
  r.secret = "whsec_" + bridge::base64(std::string(32, 'k'));
  r.uris = {"event://a", "event://b/\"quoted\""};
  r.created_ms = 1000;
  r.last_status = "never";
  return r;
}

}  // namespace

TEST_CASE("webhook store: registrations and the outbox survive a reopening, file mode 0600",
          "[webhooks]") {
  test::TempDir dir;
  const std::string path = dir.path() + "/webhooks.sqlite3";
  {
    auto store = WebhookStore::open(path);
    REQUIRE(store);
    auto& s = **store;
    REQUIRE_FALSE(s.insert_registration(registration("r1")));
    REQUIRE_FALSE(s.insert_registration(registration("r2")));
    CHECK(s.insert_registration(registration("r1")));  // the id is taken: SQLite's error
    s.begin();
    std::vector<std::int64_t> seqs;
    for (int i = 0; i < 5; ++i) {
      auto seq = s.insert_event("msg_" + std::to_string(i), i == 4 ? "r2" : "r1",
                                "{\"n\":" + std::to_string(i) + "}", 2000 + i);
      REQUIRE(seq);
      seqs.push_back(*seq);
    }
    s.commit();
    // Two delivered, one dead-lettered.
    std::vector<std::int64_t> delivered = {seqs[1], seqs[0]};
    s.remove_events(delivered, {{seqs[2], "HTTP 503"}}, 3000);
    auto r1 = registration("r1");
    r1.last_status = "delivered (200)";
    r1.last_ms = 4000;
    s.save_statuses({&r1});
    s.delete_registration("r2");
  }
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  auto store = WebhookStore::open(path);
  REQUIRE(store);
  const auto regs = (*store)->load_registrations();
  REQUIRE(regs.size() == 1);
  CHECK(regs[0].id == "r1");
  CHECK(regs[0].uris == registration("r1").uris);
  CHECK(regs[0].key == std::string(32, 'k'));
  CHECK(regs[0].last_status == "delivered (200)");
  CHECK(regs[0].last_ms == 4000);
  CHECK(regs[0].shown_target() == "https://example.com/hook");
  const auto outbox = (*store)->load_outbox();
  REQUIRE(outbox.size() == 1);  // r2's row went with it
  CHECK(outbox[0].msg_id == "msg_3");
  CHECK(outbox[0].registration == "r1");
  CHECK(outbox[0].body == R"({"n":3})");
  CHECK(outbox[0].created_ms == 2003);
}

TEST_CASE("webhook store: an unusable path names the configuration key", "[webhooks]") {
  auto store = WebhookStore::open("/nonexistent-dir/webhooks.sqlite3");
  REQUIRE_FALSE(store);
  CHECK(store.error().find("events.webhooks.database") != std::string::npos);
}

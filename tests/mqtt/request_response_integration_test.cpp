// MQTT 5.0 request / response (§4.10) through mqtt::BrokerConnection, on whichever engine the
// registration chose (MCPMQTT_MQTT_CLIENT): a publication's Response Topic and Correlation Data
// reach the subscriber through a real Mosquitto at every QoS, survive the backlog and the
// Receive Maximum window, and count in the Maximum Packet Size check (a scripted broker that
// announces one and records the packets as they arrive).
#include <chrono>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "mqtt/broker_connection.hpp"
#include "tests/support/engine.hpp"
#include "tests/support/fake_broker.hpp"
#include "tests/support/io.hpp"
#include "tests/support/mosquitto.hpp"
#include "tests/support/test_connection.hpp"

namespace mq = mcpmqtt::mqtt;
using mcpmqtt::test::connection_options;
using mcpmqtt::test::engine_name;
using mcpmqtt::test::engine_under_test;
using mcpmqtt::test::FakeBroker;
using mcpmqtt::test::Inbox;
using mcpmqtt::test::IoThreads;
using mcpmqtt::test::Mosquitto;
using mcpmqtt::test::TestConnection;
using namespace std::chrono_literals;

namespace {

// Correlation Data is binary: a zero byte among others must come through as it went.
const std::string kCorrelation("\x00id\xFF\x00", 5);

mq::PublishOptions request_options(std::string response_topic, std::string correlation_data) {
  mq::PublishOptions o;
  o.response_topic = std::move(response_topic);
  o.correlation_data = std::move(correlation_data);
  return o;
}

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void subscribe_ok(TestConnection& c, const std::string& filter) {
  auto r = c.subscribe(filter);
  REQUIRE(r);
  INFO(r->why);
  REQUIRE(r->ok);
}

}  // namespace

TEST_CASE(
    "Response Topic and binary Correlation Data (MQTT 5.0 §4.10) reach the subscriber intact at "
    "QoS 0, 1 and 2 through Mosquitto, the answer sent to the Response Topic comes back with the "
    "Correlation Data, and a publication without them arrives without them",
    "[mqtt][response]") {
  const int qos = GENERATE(0, 1, 2);
  INFO("engine " << engine_name(engine_under_test()) << ", mqtt.qos " << qos);
  Mosquitto broker;
  IoThreads io;
  auto requester_options = connection_options(broker.url(), "requester");
  requester_options.broker.qos = qos;
  auto responder_options = connection_options(broker.url(), "responder");
  responder_options.broker.qos = qos;
  TestConnection requester(io, requester_options);
  TestConnection responder(io, responder_options);
  requester.wait_connected();
  responder.wait_connected();
  const std::string reply_topic = "rr/replies/" + requester_options.client_id;
  subscribe_ok(responder, "rr/requests");
  subscribe_ok(requester, reply_topic);

  auto sent = requester.publish("rr/requests", "ask", request_options(reply_topic, kCorrelation));
  REQUIRE(sent);
  INFO(sent->why);
  REQUIRE(sent->ok);
  auto request = responder.events().messages.pop();
  REQUIRE(request);
  CHECK(request->payload == "ask");
  CHECK(request->qos == qos);
  CHECK(request->response_topic == reply_topic);
  CHECK(request->correlation_data == kCorrelation);

  REQUIRE(request->response_topic);
  REQUIRE(request->correlation_data);
  auto answered = responder.publish(*request->response_topic, "answer",
                                    request_options("", *request->correlation_data));
  REQUIRE(answered);
  CHECK(answered->ok);
  auto answer = requester.events().messages.pop();
  REQUIRE(answer);
  CHECK(answer->topic == reply_topic);
  CHECK(answer->payload == "answer");
  CHECK(answer->correlation_data == kCorrelation);
  CHECK_FALSE(answer->response_topic);

  auto plain = requester.publish("rr/requests", "plain");
  REQUIRE(plain);
  CHECK(plain->ok);
  auto without = responder.events().messages.pop();
  REQUIRE(without);
  CHECK(without->payload == "plain");
  CHECK_FALSE(without->response_topic);
  CHECK_FALSE(without->correlation_data);
}

// Publications made before the connection is up wait in the backlog; with a Receive Maximum of
// 1 (MQTT 5.0 §4.9) most of a burst waits in the window. Each keeps its own properties.
TEST_CASE(
    "publications made while disconnected, and those that wait for the broker's Receive "
    "Maximum, keep their Response Topic and Correlation Data",
    "[mqtt][response]") {
  INFO("engine " << engine_name(engine_under_test()));
  Mosquitto::Options bo;
  bo.extra_config = "max_inflight_messages 1\n";
  Mosquitto broker(bo);
  IoThreads io;
  TestConnection responder(io, connection_options(broker.url(), "responder"));
  responder.wait_connected();
  subscribe_ok(responder, "rr/queued/#");

  TestConnection requester(io, connection_options(broker.url(), "requester"), false);
  auto results = std::make_shared<Inbox<bool>>();
  auto publish_some = [&](int from, int to) {
    io.run(requester.strand(), [&] {
      for (int i = from; i < to; ++i) {
        requester.connection().publish(
            "rr/queued/" + std::to_string(i), std::make_shared<const std::string>("q"),
            request_options("rr/reply/" + std::to_string(i), kCorrelation + std::to_string(i)),
            [results](bool ok, const std::string&) { results->push(ok); });
      }
      // One without them among them, for contrast.
      requester.connection().publish("rr/queued/plain", std::make_shared<const std::string>("p"),
                                     false,
                                     [results](bool ok, const std::string&) { results->push(ok); });
    });
  };
  constexpr int kBacklog = 5, kBurst = 30;
  publish_some(0, kBacklog);  // not connected yet: the backlog
  requester.connect();
  REQUIRE(requester.wait_connected().info.receive_maximum == 1);
  publish_some(kBacklog, kBurst);  // the window

  for (int i = 0; i < kBurst + 2; ++i) {
    auto ok = results->pop();
    REQUIRE(ok);
    CHECK(*ok);
  }
  int plain = 0;
  for (int i = 0; i < kBurst;) {
    auto m = responder.events().messages.pop();
    REQUIRE(m);
    if (m->topic == "rr/queued/plain") {
      ++plain;
      CHECK_FALSE(m->response_topic);
      CHECK_FALSE(m->correlation_data);
      continue;
    }
    INFO(m->topic);
    CHECK(m->topic == "rr/queued/" + std::to_string(i));  // in order
    CHECK(m->response_topic == "rr/reply/" + std::to_string(i));
    CHECK(m->correlation_data == kCorrelation + std::to_string(i));
    ++i;
  }
  if (plain < 2) {
    auto m = responder.events().messages.pop();
    REQUIRE(m);
    CHECK(m->topic == "rr/queued/plain");
  }
}

// MQTT 5.0 §3.2.2.3.6: the size a publication has as a packet includes its properties. The
// scripted broker records each packet's size as it arrives: what was checked is what was sent.
TEST_CASE(
    "the Maximum Packet Size check counts Response Topic and Correlation Data: a publication "
    "whose packet is exactly the broker's maximum goes, one byte more fails at once naming both "
    "sizes",
    "[mqtt][response][size]") {
  INFO("engine " << engine_name(engine_under_test()));
  FakeBroker broker;
  constexpr std::size_t kMax = 400;
  broker.announce_maximum_packet_size(kMax);
  IoThreads io;
  TestConnection c(io, connection_options(broker.url(), "rrsize"));
  REQUIRE(c.wait_connected().info.maximum_packet_size == kMax);
  const auto options = request_options("rr/reply/" + std::string(40, 'r'), kCorrelation + "0123");

  const std::size_t probe_payload = 50;
  auto probe = c.publish("rr/size", std::string(probe_payload, 'p'), options);
  REQUIRE(probe);
  REQUIRE(probe->ok);
  auto probe_packet = broker.publish(0);
  REQUIRE(probe_packet);
  CHECK(probe_packet->response_topic == options.response_topic);
  CHECK(probe_packet->correlation_data == options.correlation_data);
  CHECK(probe_packet->payload == std::string(probe_payload, 'p'));
  // Both have a Remaining Length of two bytes: the payload makes up the difference exactly.
  REQUIRE(probe_packet->packet_size > 130);
  REQUIRE(probe_packet->packet_size < kMax);
  const std::size_t fits = probe_payload + kMax - probe_packet->packet_size;

  auto exact = c.publish("rr/size", std::string(fits, 'f'), options);
  REQUIRE(exact);
  INFO(exact->why);
  CHECK(exact->ok);
  auto exact_packet = broker.publish(1);
  REQUIRE(exact_packet);
  CHECK(exact_packet->packet_size == kMax);
  CHECK(exact_packet->correlation_data == options.correlation_data);

  const auto started = std::chrono::steady_clock::now();
  auto over = c.publish("rr/size", std::string(fits + 1, 'o'), options);
  REQUIRE(over);
  CHECK(std::chrono::steady_clock::now() - started < 2s);
  INFO(over->why);
  CHECK_FALSE(over->ok);
  CHECK(mentions(over->why, "Maximum Packet Size"));
  CHECK(mentions(over->why, std::to_string(kMax + 1) + " bytes"));
  CHECK(mentions(over->why, "at most " + std::to_string(kMax)));
  CHECK_FALSE(broker.publish(2, 300ms));
  CHECK(c.connected());
}

// A broker ends the connection over a PUBLISH with a wildcard in its Response Topic
// (§3.3.2.3.5 [MQTT-3.3.2-14]); a string over 65,535 bytes cannot be encoded at all.
TEST_CASE(
    "a Response Topic that is no topic name, or a Correlation Data over 65,535 bytes, fails the "
    "publication at once, nothing is sent, and the connection stays up",
    "[mqtt][response]") {
  INFO("engine " << engine_name(engine_under_test()));
  FakeBroker broker;
  IoThreads io;
  TestConnection c(io, connection_options(broker.url(), "rrbad"));
  c.wait_connected();

  auto wildcard = c.publish("rr/in", "x", request_options("rr/+/reply", kCorrelation));
  REQUIRE(wildcard);
  INFO(wildcard->why);
  CHECK_FALSE(wildcard->ok);
  CHECK(mentions(wildcard->why, "rr/+/reply"));
  CHECK(mentions(wildcard->why, "not a topic name"));

  auto huge = c.publish("rr/in", "x", request_options("rr/reply", std::string(65536, 'c')));
  REQUIRE(huge);
  INFO(huge->why);
  CHECK_FALSE(huge->ok);
  CHECK(mentions(huge->why, "Correlation Data (65536 bytes)"));

  auto fine = c.publish("rr/in", "x", request_options("rr/reply", kCorrelation));
  REQUIRE(fine);
  CHECK(fine->ok);
  auto only = broker.publish(0);
  REQUIRE(only);
  CHECK(only->response_topic == "rr/reply");
  CHECK_FALSE(broker.publish(1, 300ms));
  CHECK(c.connected());
}

// The native engine's MQTT 5.0 client protocol (protocol::ClientProtocol) against a scripted
// broker on a virtual clock: no socket, thread or real time. The broker is the machine's Io: it
// records every packet the client writes, hands it the bytes a test scripts, completes each read
// and write when the test lets time pass, and fires the one timer when the virtual clock reaches
// it. Broker packets are written by hand from the standard (tests/support wire helpers); client
// packets are taken apart here, without the codec under test.
#include "mqtt/protocol/client_protocol.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/fake_broker.hpp"

namespace mq = mcpmqtt::mqtt;
using mcpmqtt::mqtt::protocol::ClientProtocol;
using namespace mcpmqtt::test::wire;
using namespace std::chrono_literals;

namespace {

using Clock = ClientProtocol::Clock;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// MQTT 5.0 §2.1.2: control packet types.
enum Type {
  kConnect = 1,
  kConnack,
  kPublish,
  kPuback,
  kPubrec,
  kPubrel,
  kPubcomp,
  kSubscribe,
  kSuback,
  kUnsubscribe,
  kUnsuback,
  kPingreq,
  kPingresp,
  kDisconnect
};

// A packet the client wrote.
struct Sent {
  int type = 0;
  int flags = 0;  // the low nibble of the first byte
  std::string body;

  std::size_t u16_at(std::size_t at) const {
    return (static_cast<unsigned char>(body.at(at)) << 8) |
           static_cast<unsigned char>(body.at(at + 1));
  }
  int qos() const { return (flags >> 1) & 3; }
  // PUBLISH: the topic; its packet identifier when QoS > 0; the payload after the properties.
  std::string topic() const { return body.substr(2, u16_at(0)); }
  std::size_t packet_id() const {
    if (type == kPublish) return u16_at(2 + topic().size());
    return u16_at(0);
  }
  std::string payload() const {
    const auto [at, length] = property_block();
    return body.substr(at + length);
  }
  // PUBLISH: the properties, without their length.
  std::string properties() const {
    const auto [at, length] = property_block();
    return body.substr(at, length);
  }
  // PUBLISH: where the properties start and how long they are.
  std::pair<std::size_t, std::size_t> property_block() const {
    std::size_t at = 2 + topic().size() + (qos() ? 2 : 0);
    std::size_t length = 0, shift = 0;
    unsigned char b = 0;
    do {
      b = static_cast<unsigned char>(body.at(at++));
      length |= static_cast<std::size_t>(b & 0x7F) << shift;
      shift += 7;
    } while (b & 0x80);
    return {at, length};
  }
  // Acknowledgements and DISCONNECT: 0x00 when the body leaves it out (§3.4.2.1, §3.14.2.1).
  int reason_code() const {
    const std::size_t at = type == kDisconnect ? 0 : 2;
    return body.size() > at ? static_cast<unsigned char>(body[at]) : 0;
  }
};

// The properties of a PUBLISH a client may send (MQTT 5.0 §3.3.2.3), taken apart by hand.
struct SentProperties {
  std::optional<std::string> response_topic;    // 0x08
  std::optional<std::string> correlation_data;  // 0x09
  std::vector<std::pair<std::string, std::string>> user;
};
SentProperties sent_properties(const Sent& publish) {
  const std::string block = publish.properties();
  SentProperties out;
  std::size_t at = 0;
  auto string = [&] {
    const std::size_t n = (static_cast<unsigned char>(block.at(at)) << 8) |
                          static_cast<unsigned char>(block.at(at + 1));
    at += 2;
    auto s = block.substr(at, n);
    REQUIRE(s.size() == n);
    at += n;
    return s;
  };
  while (at < block.size()) {
    const int id = static_cast<unsigned char>(block[at++]);
    if (id == 0x08) {
      REQUIRE_FALSE(out.response_topic);
      out.response_topic = string();
    } else if (id == 0x09) {
      REQUIRE_FALSE(out.correlation_data);
      out.correlation_data = string();
    } else if (id == 0x26) {
      auto key = string();
      out.user.emplace_back(key, string());
    } else {
      FAIL("a property a PUBLISH of ours should not carry: " << id);
    }
  }
  return out;
}

// MQTT 5.0 §3.2: CONNACK with a reason code and a property block (already encoded).
std::string connack(int reason = 0, const std::string& props = "") {
  return packet(0x20, std::string(1, '\0') + char(reason) + varint(props.size()) + props);
}
std::string u16_property(int id, std::size_t v) {
  return char(id) + u16(v);
}
std::string string_property(int id, const std::string& s) {
  return char(id) + utf8(s);
}
// PUBACK, PUBREC, PUBREL (flags 0x2), PUBCOMP with a reason code and no properties.
std::string ack(int type, std::size_t id, int reason = 0) {
  const unsigned char first = static_cast<unsigned char>(type << 4 | (type == kPubrel ? 2 : 0));
  return packet(first, u16(id) + (reason ? std::string(1, char(reason)) : ""));
}
std::string publish(const std::string& topic, const std::string& payload, int qos,
                    std::size_t id = 0, const std::string& props = "", bool dup = false) {
  const unsigned char first = static_cast<unsigned char>(0x30 | (dup ? 8 : 0) | qos << 1);
  return packet(first, utf8(topic) + (qos ? u16(id) : "") + varint(props.size()) + props + payload);
}
// A publication of ours, without user properties.
mq::PublishRequest outgoing(const std::string& topic, const std::string& payload, int qos) {
  mq::PublishRequest r;
  r.topic = topic;
  r.payload = std::make_shared<const std::string>(payload);
  r.qos = qos;
  return r;
}
std::string alias(int n) {
  return u16_property(0x23, static_cast<std::size_t>(n));
}

mq::EngineConnect default_params() {
  mq::EngineConnect p;
  p.host = "broker.invalid";
  p.client_id = "scripted";
  p.keep_alive_s = 30;
  p.topic_alias_maximum = 64;
  return p;
}

struct Message {
  std::string topic, payload;
  int qos;
  std::optional<std::string> response_topic, correlation_data;
};

// The scripted broker and the virtual clock, as the protocol's Io. Nothing happens on its own:
// settle() completes what the protocol asked (posted completions, the write, the read) until it
// asks nothing more; advance() moves the clock and fires the timer on the way.
class ScriptedBroker final : public ClientProtocol::Io {
 public:
  explicit ScriptedBroker(mq::EngineConnect params = default_params()) {
    ClientProtocol::Events ev;
    ev.on_message = [this](const mq::ReceivedMessage& m) {
      Message msg{std::string(m.topic), *m.payload, m.qos, std::nullopt, std::nullopt};
      if (m.response_topic) msg.response_topic = std::string(*m.response_topic);
      if (m.correlation_data) msg.correlation_data = std::string(*m.correlation_data);
      messages.push_back(std::move(msg));
      sent_at_delivery.push_back(sent_.size() + (write_pending_ ? 1 : 0));
      // The delivery's next step, as an owner's strand would run it: was the next read already
      // started when it ran?
      posted_.push_back([this] { read_started_at_onward.push_back(read_into_ != nullptr); });
    };
    ev.on_lost = [this](const std::string& why) {
      lost.push_back(why);
      lost_at.push_back(elapsed());
    };
    client_.emplace(*this, std::move(params), std::move(ev));
  }

  ClientProtocol& client() { return *client_; }

  // Starts the attempt and opens the transport: CONNECT goes out.
  void begin() {
    client_->start([this](const mq::ConnectOutcome& o) { outcome = o; });
    REQUIRE(opened_);
    client_->on_transport_ready(true, {});
    settle();
  }
  // Opens, takes the CONNECT and answers it with `answer` (a CONNACK by default).
  Sent connect(const std::string& answer = connack()) {
    begin();
    auto sent = take();
    REQUIRE(sent.size() == 1);
    REQUIRE(sent[0].type == kConnect);
    send(answer);
    return sent[0];
  }

  // Bytes from the broker, read by the client.
  void send(const std::string& bytes) {
    to_client_ += bytes;
    settle();
  }
  // The broker closes its side: the client's read ends.
  void close_connection() {
    eof_ = true;
    settle();
  }
  // The packets the client wrote since the last take().
  std::vector<Sent> take() {
    std::vector<Sent> out(sent_.begin(), sent_.end());
    sent_.clear();
    return out;
  }
  std::vector<Sent> take(int type) {
    std::vector<Sent> out;
    for (auto& s : take())
      if (s.type == type) out.push_back(s);
    return out;
  }

  void advance(Clock::duration d) {
    const auto until = now_ + d;
    int at_one_instant = 0;
    while (timer_ && *timer_ <= until) {
      // A timer armed again and again for a time already past would spin the strand.
      at_one_instant = *timer_ <= now_ ? at_one_instant + 1 : 0;
      if (at_one_instant > 100) FAIL("the protocol's timer fires again and again at one instant");
      now_ = std::max(now_, *timer_);
      timer_.reset();
      client_->on_timer();
      settle();
    }
    now_ = until;
  }
  Clock::duration elapsed() const { return now_ - start_; }

  // Completes everything the protocol asked that can complete now.
  void settle() {
    for (bool progress = true; progress;) {
      progress = false;
      if (!posted_.empty()) {
        auto fn = std::move(posted_.front());
        posted_.pop_front();
        fn();
        progress = true;
      } else if (write_pending_) {
        write_pending_ = false;
        if (io_closed_) {
          client_->on_written(ClientProtocol::WriteResult::aborted,
                              "writing to the broker failed: Operation canceled");
        } else {
          record(written_);
          written_.clear();
          client_->on_written(ClientProtocol::WriteResult::ok, {});
        }
        progress = true;
      } else if (read_into_ && (io_closed_ || eof_ || !to_client_.empty())) {
        auto* into = read_into_;
        read_into_ = nullptr;
        if (io_closed_) {
          client_->on_read_failed("the connection failed: Operation canceled");
        } else if (!to_client_.empty()) {
          const auto n = std::min(read_size_, to_client_.size());
          std::copy_n(to_client_.data(), n, into);
          to_client_.erase(0, n);
          client_->on_read(n);
        } else {
          client_->on_read_failed("the broker closed the connection");
        }
        progress = true;
      }
    }
  }

  // PINGREQs get PINGRESP as they come (a broker that is alive).
  bool answer_pings = false;
  std::optional<mq::ConnectOutcome> outcome;
  std::vector<std::string> lost;
  std::vector<Clock::duration> lost_at;  // elapsed() at each loss
  std::vector<Message> messages;
  // How many packets had been written (or were being written) as each message was delivered.
  std::vector<std::size_t> sent_at_delivery;
  std::vector<bool> read_started_at_onward;
  std::size_t writes = 0;  // write() calls: one per batch of packets
  std::size_t pings = 0;

  bool io_closed() const { return io_closed_; }
  bool finished() const { return finished_; }
  std::optional<Clock::time_point> timer() const { return timer_; }

 private:
  // ---- ClientProtocol::Io
  Clock::time_point now() override { return now_; }
  void open() override { opened_ = true; }
  void read(char* data, std::size_t size) override {
    REQUIRE_FALSE(read_into_);
    read_into_ = data;
    read_size_ = size;
  }
  void write(std::span<const std::string_view> buffers) override {
    REQUIRE_FALSE(write_pending_);
    ++writes;
    for (auto b : buffers)
      written_.append(b);
    write_pending_ = true;
  }
  void finish() override { finished_ = true; }
  void close() override { io_closed_ = true; }
  void arm_timer(Clock::time_point at) override { timer_ = at; }
  void cancel_timer() override { timer_.reset(); }
  void post(std::function<void()> fn) override { posted_.push_back(std::move(fn)); }
  void record(const std::string& bytes) {
    std::size_t at = 0;
    while (at < bytes.size()) {
      Sent s;
      const auto first = static_cast<unsigned char>(bytes[at++]);
      s.type = first >> 4;
      s.flags = first & 0x0F;
      std::size_t length = 0, shift = 0;
      unsigned char b = 0;
      do {
        b = static_cast<unsigned char>(bytes.at(at++));
        length |= static_cast<std::size_t>(b & 0x7F) << shift;
        shift += 7;
      } while (b & 0x80);
      s.body = bytes.substr(at, length);
      at += length;
      if (s.type == kPingreq) {
        ++pings;
        if (answer_pings) to_client_ += packet(0xD0, "");
      }
      sent_.push_back(std::move(s));
    }
  }

  std::optional<ClientProtocol> client_;
  const Clock::time_point start_ = Clock::time_point{} + 1000h;
  Clock::time_point now_ = start_;
  bool opened_ = false;
  bool io_closed_ = false;
  bool finished_ = false;
  bool eof_ = false;
  char* read_into_ = nullptr;
  std::size_t read_size_ = 0;
  std::string to_client_;
  bool write_pending_ = false;
  std::string written_;
  std::deque<Sent> sent_;
  std::deque<std::function<void()>> posted_;
  std::optional<Clock::time_point> timer_;
};

}  // namespace

// ---- the connect sequence -----------------------------------------------------------------------

TEST_CASE(
    "client protocol connect (MQTT 5.0 §3.1, §3.2): CONNECT once the transport is open, CONNACK "
    "completes the attempt with the broker's limits",
    "[mqtt][protocol]") {
  auto params = default_params();
  params.keep_alive_s = 7;
  params.receive_maximum = 10;
  ScriptedBroker broker(params);
  broker.begin();
  auto sent = broker.take();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].type == kConnect);
  CHECK(sent[0].body.substr(0, 7) == std::string("\0\4MQTT\5", 7));
  CHECK(sent[0].u16_at(8) == 7u);  // Keep Alive
  CHECK_FALSE(broker.outcome);
  CHECK_FALSE(broker.client().connected());
  CHECK(broker.client().active());

  broker.send(
      connack(0, u16_property(0x21, 3) + u16_property(0x22, 5) + string_property(0x1F, "welcome")));
  REQUIRE(broker.outcome);
  INFO(broker.outcome->why);
  CHECK(broker.outcome->ok);
  CHECK(broker.outcome->connack.receive_maximum == 3);
  CHECK(broker.outcome->connack.topic_alias_maximum == 5);
  CHECK(broker.outcome->connack.reason_string == "welcome");
  CHECK(broker.client().connected());
}

TEST_CASE(
    "client protocol CONNACK refusal (MQTT 5.0 §3.2.2.2): the attempt fails with the broker's "
    "reason code and reason string, and the transport closes",
    "[mqtt][protocol]") {
  struct Case {
    int code;
    const char* name;
  };
  const auto k =
      GENERATE(Case{0x86, "Bad User Name or Password (0x86)"}, Case{0x87, "Not authorized (0x87)"},
               Case{0x8A, "Banned (0x8A)"}, Case{0x9F, "Connection rate exceeded (0x9F)"});
  ScriptedBroker broker;
  broker.connect(connack(k.code, string_property(0x1F, "go away")));
  REQUIRE(broker.outcome);
  INFO(broker.outcome->why);
  CHECK_FALSE(broker.outcome->ok);
  CHECK(broker.outcome->reason_code == k.code);
  CHECK(contains(broker.outcome->why, "the broker refused the connection"));
  CHECK(contains(broker.outcome->why, "go away"));
  CHECK(contains(broker.outcome->why, k.name));
  CHECK(broker.io_closed());
  CHECK_FALSE(broker.client().active());
  CHECK(broker.lost.empty());
}

TEST_CASE(
    "client protocol connect deadline: a transport that never opens, or a broker that never "
    "sends CONNACK, fails the attempt at the connect timeout of the virtual clock",
    "[mqtt][protocol]") {
  auto params = default_params();
  params.connect_timeout = 4000ms;
  ScriptedBroker broker(params);
  SECTION("the transport never opens") {
    broker.client().start([&](const mq::ConnectOutcome& o) { broker.outcome = o; });
    broker.advance(3999ms);
    CHECK_FALSE(broker.outcome);
    broker.advance(1ms);
    REQUIRE(broker.outcome);
    CHECK(broker.outcome->why == "could not connect within 4 s");
  }
  SECTION("no CONNACK") {
    broker.begin();
    broker.advance(3999ms);
    CHECK_FALSE(broker.outcome);
    broker.advance(1ms);
    REQUIRE(broker.outcome);
    CHECK(broker.outcome->why == "no CONNACK from the broker within 4 s");
  }
  CHECK_FALSE(broker.outcome->ok);
  CHECK(broker.io_closed());
}

// ---- keep-alive ---------------------------------------------------------------------------------

// MQTT 5.0 §3.1.2.10: the client sends PINGREQ when it has sent nothing for a Keep Alive period;
// a broker silent for one and a half of them is gone, as a broker treats its clients.
TEST_CASE(
    "client protocol keep-alive (MQTT 5.0 §3.1.2.10): a broker answering PINGREQ keeps the "
    "connection, one gone silent is lost 1.5 keep-alive periods after it last spoke",
    "[mqtt][protocol][keepalive]") {
  auto params = default_params();
  params.keep_alive_s = 2;
  ScriptedBroker broker(params);
  broker.connect();
  broker.answer_pings = true;

  // An hour idle lives on PINGREQ and PINGRESP alone: one every keep-alive period.
  broker.advance(1h);
  CHECK(broker.pings == 1800);
  CHECK(broker.lost.empty());
  CHECK(broker.client().connected());
  broker.take();

  // Traffic both ways puts the next PINGREQ off.
  broker.advance(1500ms);
  broker.client().publish(outgoing("t", "x", 0), {});
  broker.send(publish("in", "x", 0));
  broker.advance(1900ms);
  CHECK(broker.take(kPingreq).empty());
  broker.advance(100ms);
  CHECK(broker.take(kPingreq).size() == 1);

  broker.answer_pings = false;
  const auto silent_at = broker.elapsed();  // the last PINGRESP came just now
  broker.advance(10s);
  REQUIRE(broker.lost.size() == 1);
  INFO(broker.lost[0]);
  CHECK(broker.lost[0] == "nothing from the broker for 3 s (keep-alive 2 s)");
  CHECK(broker.lost_at[0] - silent_at == 3s);
  CHECK(broker.io_closed());
  CHECK_FALSE(broker.client().connected());
  // A PINGREQ went out meanwhile, and no DISCONNECT (the connection is dead; the broker sends
  // the will).
  CHECK_FALSE(broker.timer());
  const auto sent = broker.take();
  CHECK(std::count_if(sent.begin(), sent.end(), [](const Sent& s) { return s.type == kPingreq; }) ==
        1);
  CHECK(
      std::none_of(sent.begin(), sent.end(), [](const Sent& s) { return s.type == kDisconnect; }));
}

TEST_CASE(
    "client protocol keep-alive: the broker's Server Keep Alive (MQTT 5.0 §3.2.2.3.14) replaces "
    "ours, and a keep-alive of 0 sends no PINGREQ",
    "[mqtt][protocol][keepalive]") {
  SECTION("Server Keep Alive 5 s over our 30 s") {
    ScriptedBroker broker;
    broker.connect(connack(0, u16_property(0x13, 5)));
    REQUIRE(broker.outcome);
    CHECK(broker.outcome->connack.server_keep_alive == 5);
    broker.answer_pings = true;
    broker.advance(4999ms);
    CHECK(broker.pings == 0);
    broker.advance(1ms);
    CHECK(broker.pings == 1);
    broker.advance(50s);
    CHECK(broker.pings == 11);
  }
  SECTION("Keep Alive 0") {
    auto params = default_params();
    params.keep_alive_s = 0;
    ScriptedBroker broker(params);
    broker.connect();
    broker.advance(24h);
    CHECK(broker.pings == 0);
    CHECK(broker.lost.empty());
    CHECK(broker.client().connected());
  }
}

TEST_CASE(
    "client protocol keep-alive on a grid (issue 34): connections opened at different moments "
    "ping at the same step, never later than the Keep Alive (MQTT 5.0 §3.1.2.10), and a silent "
    "broker is lost at the step after 1.5 periods, never before",
    "[mqtt][protocol][keepalive]") {
  auto params = default_params();
  params.keep_alive_s = 30;
  params.keep_alive_grid = 1s;
  // The scripted clock starts on a whole second: these connect 300 and 800 ms after one.
  ScriptedBroker early(params), late(params);
  early.advance(300ms);
  late.advance(800ms);
  early.connect();
  late.connect();
  early.answer_pings = late.answer_pings = true;
  REQUIRE(early.timer());
  REQUIRE(late.timer());
  // Their CONNECTs went out 30.3 and 30.8 s before these deadlines; both ping at the 30 s step.
  CHECK(*early.timer() == *late.timer());
  early.advance(30s - 300ms - 1ms);
  CHECK(early.pings == 0);
  early.advance(1ms);
  CHECK(early.pings == 1);
  late.advance(30s - 800ms);
  CHECK(late.pings == 1);

  // An hour idle: one PINGREQ a period, every one of them on the step both share.
  early.advance(1h);
  late.advance(1h);
  CHECK(early.pings == 121);
  CHECK(late.pings == 121);
  CHECK(*early.timer() == *late.timer());
  CHECK(early.lost.empty());

  // Traffic both ways 400 ms past a step: the next PINGREQ goes at the step before its period
  // ends, 29.6 s later.
  early.advance(10s + 400ms);
  early.client().publish(outgoing("t", "x", 0), {});
  early.send(publish("in", "x", 0));
  early.take();
  early.advance(29s);
  CHECK(early.take(kPingreq).empty());
  early.advance(600ms);
  CHECK(early.take(kPingreq).size() == 1);

  // Silent from 400 ms past a step: lost at the step after 45 s, not before.
  early.answer_pings = false;
  early.advance(1s + 400ms);
  early.send(publish("in", "x", 0));
  const auto silent_at = early.elapsed();
  early.advance(2min);
  REQUIRE(early.lost.size() == 1);
  CHECK(early.lost[0] == "nothing from the broker for 45 s (keep-alive 30 s)");
  CHECK(early.lost_at[0] - silent_at >= 45s);
  CHECK(early.lost_at[0] - silent_at < 46s);
}

// ---- QoS 1 and 2, both ways ---------------------------------------------------------------------

TEST_CASE(
    "client protocol QoS 1 (MQTT 5.0 §4.3.2): our PUBLISH completes on PUBACK (a failure reason "
    "code fails it), the broker's gets PUBACK once delivered",
    "[mqtt][protocol][qos1]") {
  ScriptedBroker broker;
  broker.connect();
  std::vector<mq::AckOutcome> acks;
  auto record = [&](const mq::AckOutcome& a) { acks.push_back(a); };
  for (const char* payload : {"one", "two"}) {
    broker.client().publish(outgoing("out/q1", payload, 1), record);
  }
  broker.settle();
  auto sent = broker.take(kPublish);
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].qos() == 1);
  CHECK(sent[0].topic() == "out/q1");
  CHECK(sent[0].payload() == "one");
  CHECK(sent[1].payload() == "two");
  CHECK(sent[0].packet_id() != sent[1].packet_id());
  CHECK(acks.empty());

  broker.send(ack(kPuback, sent[1].packet_id(), 0x87));
  REQUIRE(acks.size() == 1);
  CHECK_FALSE(acks[0].ok);
  CHECK(contains(acks[0].why, "the broker refused the publication: Not authorized (0x87)"));
  broker.send(ack(kPuback, sent[0].packet_id()));
  REQUIRE(acks.size() == 2);
  CHECK(acks[1].ok);
  // An acknowledgement nothing waits for any more is ignored.
  broker.send(ack(kPuback, sent[0].packet_id()));
  CHECK(acks.size() == 2);
  CHECK(broker.client().connected());

  broker.send(publish("in/q1", "hello", 1, 42));
  REQUIRE(broker.messages.size() == 1);
  CHECK(broker.messages[0].topic == "in/q1");
  CHECK(broker.messages[0].payload == "hello");
  CHECK(broker.messages[0].qos == 1);
  auto pubacks = broker.take(kPuback);
  REQUIRE(pubacks.size() == 1);
  CHECK(pubacks[0].packet_id() == 42u);
  CHECK(pubacks[0].reason_code() == 0);

  // Issue 34: the message is handed on before its PUBACK is written (the acknowledgement is not
  // on the message's path), and the PUBACKs of what one read brought go out in one write.
  // The next read is not started before the delivery's next step either: its first attempt
  // (EAGAIN, mostly) would delay the message.
  broker.sent_at_delivery.clear();
  broker.read_started_at_onward.clear();
  const auto writes = broker.writes;
  broker.send(publish("in/a", "1", 1, 43) + publish("in/b", "2", 1, 44) + publish("in/c", "3", 0));
  REQUIRE(broker.messages.size() == 4);
  CHECK(broker.sent_at_delivery == std::vector<std::size_t>{0, 0, 0});
  CHECK(broker.read_started_at_onward == std::vector<bool>{false, false, false});
  broker.send(publish("in/d", "4", 0));
  REQUIRE(broker.messages.size() == 5);
  CHECK(broker.read_started_at_onward == std::vector<bool>{false, false, false, false});
  CHECK(broker.client().connected());
  pubacks = broker.take(kPuback);
  REQUIRE(pubacks.size() == 2);
  CHECK(pubacks[0].packet_id() == 43u);
  CHECK(pubacks[1].packet_id() == 44u);
  CHECK(broker.writes == writes + 1);
}

TEST_CASE(
    "client protocol QoS 2 sender (MQTT 5.0 §4.3.3): PUBREC gets PUBREL and PUBCOMP completes, "
    "a PUBREC with a failure code ends the exchange, a second PUBREC after release breaks the "
    "protocol",
    "[mqtt][protocol][qos2]") {
  ScriptedBroker broker;
  broker.connect();
  std::vector<mq::AckOutcome> acks;
  auto record = [&](const mq::AckOutcome& a) { acks.push_back(a); };
  broker.client().publish(outgoing("out/q2", "x", 2), record);
  broker.settle();
  auto sent = broker.take(kPublish);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].qos() == 2);
  const auto id = sent[0].packet_id();

  SECTION("PUBREC, PUBREL, PUBCOMP") {
    broker.send(ack(kPubrec, id));
    auto rel = broker.take();
    REQUIRE(rel.size() == 1);
    CHECK(rel[0].type == kPubrel);
    CHECK(rel[0].flags == 2);
    CHECK(rel[0].packet_id() == id);
    CHECK(acks.empty());
    broker.send(ack(kPubcomp, id));
    REQUIRE(acks.size() == 1);
    CHECK(acks[0].ok);
    CHECK(broker.client().connected());
  }
  SECTION("PUBREC with a failure reason code") {
    broker.send(ack(kPubrec, id, 0x97));
    REQUIRE(acks.size() == 1);
    CHECK_FALSE(acks[0].ok);
    CHECK(contains(acks[0].why, "Quota exceeded (0x97)"));
    CHECK(broker.take().empty());  // no PUBREL
  }
  SECTION("a duplicate PUBREC once released") {
    broker.send(ack(kPubrec, id));
    broker.take();
    broker.send(ack(kPubrec, id));
    REQUIRE(broker.lost.size() == 1);
    CHECK(contains(broker.lost[0], "does not match the packet identifier's publication"));
    auto d = broker.take(kDisconnect);
    REQUIRE(d.size() == 1);
    CHECK(d[0].reason_code() == 0x82);
    REQUIRE(acks.size() == 1);
    CHECK_FALSE(acks[0].ok);
  }
}

// MQTT 5.0 §4.3.3: a QoS 2 PUBLISH the broker sends again (DUP) before it released the first is
// not delivered twice; each copy gets PUBREC, PUBREL gets PUBCOMP, and the packet identifier is
// free for a new message afterwards.
TEST_CASE(
    "client protocol QoS 2 receiver (MQTT 5.0 §4.3.3): a PUBLISH sent again before PUBREL is "
    "delivered once, PUBREL gets PUBCOMP, a PUBREL sent again gets Packet Identifier not found",
    "[mqtt][protocol][qos2]") {
  ScriptedBroker broker;
  broker.connect();
  broker.send(publish("qos2/dup", "once", 2, 7));
  REQUIRE(broker.messages.size() == 1);
  CHECK(broker.messages[0].payload == "once");
  CHECK(broker.messages[0].qos == 2);
  broker.send(publish("qos2/dup", "once", 2, 7, "", true));  // DUP
  broker.send(ack(kPubrel, 7));
  CHECK(broker.messages.size() == 1);
  auto acks = broker.take();
  REQUIRE(acks.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(acks[i].packet_id() == 7u);
    CHECK(acks[i].reason_code() == 0);
    CHECK(acks[i].type == (i < 2 ? kPubrec : kPubcomp));
  }
  // Released: a PUBREL sent again is answered, not acted on (§4.3.3).
  broker.send(ack(kPubrel, 7));
  auto again = broker.take();
  REQUIRE(again.size() == 1);
  CHECK(again[0].type == kPubcomp);
  CHECK(again[0].reason_code() == 0x92);
  // Identifier 7 now carries a new message.
  broker.send(publish("qos2/dup", "again", 2, 7));
  REQUIRE(broker.messages.size() == 2);
  CHECK(broker.messages[1].payload == "again");
  CHECK(broker.lost.empty());
}

// ---- request / response properties --------------------------------------------------------------

// MQTT 5.0 §4.10: Response Topic and Correlation Data differ with every request, while the user
// properties stay the connection's: each PUBLISH carries its own, and one without them none.
TEST_CASE(
    "client protocol Response Topic and Correlation Data (MQTT 5.0 §4.10): a PUBLISH at QoS 0, 1 "
    "and 2 carries its own with the user properties, and one without them carries neither",
    "[mqtt][protocol][response]") {
  const int qos = GENERATE(0, 1, 2);
  INFO("QoS " << qos);
  ScriptedBroker broker;
  broker.connect();
  const auto user = std::make_shared<const mq::UserProperties>(
      mq::UserProperties{{"MCP-COMPONENT-TYPE", "mcp-server"}, {"MCP-MQTT-CLIENT-ID", "me"}});
  const std::vector<std::pair<std::string, std::string>> user_pairs{
      {"MCP-COMPONENT-TYPE", "mcp-server"}, {"MCP-MQTT-CLIENT-ID", "me"}};
  const std::string binary("\x00\x01\xFF\x00", 4);
  auto request = [&](std::string response_topic, std::string correlation_data) {
    auto r = outgoing("relay/in", "body", qos);
    r.user_properties = user;
    r.response_topic = std::move(response_topic);
    r.correlation_data = std::move(correlation_data);
    return r;
  };
  std::vector<mq::AckOutcome> acks;
  auto record = [&](const mq::AckOutcome& a) { acks.push_back(a); };
  broker.client().publish(request("relay/reply/a", binary), record);
  broker.client().publish(request("", ""), record);
  broker.client().publish(request("relay/reply/b", "second"), record);
  broker.client().publish(request("", "only correlation"), record);
  broker.settle();
  auto sent = broker.take(kPublish);
  REQUIRE(sent.size() == 4);
  for (const auto& p : sent) {
    CHECK(p.qos() == qos);
    CHECK(p.topic() == "relay/in");
    CHECK(p.payload() == "body");
  }
  const auto first = sent_properties(sent[0]);
  CHECK(first.response_topic == "relay/reply/a");
  CHECK(first.correlation_data == binary);
  CHECK(first.user == user_pairs);
  const auto plain = sent_properties(sent[1]);
  CHECK_FALSE(plain.response_topic);
  CHECK_FALSE(plain.correlation_data);
  CHECK(plain.user == user_pairs);
  const auto third = sent_properties(sent[2]);
  CHECK(third.response_topic == "relay/reply/b");
  CHECK(third.correlation_data == "second");
  CHECK(third.user == user_pairs);
  const auto fourth = sent_properties(sent[3]);
  CHECK_FALSE(fourth.response_topic);
  CHECK(fourth.correlation_data == "only correlation");

  for (const auto& p : sent) {
    if (qos == 1) broker.send(ack(kPuback, p.packet_id()));
    if (qos == 2) {
      broker.send(ack(kPubrec, p.packet_id()));
      broker.send(ack(kPubcomp, p.packet_id()));
    }
  }
  REQUIRE(acks.size() == 4);
  for (const auto& a : acks)
    CHECK(a.ok);
  CHECK(broker.client().connected());
}

TEST_CASE(
    "client protocol receipt of Response Topic and Correlation Data (MQTT 5.0 §4.10): handed up "
    "with the message, binary data intact, and absent when the PUBLISH has none",
    "[mqtt][protocol][response]") {
  ScriptedBroker broker;
  broker.connect();
  const std::string binary("\x00\xFE\x00", 3);
  broker.send(publish("relay/in", "request", 1, 5,
                      string_property(0x08, "relay/reply/x") + char(0x09) + utf8(binary)) +
              publish("relay/in", "plain", 2, 6) +
              publish("relay/in", "correlated", 0, 0, char(0x09) + utf8("c")));
  REQUIRE(broker.messages.size() == 3);
  CHECK(broker.messages[0].response_topic == "relay/reply/x");
  CHECK(broker.messages[0].correlation_data == binary);
  CHECK(broker.messages[0].payload == "request");
  CHECK_FALSE(broker.messages[1].response_topic);
  CHECK_FALSE(broker.messages[1].correlation_data);
  CHECK_FALSE(broker.messages[2].response_topic);
  CHECK(broker.messages[2].correlation_data == "c");
  CHECK(broker.lost.empty());
}

TEST_CASE(
    "client protocol: a publication whose Correlation Data is over 65,535 bytes fails later, "
    "saying so, sends nothing and leaves the connection up",
    "[mqtt][protocol][response]") {
  ScriptedBroker broker;
  broker.connect();
  auto r = outgoing("relay/in", "x", 1);
  r.correlation_data = std::string(65536, 'c');
  std::vector<mq::AckOutcome> acks;
  broker.client().publish(std::move(r), [&](const mq::AckOutcome& a) { acks.push_back(a); });
  CHECK(acks.empty());
  broker.settle();
  REQUIRE(acks.size() == 1);
  CHECK_FALSE(acks[0].ok);
  CHECK(contains(acks[0].why, "Correlation Data"));
  CHECK(broker.take(kPublish).empty());
  CHECK(broker.client().connected());
}

// ---- Receive Maximum ----------------------------------------------------------------------------

TEST_CASE(
    "client protocol Receive Maximum (MQTT 5.0 §3.3.4): QoS 2 publications up to the maximum we "
    "announced are taken, one more gets DISCONNECT 0x93",
    "[mqtt][protocol][flow]") {
  auto params = default_params();
  params.receive_maximum = 3;
  ScriptedBroker broker(params);
  auto connect = broker.connect();
  for (std::size_t id = 1; id <= 3; ++id)
    broker.send(publish("in", std::to_string(id), 2, id));
  CHECK(broker.messages.size() == 3);
  CHECK(broker.take(kPubrec).size() == 3);
  CHECK(broker.lost.empty());
  SECTION("a released one makes room") {
    broker.send(ack(kPubrel, 2));
    broker.send(publish("in", "4", 2, 4));
    CHECK(broker.messages.size() == 4);
    CHECK(broker.lost.empty());
  }
  SECTION("one more is too many") {
    broker.send(publish("in", "4", 2, 4));
    CHECK(broker.messages.size() == 3);
    REQUIRE(broker.lost.size() == 1);
    CHECK(contains(broker.lost[0], "more QoS 2 publications than our Receive Maximum"));
    auto d = broker.take(kDisconnect);
    REQUIRE(d.size() == 1);
    CHECK(d[0].reason_code() == 0x93);
    CHECK(broker.io_closed());
  }
}

// ---- topic aliases ------------------------------------------------------------------------------

// MQTT 5.0 §3.3.2.3.4: we announce a Topic Alias Maximum; the broker may then send a topic once
// with an alias and afterwards the alias alone, and may map an alias to another topic later.
TEST_CASE(
    "client protocol topic aliases (MQTT 5.0 §3.3.2.3.4): an alias the broker defines and then "
    "uses delivers every message on the topic it stands for",
    "[mqtt][protocol][alias]") {
  ScriptedBroker broker;
  broker.connect();
  broker.send(publish("alias/one", "first", 0, 0, alias(1)) +
              publish("", "second", 0, 0, alias(1)) +
              publish("alias/sixty-four", "third", 0, 0, alias(64)) +
              publish("alias/redefined", "fourth", 0, 0, alias(1)) +
              publish("", "fifth", 0, 0, alias(1)) + publish("", "sixth", 0, 0, alias(64)));
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"alias/one", "first"},        {"alias/one", "second"},      {"alias/sixty-four", "third"},
      {"alias/redefined", "fourth"}, {"alias/redefined", "fifth"}, {"alias/sixty-four", "sixth"}};
  REQUIRE(broker.messages.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(broker.messages[i].topic == expected[i].first);
    CHECK(broker.messages[i].payload == expected[i].second);
  }
  CHECK(broker.lost.empty());
}

// ---- a broker that breaks the protocol ----------------------------------------------------------

// MQTT 5.0 §4.13.1: on a Malformed Packet or Protocol Error the client sends DISCONNECT with the
// reason code and closes; the owner hears which rule was broken.
TEST_CASE(
    "client protocol against a hostile broker (MQTT 5.0 §4.13): garbage gets DISCONNECT with the "
    "right reason code, the connection closes, and the loss names the rule",
    "[mqtt][protocol]") {
  struct Case {
    const char* what;
    std::string bytes;
    int reason;
    const char* rule;
  };
  const std::vector<Case> cases = {
      {"a Remaining Length longer than 4 bytes (MQTT 5.0 §1.5.5)",
       std::string("\x30\xFF\xFF\xFF\xFF\x01", 6), 0x81,
       "Variable Byte Integer longer than 4 bytes"},
      {"a PUBLISH with QoS 3 (MQTT 5.0 §3.3.1.2)",
       packet(0x36, utf8("hostile/qos3") + u16(1) + varint(0) + "x"), 0x81, "PUBLISH with QoS 3"},
      {"a Topic Alias the broker never defined (MQTT 5.0 §3.3.2.3.4)",
       publish("", "x", 0, 0, alias(5)), 0x94, "Topic Alias used before a PUBLISH defined it"},
      {"a Topic Alias above the Topic Alias Maximum we sent (MQTT 5.0 §3.3.2.3.4)",
       publish("hostile/alias", "x", 0, 0, alias(65)), 0x94,
       "Topic Alias above the Topic Alias Maximum"},
      {"a second CONNACK (MQTT 5.0 §3.2)", connack(), 0x82, "a second CONNACK"},
      {"AUTH without an authentication method (MQTT 5.0 §4.12)", packet(0xF0, ""), 0x82,
       "the broker sent AUTH"},
  };
  const auto& k = cases.at(static_cast<std::size_t>(GENERATE(0, 1, 2, 3, 4, 5)));
  INFO(k.what);

  ScriptedBroker broker;
  broker.connect();
  broker.send(k.bytes);
  REQUIRE(broker.lost.size() == 1);
  INFO(broker.lost[0]);
  CHECK(contains(broker.lost[0], "the broker broke the MQTT protocol"));
  CHECK(contains(broker.lost[0], k.rule));
  CHECK(contains(broker.lost[0], "we sent DISCONNECT"));
  auto d = broker.take(kDisconnect);
  REQUIRE(d.size() == 1);
  CHECK(d[0].reason_code() == k.reason);
  CHECK(broker.io_closed());
  CHECK(broker.messages.empty());
}

// ---- the end of a connection --------------------------------------------------------------------

TEST_CASE(
    "client protocol DISCONNECT from the broker (MQTT 5.0 §3.14): before CONNACK it fails the "
    "attempt with its reason code, once connected the loss says why and what was pending fails",
    "[mqtt][protocol]") {
  const std::string disconnect =
      packet(0xE0, std::string(1, char(0x8B)) + varint(0) /* no properties */);
  SECTION("before CONNACK") {
    ScriptedBroker broker;
    broker.connect(disconnect);
    REQUIRE(broker.outcome);
    CHECK_FALSE(broker.outcome->ok);
    CHECK(broker.outcome->reason_code == 0x8B);
    CHECK(broker.outcome->why == "the broker sent DISCONNECT: Server shutting down (0x8B)");
  }
  SECTION("connected") {
    ScriptedBroker broker;
    broker.connect();
    std::vector<mq::AckOutcome> acks;
    broker.client().publish(outgoing("t", "x", 1),
                            [&](const mq::AckOutcome& a) { acks.push_back(a); });
    broker.settle();
    const auto reference = string_property(0x1C, "elsewhere:1883");  // Server Reference
    broker.send(packet(0xE0, std::string(1, char(0x9C)) + varint(reference.size()) + reference));
    REQUIRE(broker.lost.size() == 1);
    CHECK(broker.lost[0] ==
          "the broker sent DISCONNECT: Use another server (0x9C); use server elsewhere:1883");
    REQUIRE(acks.size() == 1);
    CHECK_FALSE(acks[0].ok);
    CHECK(acks[0].why == broker.lost[0]);
    CHECK(broker.io_closed());
    // We answer no DISCONNECT with one of ours.
    CHECK(broker.take(kDisconnect).empty());
  }
}

TEST_CASE(
    "client protocol: the broker closing the connection loses it, and an operation started while "
    "not connected fails later, never inside the call",
    "[mqtt][protocol]") {
  ScriptedBroker broker;
  broker.connect();
  broker.close_connection();
  REQUIRE(broker.lost.size() == 1);
  CHECK(broker.lost[0] == "the broker closed the connection");
  std::vector<mq::AckOutcome> acks;
  broker.client().subscribe({{"f", 1, false}}, [&](const mq::AckOutcome& a) { acks.push_back(a); });
  CHECK(acks.empty());
  broker.settle();
  REQUIRE(acks.size() == 1);
  CHECK_FALSE(acks[0].ok);
  CHECK(acks[0].why == "not connected");
}

TEST_CASE(
    "client protocol disconnect (MQTT 5.0 §3.14.4): DISCONNECT 0x00 waits for what is in flight "
    "(at most the timeout), then the transport finishes and closes once the broker closes",
    "[mqtt][protocol]") {
  ScriptedBroker broker;
  broker.connect();
  std::vector<mq::AckOutcome> acks;
  broker.client().publish(outgoing("t", "x", 1),
                          [&](const mq::AckOutcome& a) { acks.push_back(a); });
  broker.settle();
  const auto id = broker.take(kPublish).at(0).packet_id();
  bool done = false;
  broker.client().disconnect(2000ms, [&] { done = true; });
  broker.settle();
  CHECK(broker.take(kDisconnect).empty());  // waits for the PUBACK
  SECTION("acknowledged in time") {
    broker.advance(500ms);
    broker.send(ack(kPuback, id));
    REQUIRE(acks.size() == 1);
    CHECK(acks[0].ok);
  }
  SECTION("not acknowledged in time") {
    broker.advance(1999ms);
    CHECK(broker.take(kDisconnect).empty());
    broker.advance(1ms);
    REQUIRE(acks.size() == 0);  // it fails once closed
  }
  auto d = broker.take(kDisconnect);
  REQUIRE(d.size() == 1);
  CHECK(d[0].body.empty());  // reason 0x00, said by leaving it out
  CHECK(broker.finished());
  CHECK_FALSE(done);
  broker.close_connection();
  CHECK(done);
  CHECK(broker.io_closed());
  CHECK(broker.lost.empty());
  REQUIRE(acks.size() == 1);
  if (!acks[0].ok) CHECK(acks[0].why == "the connection was closed");
}

TEST_CASE(
    "client protocol subscribe (MQTT 5.0 §3.8, §3.9): SUBSCRIBE at no more than the broker's "
    "Maximum QoS, SUBACK's reason codes one per filter",
    "[mqtt][protocol]") {
  ScriptedBroker broker;
  broker.connect(connack(0, std::string(1, char(0x24)) + char(1)));  // Maximum QoS 1
  std::vector<mq::AckOutcome> acks;
  broker.client().subscribe({{"a/#", 2, false}, {"refused/x", 0, true}},
                            [&](const mq::AckOutcome& a) { acks.push_back(a); });
  broker.settle();
  auto sub = broker.take(kSubscribe);
  REQUIRE(sub.size() == 1);
  CHECK(sub[0].flags == 2);
  const auto id = sub[0].packet_id();
  // Packet identifier, no properties, then each filter and its options byte.
  CHECK(sub[0].body.substr(2) == varint(0) + utf8("a/#") + char(1) + utf8("refused/x") + char(4));
  broker.send(packet(0x90, u16(id) + varint(0) + char(1) + char(0x87)));
  REQUIRE(acks.size() == 1);
  CHECK(acks[0].ok);
  CHECK(acks[0].reason_codes == std::vector<std::uint8_t>{0x01, 0x87});
}

#include "mqtt/protocol/client_protocol.hpp"

#include <algorithm>
#include <cstring>

#include "common/log.hpp"
#include "common/time_grid.hpp"

namespace mcpmqtt::mqtt::protocol {

namespace {

// The read buffer starts small (an idle connection holds thousands of these), grows to the
// size of the packet being read, and shrinks back once a large packet has been handled.
constexpr std::size_t kInitialRead = 512;
constexpr std::size_t kShrinkAbove = 64 * 1024;
// A written batch keeps its buffer for the next one only when it is this small (acknowledgements,
// PINGREQ, most PUBLISH headers): CONNECT's and a large header's go, not to be held by every idle
// connection (issue 34).
constexpr std::size_t kKeepBatchBytes = 256;
// A graceful close waits this long for the broker to close its side after our DISCONNECT.
constexpr auto kFinishWait = std::chrono::seconds(1);

}  // namespace

void ClientProtocol::Batch::clear() {
  // Keep the capacity of a small batch (the next one reuses it), not of a large one.
  if (bytes.capacity() > kKeepBatchBytes)
    std::string().swap(bytes);
  else
    bytes.clear();
  segments.clear();
  payloads.clear();
  written.clear();
}

ClientProtocol::ClientProtocol(Io& io, EngineConnect params, Events events)
    : io_(io),
      params_(std::move(params)),
      events_(std::move(events)),
      aliases_(params_.topic_alias_maximum) {}

void ClientProtocol::start(ConnectDone done) {
  connect_done_ = std::move(done);
  state_ = State::opening;
  deadline_ = io_.now() + params_.connect_timeout;
  arm_timer();
  io_.open();
}

void ClientProtocol::on_transport_ready(bool ok, const std::string& why) {
  if (state_ != State::opening) return;
  if (!ok) return fail_connect(why);
  // MQTT 5.0 §3.1: CONNECT, with what 004 asks of it (clean start, no expiry, MCP properties).
  std::vector<codec::UserPropertyRef> props, will_props;
  for (const auto& p : params_.user_properties)
    props.push_back({p.key, p.value});
  codec::ConnectOut c;
  c.client_id = params_.client_id;
  c.clean_start = params_.clean_start;
  c.keep_alive_s = params_.keep_alive_s;
  // Sent even when 0 (the default): 004 asks for it on every connection, said outright.
  c.properties.session_expiry_interval = params_.session_expiry_s;
  if (params_.receive_maximum != 65535) c.properties.receive_maximum = params_.receive_maximum;
  if (params_.maximum_packet_size) c.properties.maximum_packet_size = params_.maximum_packet_size;
  if (params_.topic_alias_maximum) c.properties.topic_alias_maximum = params_.topic_alias_maximum;
  c.properties.user_properties = props;
  if (params_.will) {
    const auto& w = *params_.will;
    for (const auto& p : w.user_properties)
      will_props.push_back({p.key, p.value});
    codec::ConnectOut::Will cw;
    cw.topic = w.topic;
    cw.payload = w.payload;
    cw.qos = w.qos;
    cw.retain = w.retain;
    cw.properties.user_properties = will_props;
    c.will = cw;
  }
  if (params_.username) c.username = *params_.username;
  if (params_.password) c.password = *params_.password;
  const auto before = filling_.bytes.size();
  if (!codec::encode_connect(filling_.bytes, c)) {
    return fail_connect(
        "the CONNECT packet cannot be encoded (a string over 65,535 bytes: check the client id, "
        "the credentials, MCP-META and the will)");
  }
  queue_encoded(before);
  state_ = State::awaiting_connack;
  last_received_ = io_.now();
  flush();
  start_read();
}

// ---- reading ------------------------------------------------------------------------------------

void ClientProtocol::start_read() {
  if (reading_ || state_ == State::closed || state_ == State::idle) return;
  if (rbuf_.empty()) rbuf_.resize(kInitialRead);
  if (rend_ == rbuf_.size()) rbuf_.resize(rbuf_.size() * 2);
  reading_ = true;
  io_.read(rbuf_.data() + rend_, rbuf_.size() - rend_);
}

void ClientProtocol::on_read_failed(const std::string& why) {
  reading_ = false;
  if (state_ == State::closed) return;
  if (state_ == State::disconnecting) return finish_disconnect();
  if (state_ == State::awaiting_connack) return fail_connect(why + " before CONNACK");
  lose(why);
}

void ClientProtocol::on_read(std::size_t n) {
  reading_ = false;
  if (state_ == State::closed) return;
  last_received_ = io_.now();
  rend_ += n;
  delivered_ = false;
  process_input();
  if (state_ == State::closed) return;
  if (delivered_ || acks_posted_) return next_turn();
  start_read();
}

void ClientProtocol::process_input() {
  std::size_t need = 0;  // the size of a packet only partly read
  while (state_ != State::closed) {
    const std::string_view avail(rbuf_.data() + rbegin_, rend_ - rbegin_);
    auto header = codec::read_fixed_header(avail, params_.maximum_packet_size);
    if (!header) return protocol_error(header.error());
    if (!*header) break;
    const auto& h = **header;
    if (avail.size() < h.packet_size()) {
      need = h.packet_size();
      break;
    }
    // The views handed out stay valid: nothing moves the buffer until the loop ends.
    rbegin_ += h.packet_size();
    if (!handle(h, avail.substr(h.header_size, h.remaining_length))) break;
  }
  if (state_ == State::closed) return;
  // Keep what is left at the front, with room for the packet being read.
  const std::size_t left = rend_ - rbegin_;
  if (left && rbegin_) std::memmove(rbuf_.data(), rbuf_.data() + rbegin_, left);
  rbegin_ = 0;
  rend_ = left;
  if (need > rbuf_.size()) {
    rbuf_.resize(need);
  } else if (rbuf_.size() > kShrinkAbove && need <= kInitialRead && left <= kInitialRead) {
    std::vector<char> small(kInitialRead);
    std::memcpy(small.data(), rbuf_.data(), left);
    rbuf_.swap(small);
  }
}

bool ClientProtocol::handle(const codec::FixedHeader& header, std::string_view body) {
  auto decoded = codec::decode_inbound(header.first_byte, body);
  if (!decoded) {
    protocol_error(decoded.error());
    return false;
  }
  auto& packet = *decoded;
  if (state_ == State::awaiting_connack && !std::holds_alternative<codec::Connack>(packet) &&
      !std::holds_alternative<codec::Disconnect>(packet)) {
    protocol_error({codec::reason::protocol_error,
                    "the broker sent another packet before CONNACK (MQTT 5.0 §3.2)"});
    return false;
  }
  std::visit(
      [this](auto& p) {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, codec::Connack>) {
          handle_connack(p);
        } else if constexpr (std::is_same_v<T, codec::Publish>) {
          handle_publish(p);
        } else if constexpr (std::is_same_v<T, codec::PubAck>) {
          handle_ack(p);
        } else if constexpr (std::is_same_v<T, codec::SubAck>) {
          handle_suback(p);
        } else if constexpr (std::is_same_v<T, codec::PingResp>) {
          ping_outstanding_ = false;
        } else if constexpr (std::is_same_v<T, codec::Disconnect>) {
          handle_disconnect(p);
        } else if constexpr (std::is_same_v<T, codec::Auth>) {
          protocol_error({codec::reason::protocol_error,
                          "the broker sent AUTH, but no authentication method was used "
                          "(MQTT 5.0 §4.12)"});
        }
      },
      packet);
  return state_ != State::closed;
}

std::string ClientProtocol::describe_reason(std::uint8_t code,
                                            const codec::Properties& props) const {
  std::string out = codec::reason_with_code(code);
  if (props.reason_string) out += ": " + std::string(*props.reason_string);
  if (props.server_reference) out += "; use server " + std::string(*props.server_reference);
  return out;
}

void ClientProtocol::handle_connack(const codec::Connack& p) {
  if (state_ != State::awaiting_connack) {
    return protocol_error(
        {codec::reason::protocol_error, "a second CONNACK on one connection (MQTT 5.0 §3.2)"});
  }
  if (p.reason_code >= 0x80) {
    return fail_connect(
        "the broker refused the connection: " + describe_reason(p.reason_code, p.properties),
        p.reason_code);
  }
  if (p.session_present && params_.clean_start) {
    // [MQTT-3.2.2-4]: a client without session state that is told one exists closes.
    return protocol_error(
        {codec::reason::protocol_error, "CONNACK says a session is present after a clean start"});
  }
  const auto& props = p.properties;
  auto& ack = connack_;
  ack.session_present = p.session_present;
  if (props.receive_maximum) ack.receive_maximum = *props.receive_maximum;
  if (props.maximum_packet_size) ack.maximum_packet_size = *props.maximum_packet_size;
  if (props.maximum_qos) ack.maximum_qos = *props.maximum_qos;
  if (props.retain_available) ack.retain_available = *props.retain_available != 0;
  if (props.topic_alias_maximum) ack.topic_alias_maximum = *props.topic_alias_maximum;
  if (props.assigned_client_identifier)
    ack.assigned_client_id = std::string(*props.assigned_client_identifier);
  if (props.server_keep_alive) ack.server_keep_alive = *props.server_keep_alive;
  if (props.session_expiry_interval) ack.session_expiry_s = *props.session_expiry_interval;
  if (props.reason_string) ack.reason_string = std::string(*props.reason_string);
  props.for_each_user_property([&ack](codec::UserPropertyRef u) {
    ack.user_properties.push_back({std::string(u.key), std::string(u.value)});
  });
  broker_max_packet_ = ack.maximum_packet_size;
  broker_max_qos_ = ack.maximum_qos;
  retain_available_ = ack.retain_available;
  // §3.2.2.3.14: the broker's Server Keep Alive replaces ours.
  keep_alive_ =
      std::chrono::seconds(ack.server_keep_alive ? *ack.server_keep_alive : params_.keep_alive_s);
  grid_ = std::min<Clock::duration>(params_.keep_alive_grid, keep_alive_ / 4);
  state_ = State::connected;
  // CONNECT is written (its bytes were copied into the batch): what only it needed goes, a few
  // hundred bytes of each of an ingress's thousands of idle connections (issue 34).
  params_.will.reset();
  UserProperties().swap(params_.user_properties);
  params_.username.reset();
  params_.password.reset();
  arm_timer();
  auto done = std::move(connect_done_);
  connect_done_ = {};
  ConnectOutcome out;
  out.ok = true;
  out.connack = ack;
  if (done) done(out);
}

void ClientProtocol::handle_publish(const codec::Publish& p) {
  auto topic = aliases_.resolve(p.topic, p.properties.topic_alias);
  if (!topic) return protocol_error(topic.error());
  if (p.qos == 2 && qos2_received_.count(p.packet_id)) {
    // A duplicate of one we delivered and acknowledged with PUBREC (§4.3.3): answer again only.
    send_ack(codec::PacketType::pubrec, p.packet_id);
    return;
  }
  if (p.qos == 2 && qos2_received_.size() >= params_.receive_maximum) {
    // §3.3.4: more unacknowledged QoS > 0 publications than the Receive Maximum we announced.
    return protocol_error({codec::reason::receive_maximum_exceeded,
                           "the broker sent more QoS 2 publications than our Receive Maximum"});
  }
  if (events_.on_message && state_ == State::connected) {
    property_views_.clear();
    p.properties.for_each_user_property([this](codec::UserPropertyRef u) {
      property_views_.push_back({u.key, u.value});
    });
    ReceivedMessage m;
    m.topic = *topic;
    m.payload = std::make_shared<const std::string>(p.payload);
    m.qos = p.qos;
    m.retain = p.retain;
    m.user_properties = property_views_;
    m.response_topic = p.properties.response_topic;
    m.correlation_data = p.properties.correlation_data;
    events_.on_message(m);
    if (state_ == State::closed) return;
    delivered_ = true;
  }
  if (p.qos == 1) {
    queue_ack(codec::PacketType::puback, p.packet_id);
  } else if (p.qos == 2) {
    qos2_received_.insert(p.packet_id);
    queue_ack(codec::PacketType::pubrec, p.packet_id);
  }
}

void ClientProtocol::queue_ack(codec::PacketType type, std::uint16_t packet_id) {
  const auto before = filling_.bytes.size();
  if (!codec::encode_ack(filling_.bytes, type, packet_id, codec::reason::success)) return;
  queue_encoded(before);
  acks_posted_ = true;
}

void ClientProtocol::next_turn() {
  // What the read's deliveries started (a response passed on to its HTTP client, a request to
  // its child) goes first; the acknowledgements of its publications, written together, and the
  // next read, whose first attempt mostly finds nothing (EAGAIN), follow on the strand's next
  // turn: neither is on a message's path (issue 34). The owner's post keeps it alive until then.
  io_.post([this] {
    acks_posted_ = false;
    flush();
    if (state_ != State::closed) start_read();
  });
}

void ClientProtocol::send_ack(codec::PacketType type, std::uint16_t packet_id,
                              std::uint8_t reason_code) {
  const auto before = filling_.bytes.size();
  if (codec::encode_ack(filling_.bytes, type, packet_id, reason_code)) queue_encoded(before);
  flush();
}

void ClientProtocol::handle_ack(const codec::PubAck& p) {
  using codec::PacketType;
  if (p.type == PacketType::pubrel) {
    // §4.3.3: the broker releases a QoS 2 publication it sent us.
    const bool known = qos2_received_.erase(p.packet_id) != 0;
    return send_ack(PacketType::pubcomp, p.packet_id,
                    known ? codec::reason::success : codec::reason::packet_identifier_not_found);
  }
  auto it = ops_.find(p.packet_id);
  if (it == ops_.end()) return;  // not ours (any more): nothing waits for it
  auto& op = it->second;
  const bool expected = (p.type == PacketType::puback && op.kind == OpKind::publish) ||
                        (p.type == PacketType::pubrec && op.kind == OpKind::publish) ||
                        (p.type == PacketType::pubcomp && op.kind == OpKind::publish_released);
  if (!expected) {
    return protocol_error({codec::reason::protocol_error,
                           "an acknowledgement that does not match the packet identifier's "
                           "publication (MQTT 5.0 §4.3)"});
  }
  if (p.type == PacketType::pubrec && p.reason_code < 0x80) {
    // §4.3.3: release it; PUBCOMP ends the exchange.
    op.kind = OpKind::publish_released;
    return send_ack(PacketType::pubrel, p.packet_id);
  }
  AckOutcome out;
  out.ok = p.reason_code < 0x80;
  if (!out.ok) {
    out.why = "the broker refused the publication: " + describe_reason(p.reason_code, p.properties);
  }
  auto done = std::move(op.done);
  ops_.erase(it);
  if (publishes_in_flight_ > 0) --publishes_in_flight_;
  if (done) done(out);
  if (state_ == State::disconnecting) maybe_finish_disconnect();
}

void ClientProtocol::handle_suback(const codec::SubAck& p) {
  auto it = ops_.find(p.packet_id);
  if (it == ops_.end()) return;
  const auto want = p.type == codec::PacketType::suback ? OpKind::subscribe : OpKind::unsubscribe;
  if (it->second.kind != want) {
    return protocol_error({codec::reason::protocol_error,
                           "a SUBACK or UNSUBACK for a packet identifier of another operation"});
  }
  AckOutcome out;
  out.ok = true;
  out.reason_codes.assign(p.reason_codes.begin(), p.reason_codes.end());
  auto done = std::move(it->second.done);
  ops_.erase(it);
  if (done) done(out);
}

void ClientProtocol::handle_disconnect(const codec::Disconnect& p) {
  const std::string why =
      "the broker sent DISCONNECT: " + describe_reason(p.reason_code, p.properties);
  if (state_ == State::awaiting_connack) return fail_connect(why, p.reason_code);
  if (state_ == State::disconnecting) return finish_disconnect();
  lose(why);
}

// ---- operations ---------------------------------------------------------------------------------

void ClientProtocol::fail_soon(AckDone done, std::string why) {
  if (!done) return;
  io_.post([done = std::move(done), why = std::move(why)] { done(AckOutcome{false, why, {}}); });
}

std::uint16_t ClientProtocol::allocate_packet_id() {
  if (ops_.size() >= 65535) return 0;
  do {
    if (++next_id_ == 0) next_id_ = 1;
  } while (ops_.count(next_id_));
  return next_id_;
}

void ClientProtocol::subscribe(std::vector<SubscribeRequest> filters, AckDone done) {
  if (state_ != State::connected) return fail_soon(std::move(done), "not connected");
  const auto id = allocate_packet_id();
  if (!id) return fail_soon(std::move(done), "no packet identifier is free");
  std::vector<codec::SubscriptionOut> out;
  out.reserve(filters.size());
  for (const auto& f : filters)
    out.push_back({f.filter, std::min(f.qos, broker_max_qos_), f.no_local, false, 0});
  const auto before = filling_.bytes.size();
  if (!codec::encode_subscribe(filling_.bytes, id, out)) {
    return fail_soon(std::move(done), "the SUBSCRIBE packet cannot be encoded");
  }
  const auto size = filling_.bytes.size() - before;
  if (broker_max_packet_ && size > broker_max_packet_) {
    filling_.bytes.resize(before);
    return fail_soon(std::move(done),
                     "the SUBSCRIBE packet is larger than the broker's Maximum "
                     "Packet Size (" +
                         std::to_string(broker_max_packet_) + " bytes)");
  }
  queue_encoded(before);
  ops_.emplace(id, Op{OpKind::subscribe, std::move(done)});
  flush();
}

void ClientProtocol::unsubscribe(std::vector<std::string> filters, AckDone done) {
  if (state_ != State::connected) return fail_soon(std::move(done), "not connected");
  const auto id = allocate_packet_id();
  if (!id) return fail_soon(std::move(done), "no packet identifier is free");
  std::vector<std::string_view> views(filters.begin(), filters.end());
  const auto before = filling_.bytes.size();
  if (!codec::encode_unsubscribe(filling_.bytes, id, views)) {
    return fail_soon(std::move(done), "the UNSUBSCRIBE packet cannot be encoded");
  }
  const auto size = filling_.bytes.size() - before;
  if (broker_max_packet_ && size > broker_max_packet_) {
    filling_.bytes.resize(before);
    return fail_soon(std::move(done),
                     "the UNSUBSCRIBE packet is larger than the broker's "
                     "Maximum Packet Size");
  }
  queue_encoded(before);
  ops_.emplace(id, Op{OpKind::unsubscribe, std::move(done)});
  flush();
}

void ClientProtocol::publish(PublishRequest m, AckDone done) {
  if (state_ != State::connected) return fail_soon(std::move(done), "not connected");
  if (!m.payload) m.payload = std::make_shared<const std::string>();
  if (m.retain && !retain_available_) {
    return fail_soon(std::move(done),
                     "the broker does not keep retained messages (Retain Available is 0 in its "
                     "CONNACK)");
  }
  // §3.2.2.3.4: never above the broker's Maximum QoS.
  const int qos = std::min(m.qos, broker_max_qos_);
  // The same user properties go with every publication of a connection: encode them once.
  if (m.user_properties.get() != encoded_for_) {
    encoded_properties_.clear();
    encoded_refs_.clear();
    if (m.user_properties) {
      for (const auto& p : *m.user_properties)
        encoded_refs_.push_back({p.key, p.value});
    }
    codec::OutProperties props;
    props.user_properties = encoded_refs_;
    if (!codec::put_properties(encoded_properties_, props)) {
      encoded_for_ = nullptr;
      encoded_refs_.clear();
      return fail_soon(std::move(done), "a user property is longer than 65,535 bytes");
    }
    encoded_for_ = m.user_properties.get();
    encoded_owner_ = m.user_properties;
  }
  std::string_view properties = encoded_properties_;
  if (!m.response_topic.empty() || !m.correlation_data.empty()) {
    // §4.10: a request's Response Topic and Correlation Data change with every publication, so
    // its property block is encoded for it alone, the user properties after them.
    codec::OutProperties props;
    if (!m.response_topic.empty()) props.response_topic = m.response_topic;
    if (!m.correlation_data.empty()) props.correlation_data = m.correlation_data;
    props.user_properties = encoded_refs_;
    request_properties_.clear();
    if (!codec::put_properties(request_properties_, props)) {
      return fail_soon(std::move(done),
                       "the Response Topic or the Correlation Data is longer than 65,535 bytes");
    }
    properties = request_properties_;
  }
  const std::uint16_t id = qos > 0 ? allocate_packet_id() : 0;
  if (qos > 0 && !id) return fail_soon(std::move(done), "no packet identifier is free");
  codec::PublishOut h;
  h.topic = m.topic;
  h.qos = qos;
  h.retain = m.retain;
  h.packet_id = id;
  h.encoded_properties = properties;
  h.payload_size = m.payload->size();
  const auto before = filling_.bytes.size();
  const bool encoded = codec::encode_publish_header(filling_.bytes, h);
  // The header is copied into the batch: a large block's buffer need not stay.
  if (request_properties_.capacity() > kShrinkAbove) std::string().swap(request_properties_);
  if (!encoded) {
    return fail_soon(std::move(done),
                     "the message cannot be sent: " + std::to_string(m.payload->size()) +
                         " bytes is more than an MQTT packet can hold");
  }
  const auto header = filling_.bytes.size() - before;
  const std::size_t total = header + m.payload->size();
  if (broker_max_packet_ && total > broker_max_packet_) {
    // The BrokerConnection refuses these first, with the sizes; this keeps the protocol whoever
    // calls.
    filling_.bytes.resize(before);
    return fail_soon(std::move(done), "larger than the broker's Maximum Packet Size");
  }
  queue_encoded(before);
  queue_payload(std::move(m.payload));
  if (qos == 0) {
    if (done) filling_.written.push_back(std::move(done));
  } else {
    ops_.emplace(id, Op{OpKind::publish, std::move(done)});
    ++publishes_in_flight_;
  }
  flush();
}

// ---- writing ------------------------------------------------------------------------------------

void ClientProtocol::queue_encoded(std::size_t from) {
  auto& b = filling_;
  const std::size_t size = b.bytes.size() - from;
  if (size == 0) return;
  if (!b.segments.empty() && !b.segments.back().payload &&
      b.segments.back().offset + b.segments.back().size == from) {
    b.segments.back().size += size;
  } else {
    b.segments.push_back({from, size, nullptr});
  }
  last_sent_ = io_.now();
}

void ClientProtocol::queue_payload(std::shared_ptr<const std::string> payload) {
  if (payload->empty()) return;
  filling_.segments.push_back({0, payload->size(), payload.get()});
  filling_.payloads.push_back(std::move(payload));
}

void ClientProtocol::flush() {
  if (write_in_flight_ || filling_.empty()) return;
  if (state_ == State::idle || state_ == State::opening || state_ == State::closed) return;
  write_now();
}

void ClientProtocol::write_now() {
  std::swap(filling_, writing_);
  buffers_.clear();
  for (const auto& s : writing_.segments) {
    if (s.payload)
      buffers_.emplace_back(s.payload->data(), s.size);
    else
      buffers_.emplace_back(writing_.bytes.data() + s.offset, s.size);
  }
  write_in_flight_ = true;
  ++writes_started_;
  io_.write(buffers_);
}

void ClientProtocol::on_written(WriteResult result, const std::string& why) {
  write_in_flight_ = false;
  auto written = std::move(writing_.written);
  writing_.written.clear();
  writing_.clear();
  if (state_ == State::closed) {
    // After a protocol error: the DISCONNECT that says why, then close.
    if (result == WriteResult::aborted) return;
    if (result == WriteResult::ok && !filling_.empty()) return write_now();
    return io_.close();
  }
  if (result != WriteResult::ok) {
    for (auto& done : written)
      done(AckOutcome{false, why, {}});
    if (state_ == State::disconnecting) return finish_disconnect();
    if (state_ == State::awaiting_connack) return fail_connect(why);
    return lose(why);
  }
  // QoS 0 publications are done once written.
  for (auto& done : written) {
    done(AckOutcome{true, {}, {}});
    if (state_ == State::closed) return;
  }
  if (state_ == State::disconnecting && disconnect_queued_ && filling_.empty()) {
    // Our DISCONNECT is out: half-close and wait (briefly) for the broker to close its side, so
    // that nothing it still sends resets the connection before it has read ours.
    deadline_ = io_.now() + kFinishWait;
    arm_timer();
    io_.finish();
    return;
  }
  flush();
}

// ---- ending -------------------------------------------------------------------------------------

void ClientProtocol::disconnect(std::chrono::milliseconds timeout, std::function<void()> done) {
  if (state_ == State::disconnecting) {
    // Already on its way: both callers hear of the end.
    if (done) {
      disconnect_done_ = [first = std::move(disconnect_done_), done = std::move(done)] {
        if (first) first();
        done();
      };
    }
    return;
  }
  if (state_ != State::connected) {
    // An attempt still opening is abandoned; nothing else is open.
    connect_done_ = {};
    if (state_ != State::closed) {
      state_ = State::closed;
      close_now();
    }
    if (done) io_.post(std::move(done));
    return;
  }
  state_ = State::disconnecting;
  disconnect_done_ = done ? std::move(done) : [] {};
  // Wait (at most `timeout`) for what is in flight to be acknowledged, then DISCONNECT.
  deadline_ = io_.now() + timeout;
  arm_timer();
  maybe_finish_disconnect();
}

void ClientProtocol::maybe_finish_disconnect() {
  if (state_ == State::disconnecting && !disconnect_queued_ && publishes_in_flight_ == 0)
    send_disconnect_and_finish();
}

void ClientProtocol::send_disconnect_and_finish() {
  // Normal disconnection (0x00): the broker discards the will (§3.14.4).
  const auto before = filling_.bytes.size();
  if (codec::encode_disconnect(filling_.bytes)) queue_encoded(before);
  disconnect_queued_ = true;
  deadline_ = io_.now() + kFinishWait;
  arm_timer();
  flush();
}

void ClientProtocol::finish_disconnect() {
  if (state_ != State::disconnecting) return;
  state_ = State::closed;
  close_now();
  fail_pending("the connection was closed");
  if (auto done = std::move(disconnect_done_)) {
    disconnect_done_ = {};
    done();
  }
}

void ClientProtocol::abort() {
  events_ = {};
  connect_done_ = {};
  disconnect_done_ = {};
  ops_.clear();
  filling_.written.clear();
  writing_.written.clear();
  if (state_ == State::closed) return;
  state_ = State::closed;
  close_now();
}

void ClientProtocol::close_now() {
  io_.cancel_timer();
  io_.close();
}

void ClientProtocol::fail_pending(const std::string& why) {
  auto ops = std::move(ops_);
  ops_.clear();
  publishes_in_flight_ = 0;
  // The bytes of a write in flight stay until it completes; only the completions go now.
  auto queued = std::move(filling_.written);
  filling_.written.clear();
  auto in_flight = std::move(writing_.written);
  writing_.written.clear();
  const AckOutcome failed{false, why, {}};
  for (auto& [id, op] : ops) {
    if (op.done) op.done(failed);
  }
  for (auto& done : in_flight)
    done(failed);
  for (auto& done : queued)
    done(failed);
}

void ClientProtocol::fail_connect(std::string why, std::uint8_t reason_code) {
  if (state_ == State::closed) return;
  state_ = State::closed;
  close_now();
  auto done = std::move(connect_done_);
  connect_done_ = {};
  ConnectOutcome out;
  out.reason_code = reason_code;
  out.why = std::move(why);
  if (done) done(out);
}

void ClientProtocol::lose(const std::string& why) {
  if (state_ == State::closed) return;
  state_ = State::closed;
  close_now();
  if (events_.on_lost) events_.on_lost(why);
  fail_pending(why);
}

void ClientProtocol::protocol_error(const codec::Error& e) {
  const std::string why = std::string("the broker broke the MQTT protocol: ") + e.what +
                          " (we sent DISCONNECT " + codec::reason_text(e.reason) + ")";
  // §4.13.1: DISCONNECT with the reason code, then close. The bytes go out after anything queued;
  // the socket closes once they are written (or after a second).
  const auto before = filling_.bytes.size();
  if (codec::encode_disconnect(filling_.bytes, e.reason)) queue_encoded(before);
  const State state_before = state_;
  const bool established = state_ == State::connected || state_ == State::disconnecting;
  const bool waiting_connack = state_ == State::awaiting_connack;
  auto connect_done = std::move(connect_done_);
  connect_done_ = {};
  auto disconnect_done = std::move(disconnect_done_);
  disconnect_done_ = {};
  state_ = State::closed;
  reading_ = false;
  deadline_ = io_.now() + kFinishWait;
  arm_timer();
  // flush() writes nothing once closed; the DISCONNECT goes out all the same.
  if (!write_in_flight_ && !filling_.empty() && state_before != State::opening) write_now();
  if (waiting_connack) {
    ConnectOutcome out;
    out.reason_code = e.reason;
    out.why = why;
    if (connect_done) connect_done(out);
  } else if (established) {
    if (events_.on_lost && !disconnect_done) events_.on_lost(why);
  }
  fail_pending(why);
  if (disconnect_done) disconnect_done();
}

// ---- timer: connect deadline, keep-alive, disconnect
// ---------------------------------------------

void ClientProtocol::arm_timer() {
  Clock::time_point at;
  switch (state_) {
    case State::opening:
    case State::awaiting_connack:
    case State::disconnecting:
    case State::closed:
      at = deadline_;
      break;
    case State::connected: {
      // §3.1.2.10: something goes to the broker within each Keep Alive; a broker silent for
      // one and a half of them is gone (as a broker treats its clients).
      if (keep_alive_.count() == 0) return;
      at = std::min(lost_at(), ping_at());
      break;
    }
    case State::idle:
      return;
  }
  io_.arm_timer(at);
}

// On the grid (EngineConnect::keep_alive_grid), a PINGREQ is due at the step at or before its
// deadline, so that it is never late (§3.1.2.10 bounds the time between our packets); a broker
// is lost at the step at or after its deadline, so that it is never found lost early. Without a
// grid both are the deadlines themselves.
ClientProtocol::Clock::time_point ClientProtocol::lost_at() const {
  return on_grid(last_received_ + keep_alive_ * 3 / 2, grid_, true);
}

ClientProtocol::Clock::time_point ClientProtocol::ping_at() const {
  // Something goes out within each Keep Alive; a broker quiet for one is asked whether it is
  // still there (one PINGREQ outstanding at a time).
  auto due = last_sent_ + keep_alive_;
  if (!ping_outstanding_) due = std::min(due, last_received_ + keep_alive_);
  return on_grid(due, grid_, false);
}

void ClientProtocol::on_timer() {
  const auto now = io_.now();
  switch (state_) {
    case State::opening:
    case State::awaiting_connack:
      if (now < deadline_) return arm_timer();
      return fail_connect(std::string(state_ == State::opening ? "could not connect"
                                                               : "no CONNACK from the broker") +
                          " within " + log::duration_text(params_.connect_timeout));
    case State::disconnecting:
      if (now < deadline_) return arm_timer();
      // The acknowledgements did not all come in time: DISCONNECT anyway. Once it is sent,
      // the broker had its second to close.
      if (!disconnect_queued_) return send_disconnect_and_finish();
      return finish_disconnect();
    case State::closed:
      if (now >= deadline_) io_.close();
      return;
    case State::connected: {
      if (keep_alive_.count() == 0) return;
      if (now >= lost_at()) {
        return lose("nothing from the broker for " + log::duration_text(keep_alive_ * 3 / 2) +
                    " (keep-alive " + log::duration_text(keep_alive_) + ")");
      }
      if (now >= ping_at()) {
        // §3.12: PINGREQ keeps the connection alive and proves the broker still is.
        const auto before = filling_.bytes.size();
        codec::encode_pingreq(filling_.bytes);
        queue_encoded(before);
        ping_outstanding_ = true;
        flush();
      }
      return arm_timer();
    }
    case State::idle:
      return;
  }
}

}  // namespace mcpmqtt::mqtt::protocol

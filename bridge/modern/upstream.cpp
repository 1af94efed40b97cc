#include "bridge/modern/upstream.hpp"

#include <algorithm>

#include "bridge/modern/upstream_detail.hpp"
#include "common/log.hpp"

namespace mcpmqtt::bridge {

using jsonrpc::Id;
using jsonrpc::Message;
using namespace modern_upstream_detail;

namespace modern_upstream_detail {

// params.requestId of notifications/cancelled.
std::optional<Id> cancelled_id(const Message& m) {
  const auto* id = member(m.params(), "requestId");
  if (!id) return std::nullopt;
  if (id->IsString()) return Id::string(std::string(id->GetString(), id->GetStringLength()));
  if (id->IsInt64()) return Id::integer(id->GetInt64());
  return std::nullopt;
}

// The modern versions a -32022 error's data.supported names that the bridge speaks.
bool names_modern_version(const Message& error) {
  if (error.kind() != jsonrpc::Kind::error ||
      error.error().code != modern::code::unsupported_version)
    return false;
  const auto* data = member(&error.json(), "error");
  const auto* supported = member(member(data, "data"), "supported");
  if (!supported || !supported->IsArray()) return false;
  for (const auto& v : supported->GetArray()) {
    if (v.IsString() &&
        modern::is_supported_version(std::string_view(v.GetString(), v.GetStringLength())))
      return true;
  }
  return false;
}

std::string describe_error(const Message& m) {
  return std::to_string(m.error().code) + " \"" + m.error().message + "\"";
}

}  // namespace modern_upstream_detail

const char* to_string(ModernUpstream::Era era) {
  switch (era) {
    case ModernUpstream::Era::unknown:
      return "unknown";
    case ModernUpstream::Era::legacy:
      return "legacy";
    case ModernUpstream::Era::modern:
      return "modern";
    case ModernUpstream::Era::both:
      return "both";
  }
  return "unknown";
}

std::string ModernUpstream::EraMemory::why() const {
  std::lock_guard lock(mu_);
  return why_;
}

void ModernUpstream::EraMemory::set(Era e, std::string why) {
  std::function<void(Era, const std::string&)> listener;
  {
    std::lock_guard lock(mu_);
    const bool changed = era_.load(std::memory_order_relaxed) != e || why_ != why;
    era_.store(e, std::memory_order_relaxed);
    why_ = why;
    if (changed) listener = listener_;
  }
  if (listener) listener(e, why);
}

void ModernUpstream::EraMemory::on_change(std::function<void(Era, const std::string&)> fn) {
  std::lock_guard lock(mu_);
  listener_ = std::move(fn);
}

std::shared_ptr<ModernUpstream> ModernUpstream::create(std::shared_ptr<Channel> upstream,
                                                       Scheduler& scheduler, Options options) {
  return std::shared_ptr<ModernUpstream>(
      new ModernUpstream(std::move(upstream), scheduler, std::move(options)));
}

ModernUpstream::ModernUpstream(std::shared_ptr<Channel> upstream, Scheduler& scheduler,
                               Options options)
    : upstream_(std::move(upstream)), scheduler_(scheduler), options_(std::move(options)) {}

ModernUpstream::~ModernUpstream() {
  cancel_timers();
}

std::string ModernUpstream::describe() const {
  return upstream_->describe() + (era_ == Era::modern ? " (" + version_ + ")" : "");
}

void ModernUpstream::start(Receiver receiver) {
  if (started_) return;
  started_ = true;
  receiver_ = std::move(receiver);
  std::weak_ptr<ModernUpstream> weak = weak_from_this();
  upstream_->start({[weak](Message m) {
                      if (auto self = weak.lock()) self->on_upstream_message(std::move(m));
                    },
                    [weak](const CloseReason& why) {
                      if (auto self = weak.lock()) self->on_upstream_close(why);
                    },
                    [weak](const std::string& detail) {
                      auto self = weak.lock();
                      if (self && self->receiver_.on_interrupted)
                        self->receiver_.on_interrupted(detail);
                    }});
}

void ModernUpstream::send(Message m) {
  switch (phase_) {
    case Phase::legacy:
      return to_upstream(std::move(m));
    case Phase::modern:
      return on_client_message(std::move(m));
    case Phase::closed:
      return;
    case Phase::waiting_initialize:
      if (m.is_request() && m.method() == "initialize") return on_initialize(std::move(m));
      return hold(std::move(m));
    case Phase::probing:
    case Phase::confirming:
    case Phase::initializing:
    case Phase::rediscovering:
      return hold(std::move(m));
  }
}

void ModernUpstream::close(const CloseReason& why) {
  if (phase_ == Phase::closed) return;
  phase_ = Phase::closed;
  cancel_timers();
  upstream_->close(why);
  if (probe_) probe_->close(why);
  held_.clear();
  calls_.clear();
  inputs_.clear();
  own_.clear();
  listens_.clear();
  subscribe_waiters_.clear();
}

void ModernUpstream::cancel_timers() {
  auto cancel = [this](Scheduler::TimerId& t) {
    if (t) scheduler_.cancel(t);
    t = 0;
  };
  cancel(probe_timer_);
  cancel(listen_retry_timer_);
  for (auto& l : listens_)
    cancel(l.ack_timer);
  for (auto& [id, c] : calls_)
    cancel(c.pause);
}

void ModernUpstream::to_client(Message m) {
  if (phase_ == Phase::closed || !receiver_.on_message) return;
  receiver_.on_message(std::move(m));
}

void ModernUpstream::to_upstream(Message m) {
  upstream_->send(std::move(m));
}

modern::Envelope ModernUpstream::envelope(bool with_log_level) const {
  modern::Envelope e;
  e.protocol_version = version_.empty() ? std::string(modern::kVersion) : version_;
  e.client_capabilities_json = client_capabilities_json_;
  e.client_info_json = client_info_json_;
  if (with_log_level) {
    if (log_level_)
      e.log_level = log_level_;
    else if (logging_)
      e.log_level = "debug";  // a 2025 server logs at its discretion until told a level
  }
  return e;
}

std::string ModernUpstream::fallback_server_info() const {
  return R"({"name":)" +
         jsonrpc::quote(options_.server_name.empty() ? "mcp-mqtt-bridge upstream"
                                                     : options_.server_name) +
         R"(,"version":"unknown"})";
}

Id ModernUpstream::next_upstream_id(Own kind, const Id& client_id, std::uint64_t listen) {
  // Strings a client is unlikely to use: while legacy, a late answer to the probe must not be
  // mistaken for the answer to one of the client's requests.
  Id id = Id::string("mcpmqtt-egress-" + std::to_string(next_id_++));
  own_[id] = OwnRequest{kind, client_id, listen};
  return id;
}

// ---- from the MQTT side --------------------------------------------------------------------

void ModernUpstream::hold(Message m) {
  if (held_.size() >= options_.max_held) {
    if (m.is_request()) {
      return to_client(Message::error(
          m.id(), connection_closed,
          "the session is still starting (" + std::to_string(held_.size()) +
              " messages wait for initialize to be answered); send after initialize"));
    }
    log::bridge()->warn(
        "{} dropped a {} that came while initialize was unanswered and {} others wait",
        options_.log_prefix, m.method(), held_.size());
    return;
  }
  held_.push_back(std::move(m));
}

void ModernUpstream::release_held() {
  auto held = std::move(held_);
  held_.clear();
  for (auto& m : held) {
    if (phase_ == Phase::closed) return;
    send(std::move(m));
  }
}

void ModernUpstream::on_initialize(Message m) {
  const auto* params = m.params();
  requested_version_ = string_member(params, "protocolVersion").value_or("");
  if (const auto* caps = member(params, "capabilities"); caps && caps->IsObject())
    client_capabilities_json_ = jsonrpc::to_json(*caps);
  if (const auto* info = member(params, "clientInfo"); info && info->IsObject())
    client_info_json_ = jsonrpc::to_json(*info);
  const auto* reads = member(member(params, "_meta"), modern::bridge_key::reads_input_keys);
  wants_modern_ = reads && reads->IsBool() && reads->GetBool();
  initialize_ = std::move(m);
  known_ = options_.memory ? options_.memory->get() : Era::unknown;
  if (options_.mode == Mode::modern || known_ == Era::modern) return start_probe(true);
  if (known_ == Era::legacy) return send_initialize_upstream();
  if (known_ == Era::both) return wants_modern_ ? start_probe(true) : send_initialize_upstream();
  // Nothing known: a discover that lists 2026-07-28 is followed by an initialize, unless that
  // would open a 2025 upstream session for a client that wants a modern one.
  confirm_both_eras_ = options_.probe_channel || !wants_modern_;
  start_probe(!options_.probe_channel);
}

void ModernUpstream::on_client_message(Message m) {
  switch (m.kind()) {
    case jsonrpc::Kind::request:
      return on_client_request(std::move(m));
    case jsonrpc::Kind::result:
    case jsonrpc::Kind::error:
      return on_client_response(std::move(m));
    case jsonrpc::Kind::notification:
      break;
  }
  if (m.method() == "notifications/cancelled") return on_client_cancel(m);
  // notifications/initialized belongs to the initialize answered here; roots/list_changed has no
  // counterpart in 2026-07-28 (roots are asked for per request); nothing else goes upstream.
  if (m.method() != "notifications/initialized") {
    log::bridge()->debug("{} {} from the MQTT client has no 2026-07-28 counterpart; dropped",
                         options_.log_prefix, m.method());
  }
}

void ModernUpstream::on_client_request(Message m) {
  const auto& method = m.method();
  if (method == "ping") return answer(m.id(), "{}");  // 2026-07-28 has no ping upstream
  if (method == "logging/setLevel") return on_set_level(m);
  if (method == "resources/subscribe") return on_subscribe(m, true);
  if (method == "resources/unsubscribe") return on_subscribe(m, false);
  if (method == "initialize") {
    return answer_error(m.id(), invalid_request,
                        "this session is already initialized; use a fresh MQTT client id for "
                        "every initialize (004 §MQTT Client ID)");
  }
  if (method == "subscriptions/listen") {
    return answer_error(m.id(), method_not_found,
                        "Method not found: subscriptions/listen is not served on a 2025 session "
                        "over MQTT; use resources/subscribe and the capability topic");
  }
  start_call(std::move(m));
}

void ModernUpstream::answer(const Id& id, std::string result_json) {
  to_client(Message::result(id, result_json));
}

void ModernUpstream::answer_error(const Id& id, int code, const std::string& message) {
  to_client(Message::error(id, code, message));
}

void ModernUpstream::on_set_level(const Message& m) {
  if (!logging_) {
    return answer_error(m.id(), method_not_found,
                        "Method not found: the server does not declare the logging capability");
  }
  const auto level = string_member(m.params(), "level");
  if (!level || !modern::log_level_rank(*level)) {
    return answer_error(m.id(), invalid_params,
                        "logging/setLevel needs params.level, one of debug, info, notice, "
                        "warning, error, critical, alert, emergency");
  }
  // 2026-07-28 has no setLevel: the level travels in the envelope of every later request
  // (io.modelcontextprotocol/logLevel, basic/index §_meta).
  log_level_ = *level;
  answer(m.id(), "{}");
}

void ModernUpstream::on_subscribe(const Message& m, bool subscribe) {
  if (!subscribe_) {
    return answer_error(m.id(), method_not_found,
                        "Method not found: the server does not declare resources.subscribe");
  }
  const auto uri = string_member(m.params(), "uri");
  if (!uri || uri->empty()) {
    return answer_error(m.id(), invalid_params, m.method() + " needs params.uri (a string)");
  }
  if (!subscribe) {
    if (!uris_.erase(*uri)) return answer(m.id(), "{}");
    const auto before = next_listen_seq_;
    update_listen();
    if (next_listen_seq_ == before) return answer(m.id(), "{}");
    // Answered once the listen without the URI has replaced the one with it: no update of the
    // URI follows the answer.
    subscribe_waiters_.push_back({m.id(), next_listen_seq_ - 1});
    return;
  }
  if (uris_.count(*uri)) return answer(m.id(), "{}");
  if (listen_unsupported_) {
    return answer_error(m.id(), internal_error,
                        "the server refused subscriptions/listen, which carries resource "
                        "updates in 2026-07-28");
  }
  if (uris_.size() >= options_.max_subscriptions) {
    return answer_error(m.id(), connection_closed,
                        "this session already holds the maximum of " +
                            std::to_string(options_.max_subscriptions) + " resource subscriptions");
  }
  uris_.insert(*uri);
  const auto before = next_listen_seq_;
  update_listen();
  if (next_listen_seq_ == before) return answer(m.id(), "{}");
  // Answered once a listen that carries the URI is acknowledged: updates after the answer are
  // then sure to be delivered.
  subscribe_waiters_.push_back({m.id(), next_listen_seq_ - 1});
}

void ModernUpstream::on_client_cancel(const Message& m) {
  const auto target = cancelled_id(m);
  if (!target) return;
  if (auto it = calls_.find(*target); it != calls_.end()) {
    auto& call = it->second;
    const std::string reason = "cancelled by the MQTT client";
    if (call.attempt) {
      own_.erase(*call.attempt);
      cancel_upstream(*call.attempt, reason);
    }
    cancel_inputs(call, reason);
    if (call.pause) scheduler_.cancel(call.pause);
    calls_.erase(it);
    return;
  }
  std::erase_if(subscribe_waiters_,
                [&](const SubscribeWaiter& w) { return w.client_id == *target; });
}

void ModernUpstream::on_client_response(Message m) {
  const auto it = inputs_.find(m.id());
  if (it == inputs_.end()) {
    log::bridge()->debug("{} dropped a response from the MQTT client to {}: no such input request",
                         options_.log_prefix, m.id().to_string());
    return;
  }
  const Id client_id = it->second;
  inputs_.erase(it);
  on_input_answer(client_id, std::move(m));
}

// ---- from the upstream ---------------------------------------------------------------------

void ModernUpstream::on_upstream_message(Message m) {
  if (phase_ == Phase::closed) return;
  if (m.is_response() && !own_.empty()) {
    if (auto it = own_.find(m.id()); it != own_.end()) {
      const OwnRequest own = it->second;
      own_.erase(it);
      return on_own_response(own, std::move(m));
    }
  }
  switch (phase_) {
    case Phase::legacy:
      return to_client(std::move(m));
    case Phase::initializing:
      if (m.is_response() && initialize_ && m.id() == initialize_->id())
        return on_initialize_answer(std::move(m));
      return to_client(std::move(m));
    case Phase::confirming:
      if (!probe_ && m.is_response() && initialize_ && m.id() == initialize_->id())
        return on_confirm_answer(&m, {});
      [[fallthrough]];
    case Phase::modern:
      break;
    default:
      // Nothing of the session has reached the server yet: nobody asked, nobody will answer.
      if (m.is_request()) {
        return to_upstream(Message::error(
            m.id(), invalid_request, "the session is not initialized yet; no request is taken"));
      }
      log::bridge()->debug("{} dropped a {} from the server while negotiating", options_.log_prefix,
                           jsonrpc::to_string(m.kind()));
      return;
  }
  if (m.is_response()) {
    log::bridge()->debug("{} dropped a response to {}: not in flight (cancelled)",
                         options_.log_prefix, m.id().to_string());
    return;
  }
  if (m.is_request()) {
    // 2026-07-28 has no server→client requests (basic/patterns/mrtr): nobody would answer it.
    return to_upstream(
        Message::error(m.id(), method_not_found,
                       "Method not found: " + m.method() +
                           " — a 2026-07-28 server asks the client with an input_required result"));
  }
  if (m.method() == "notifications/subscriptions/acknowledged" || m.subscription_id().has_value()) {
    return on_listen_notification(std::move(m));
  }
  if (m.method() == "notifications/cancelled") {
    // A server ends a listen on stdio by cancelling it (subscriptions §Cancellation).
    if (auto id = cancelled_id(m); id && find_listen(*id)) {
      own_.erase(*id);
      return on_listen_end(*id, "the server cancelled it", false);
    }
    return;
  }
  // Progress and log messages of a request in flight.
  to_client(std::move(m));
}

void ModernUpstream::on_upstream_close(const CloseReason& why) {
  if (phase_ == Phase::closed) return;
  const bool negotiating = phase_ == Phase::probing || phase_ == Phase::rediscovering ||
                           phase_ == Phase::confirming || phase_ == Phase::waiting_initialize;
  if (negotiating && initialize_) {
    // The client's initialize never reached the server: answer it with what ended the upstream
    // (as the upstream would have, had it carried it).
    to_client(Message::error(initialize_->id(), connection_closed, why.detail));
  }
  phase_ = Phase::closed;
  cancel_timers();
  if (probe_) probe_->close(why);
  held_.clear();
  calls_.clear();
  inputs_.clear();
  own_.clear();
  listens_.clear();
  subscribe_waiters_.clear();
  // The splice answers every request of the client still pending, naming `why`.
  if (receiver_.on_close) receiver_.on_close(why);
}

void ModernUpstream::on_own_response(const OwnRequest& own, Message m) {
  switch (own.kind) {
    case Own::probe:
    case Own::discover:
      if (probe_id_ && m.id() == *probe_id_) on_probe_answer(&m, {});
      return;
    case Own::attempt:
      return on_attempt_answer(own.client_id, std::move(m));
    case Own::tools:
      return on_tools_page(m);
    case Own::listen: {
      const bool refused = m.kind() == jsonrpc::Kind::error;
      return on_listen_end(m.id(),
                           refused ? "the server answered " + describe_error(m)
                                   : "the server ended it with its result",
                           refused);
    }
  }
}

}  // namespace mcpmqtt::bridge

#include "bridge/modern/upstream.hpp"

#include <algorithm>

#include "common/log.hpp"

namespace mcpmqtt::bridge {

namespace {

using jsonrpc::Id;
using jsonrpc::Message;
using jsonrpc::code::connection_closed;
using jsonrpc::code::internal_error;
using jsonrpc::code::invalid_params;
using jsonrpc::code::invalid_request;
using jsonrpc::code::method_not_found;

auto logger() {
  static auto l = log::get("bridge");
  return l;
}

std::string ms_text(std::chrono::milliseconds ms) {
  return std::to_string(ms.count()) + " ms";
}

const rapidjson::Value* member(const rapidjson::Value* v, const char* name) {
  if (!v || !v->IsObject()) return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

std::optional<std::string> string_member(const rapidjson::Value* v, const char* name) {
  const auto* m = member(v, name);
  if (!m || !m->IsString()) return std::nullopt;
  return std::string(m->GetString(), m->GetStringLength());
}

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

}  // namespace

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
    logger()->warn("{} dropped a {} that came while initialize was unanswered and {} others wait",
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
    logger()->debug("{} {} from the MQTT client has no 2026-07-28 counterpart; dropped",
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
    logger()->debug("{} dropped a response from the MQTT client to {}: no such input request",
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
      logger()->debug("{} dropped a {} from the server while negotiating", options_.log_prefix,
                      jsonrpc::to_string(m.kind()));
      return;
  }
  if (m.is_response()) {
    logger()->debug("{} dropped a response to {}: not in flight (cancelled)", options_.log_prefix,
                    m.id().to_string());
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

// ---- negotiation -----------------------------------------------------------------------------

void ModernUpstream::start_probe(bool on_upstream) {
  phase_ = phase_ == Phase::initializing ? Phase::rediscovering : Phase::probing;
  const std::string params = modern::with_envelope("", envelope(false));
  std::weak_ptr<ModernUpstream> weak = weak_from_this();
  if (on_upstream) {
    probe_id_ = next_upstream_id(phase_ == Phase::probing ? Own::probe : Own::discover);
    to_upstream(Message::request(*probe_id_, "server/discover", params));
  } else {
    probe_ = options_.probe_channel();
    if (!probe_) {
      return on_probe_answer(nullptr, "the probe copy of the server could not be started");
    }
    probe_id_ = Id::string("mcpmqtt-egress-probe");
    probe_->start({[weak](Message m) {
                     auto self = weak.lock();
                     if (!self || !self->probe_id_ || !m.is_response() ||
                         m.id() != *self->probe_id_)
                       return;
                     if (self->phase_ == Phase::confirming) return self->on_confirm_answer(&m, {});
                     self->on_probe_answer(&m, {});
                   },
                   [weak](const CloseReason& why) {
                     auto self = weak.lock();
                     if (!self) return;
                     const auto what = "the probe copy of the server ended (" + why.detail + ")";
                     if (self->phase_ == Phase::confirming)
                       return self->on_confirm_answer(nullptr, what);
                     self->on_probe_answer(nullptr, what);
                   }});
    probe_->send(Message::request(*probe_id_, "server/discover", params));
  }
  if (phase_ == Phase::closed) return;
  arm_probe_timer("server/discover", &ModernUpstream::on_probe_answer);
}

void ModernUpstream::arm_probe_timer(const char* what, AnswerHandler handler) {
  if (probe_timer_) scheduler_.cancel(probe_timer_);
  std::weak_ptr<ModernUpstream> weak = weak_from_this();
  probe_timer_ = scheduler_.schedule(options_.discover_timeout, [weak, what, handler] {
    auto self = weak.lock();
    if (!self) return;
    self->probe_timer_ = 0;
    ((*self).*handler)(nullptr, std::string("no answer to ") + what + " within " +
                                    ms_text(self->options_.discover_timeout));
  });
}

void ModernUpstream::end_probe_channel() {
  if (probe_id_ && own_.erase(*probe_id_) && phase_ != Phase::closed) {
    // Still in flight on the upstream: stop waiting for it (HTTP: its stream is closed).
    cancel_upstream(*probe_id_, "no longer needed");
  }
  probe_id_.reset();
  if (probe_timer_) scheduler_.cancel(probe_timer_);
  probe_timer_ = 0;
  // The copy of the server only answered the probe (stdio: its stdin is closed, it exits).
  if (probe_) probe_->close({CloseReason::Kind::normal, "the probe is answered"});
}

void ModernUpstream::on_probe_answer(const Message* answer, const std::string& why_not) {
  if ((phase_ != Phase::probing && phase_ != Phase::rediscovering) || !probe_id_) return;
  std::string why = why_not;
  if (answer && answer->kind() == jsonrpc::Kind::result) {
    const auto* result = answer->result_value();
    auto discovered = result ? modern::read_discover_result(*result)
                             : Expected<modern::Discovered, std::string>(
                                   unexpected(std::string("the result is missing")));
    if (discovered) {
      version_ = modern::common_modern_version(*discovered);
      if (!version_.empty()) {
        if (confirm_both_eras_ && phase_ == Phase::probing) return start_confirm(*discovered);
        std::string because = "server/discover lists " + version_;
        Era as = Era::modern;
        if (phase_ == Phase::rediscovering) {
          because = "initialize is refused with -32022 and " + because;
        } else if (options_.mode == Mode::modern) {
          because += " (\"protocol\": \"modern\")";
        } else if (known_ == Era::both) {
          as = Era::both;
          because += " and the session's client is the bridge's ingress serving 2026-07-28";
        } else if (known_ == Era::unknown) {
          as = Era::unknown;  // whether it speaks 2025 too is left to a 2025 session
          because += " and the session's client is the bridge's ingress serving 2026-07-28";
        } else {
          because += " (remembered: a 2026-only server)";
        }
        end_probe_channel();
        return become_modern(*discovered, because, as);
      }
      std::string listed;
      for (const auto& v : discovered->supported_versions)
        listed += (listed.empty() ? "" : ", ") + v;
      why = "server/discover lists no version the bridge speaks (" + listed + ")";
    } else {
      why = "server/discover answered a malformed result: " + discovered.error();
    }
  } else if (answer) {
    why = "server/discover answered " + describe_error(*answer);
  }
  end_probe_channel();
  const bool rediscovering = phase_ == Phase::rediscovering;
  // Decided a moment later: when the failure was the upstream itself going away (an HTTP
  // upstream that cannot be reached answers everything in flight, then closes), the close comes
  // first and the client's initialize gets its reason.
  std::weak_ptr<ModernUpstream> weak = weak_from_this();
  probe_timer_ = scheduler_.schedule(std::chrono::milliseconds(0), [weak, why, rediscovering] {
    auto self = weak.lock();
    if (!self || self->phase_ == Phase::closed) return;
    self->probe_timer_ = 0;
    if (rediscovering) {
      logger()->info("{} the server refused initialize with -32022 and {}; passing its answer on",
                     self->options_.log_prefix, why);
      auto refused = std::move(*self->refused_initialize_);
      self->refused_initialize_.reset();
      self->become_legacy();
      self->to_client(std::move(refused));
      return;
    }
    if (self->options_.mode == Mode::modern) {
      return self->fail_initialize(self->upstream_->describe() +
                                   " does not serve protocol revision " +
                                   std::string(modern::kVersion) +
                                   " (\"protocol\": \"modern\" in its mcpServers entry): " + why);
    }
    logger()->info("{} {}: speaking 2025 (initialize) to the server", self->options_.log_prefix,
                   why);
    self->remember(Era::legacy, why + ": it speaks 2025 (initialize)");
    self->send_initialize_upstream();
  });
}

void ModernUpstream::start_confirm(const modern::Discovered& discovered) {
  // A server that lists 2026-07-28 may speak 2025 as well (the v2 SDK's servers do unless told
  // `legacy: 'reject'`); its discover result cannot say so (it lists modern revisions only), so
  // the client's initialize is tried. On the probe copy when there is one: the session's own
  // child then gets either a plain initialize or 2026 requests, never a refused initialize.
  discovered_ = discovered;
  phase_ = Phase::confirming;
  if (probe_timer_) scheduler_.cancel(probe_timer_);
  probe_timer_ = 0;
  if (probe_) {
    probe_id_ = Id::string("mcpmqtt-egress-confirm");
    probe_->send(initialize_->with_id(*probe_id_));
    if (phase_ != Phase::confirming) return;
    arm_probe_timer("initialize", &ModernUpstream::on_confirm_answer);
    return;
  }
  // HTTP: the initialize itself; answered, it has opened the upstream session the client keeps.
  // (The splice times it out like any initialize.)
  probe_id_.reset();
  to_upstream(*initialize_);
}

void ModernUpstream::on_confirm_answer(const Message* answer, const std::string& why_not) {
  if (phase_ != Phase::confirming) return;
  const bool on_probe = probe_ != nullptr;
  if (answer && answer->kind() == jsonrpc::Kind::result) {
    const std::string why =
        "server/discover lists " + version_ +
        " and initialize is answered too: the server speaks both eras; 2025 to MQTT clients that "
        "initialize (004 §Initialization: nothing is lost), " +
        version_ + " to the bridge's ingress serving 2026-07-28 clients";
    remember(Era::both, why);
    if (wants_modern_) {
      // stdio only (the copy answered): the session's own child gets 2026 requests.
      end_probe_channel();
      return become_modern(discovered_, why, Era::both);
    }
    logger()->info("{} speaking 2025 (initialize) to a server of both eras", options_.log_prefix);
    if (on_probe) {
      end_probe_channel();
      return send_initialize_upstream();
    }
    become_legacy();
    return to_client(*answer);
  }
  const std::string why = answer ? "initialize is answered " + describe_error(*answer) : why_not;
  if (on_probe) end_probe_channel();
  // Decided a moment later, as for the probe: an upstream that cannot be reached answers what
  // is in flight and then closes, and the client's initialize gets that reason instead.
  std::weak_ptr<ModernUpstream> weak = weak_from_this();
  if (probe_timer_) scheduler_.cancel(probe_timer_);
  probe_timer_ = scheduler_.schedule(std::chrono::milliseconds(0), [weak, why] {
    auto self = weak.lock();
    if (!self || self->phase_ != Phase::confirming) return;
    self->probe_timer_ = 0;
    self->become_modern(
        self->discovered_,
        "server/discover lists " + self->version_ + " and " + why + ": a 2026-only server",
        Era::modern);
  });
}

void ModernUpstream::send_initialize_upstream() {
  phase_ = Phase::initializing;
  to_upstream(*initialize_);
}

void ModernUpstream::on_initialize_answer(Message m) {
  if (options_.mode == Mode::automatic && names_modern_version(m)) {
    // A 2026-only server refuses initialize naming the modern versions (basic/versioning
    // §Backward Compatibility): discover on the upstream, then speak 2026-07-28.
    logger()->info("{} the server refused initialize with -32022 naming {}; trying server/discover",
                   options_.log_prefix, modern::kVersion);
    refused_initialize_ = std::move(m);
    return start_probe(true);
  }
  // (A server known to speak both eras stays known so: this session chose 2025.)
  if (!options_.memory || options_.memory->get() != Era::both)
    remember(Era::legacy, "initialize is answered: it speaks 2025");
  become_legacy();
  to_client(std::move(m));
}

void ModernUpstream::become_legacy() {
  phase_ = Phase::legacy;
  era_ = Era::legacy;
  release_held();
}

void ModernUpstream::remember(Era era, const std::string& why) {
  if (!options_.memory || options_.memory->get() == era) return;
  options_.memory->set(era, why);
  logger()->info("{} the server's protocol era is {} (remembered for its next sessions): {}",
                 options_.log_prefix, to_string(era), why);
}

void ModernUpstream::become_modern(modern::Discovered discovered, const std::string& why,
                                   Era remember_as) {
  refused_initialize_.reset();
  discovered_ = std::move(discovered);
  logging_ = modern::has_capability(discovered_.capabilities_json, "logging");
  subscribe_ = modern::has_capability(discovered_.capabilities_json, "resources.subscribe");
  phase_ = Phase::modern;
  era_ = Era::modern;
  if (remember_as != Era::unknown) remember(remember_as, why);
  logger()->info("{} the server speaks {}: the session is translated ({})", options_.log_prefix,
                 version_, why);
  // 004 §Initialization: the answer to the client's initialize, from what discover said.
  answer(initialize_->id(),
         modern::legacy_initialize_result(discovered_, requested_version_, fallback_server_info()));
  if (phase_ == Phase::closed) return;
  update_listen();
  release_held();
}

void ModernUpstream::fail_initialize(const std::string& message) {
  logger()->warn("{} {}", options_.log_prefix, message);
  to_client(Message::error(initialize_->id(), internal_error, message));
  CloseReason why{CloseReason::Kind::error, message};
  close(why);
  if (receiver_.on_close) receiver_.on_close(why);
}

// ---- modern requests -------------------------------------------------------------------------

void ModernUpstream::start_call(Message m) {
  const Id id = m.id();
  if (calls_.count(id)) {
    // The splice refuses duplicate ids in flight; this is the adapter's own guard.
    return answer_error(
        id, invalid_request,
        "request id " + id.to_string() + " is already in use by a request in flight");
  }
  const bool needs_tools =
      m.method() == "tools/call" && options_.tool_headers && !options_.tool_headers->listed();
  auto it = calls_.emplace(id, Call(std::move(m))).first;
  if (needs_tools) {
    // SEP-2243: a tools/call carries the Mcp-Param-{Name} headers its tool's annotations name;
    // nobody listed the tools yet, so the adapter does first.
    tool_waiters_.push_back(id);
    if (tool_pages_ == 0) list_tools({});
    return;
  }
  send_attempt(it->second, id);
}

void ModernUpstream::list_tools(const std::string& cursor) {
  ++tool_pages_;
  const std::string params = modern::with_envelope(
      cursor.empty() ? std::string() : R"({"cursor":)" + jsonrpc::quote(cursor) + "}",
      envelope(false));
  to_upstream(Message::request(next_upstream_id(Own::tools), "tools/list", params));
}

void ModernUpstream::on_tools_page(const Message& m) {
  const auto* result = m.kind() == jsonrpc::Kind::result ? m.result_value() : nullptr;
  const auto next = result ? string_member(result, "nextCursor") : std::nullopt;
  const bool more = next && !next->empty() && tool_pages_ < options_.max_tool_pages;
  if (result) options_.tool_headers->learn(*result, !more);
  if (!result) {
    logger()->warn(
        "{} tools/list of the bridge's own (for the Mcp-Param headers of tools/call) "
        "answered {}; calls go without them",
        options_.log_prefix, describe_error(m));
  }
  if (more) return list_tools(*next);
  release_tool_waiters();
}

void ModernUpstream::release_tool_waiters() {
  tool_pages_ = 0;
  auto waiters = std::move(tool_waiters_);
  tool_waiters_.clear();
  for (const auto& id : waiters) {
    if (phase_ == Phase::closed) return;
    // Cancelled meanwhile: no longer a call.
    if (auto it = calls_.find(id); it != calls_.end()) send_attempt(it->second, id);
  }
}

void ModernUpstream::send_attempt(Call& call, const Id& client_id) {
  const Id upstream_id = next_upstream_id(Own::attempt, client_id);
  call.attempt = upstream_id;
  const std::string params =
      modern::request_params(call.request.params(), envelope(true),
                             call.rounds > 0 ? &call.answers : nullptr, call.request_state);
  to_upstream(Message::request(upstream_id, call.request.method(), params));
}

void ModernUpstream::on_attempt_answer(const Id& client_id, Message m) {
  auto it = calls_.find(client_id);
  if (it == calls_.end() || !it->second.attempt || *it->second.attempt != m.id()) return;
  auto& call = it->second;
  call.attempt.reset();
  // Cheap test first: only a result that mentions input_required can be one.
  const auto* result =
      m.kind() == jsonrpc::Kind::result && m.text().find("input_required") != std::string_view::npos
          ? m.result_value()
          : nullptr;
  if (!result || !modern::is_input_required(*result)) {
    if (options_.tool_headers && call.request.method() == "tools/list" &&
        m.kind() == jsonrpc::Kind::result) {
      // A whole listing when the client asked for the first page and there is no next one.
      if (const auto* r = m.result_value()) {
        const bool first = !string_member(call.request.params(), "cursor").has_value();
        const auto next = string_member(r, "nextCursor");
        options_.tool_headers->learn(*r, first && (!next || next->empty()));
      }
    }
    return finish_call(client_id, m.with_id(client_id));
  }
  const std::string& method = call.request.method();
  if (!modern::allows_input_required(method)) {
    return fail_call(client_id, internal_error,
                     "the server answered " + method +
                         " with input_required, which 2026-07-28 allows only on tools/call, "
                         "prompts/get and resources/read (basic/patterns/mrtr §Supported "
                         "Requests)");
  }
  auto input = modern::read_input_required(*result, options_.max_input_requests);
  if (!input) {
    return fail_call(client_id, internal_error,
                     "the server answered " + method +
                         " with a malformed input_required result: " + input.error());
  }
  if (call.rounds >= options_.max_input_rounds) {
    return fail_call(client_id, internal_error,
                     "the server asked for input more than " +
                         std::to_string(options_.max_input_rounds) + " times for one " + method +
                         "; the bridge gave up");
  }
  ++call.rounds;
  start_round(call, client_id, std::move(*input));
}

void ModernUpstream::start_round(Call& call, const Id& client_id, modern::InputRequired input) {
  call.request_state = std::move(input.request_state);
  call.answers.clear();
  call.waiting.clear();
  call.round_size = input.requests.size();
  std::weak_ptr<ModernUpstream> weak = weak_from_this();
  if (input.requests.empty()) {
    // Only requestState: the server wants the same request again a little later.
    call.pause = scheduler_.schedule(options_.empty_round_pause, [weak, client_id] {
      auto self = weak.lock();
      if (!self) return;
      auto it = self->calls_.find(client_id);
      if (it == self->calls_.end()) return;
      it->second.pause = 0;
      self->send_attempt(it->second, client_id);
    });
    return;
  }
  // One server→client request per key, all at once (the v2 SDK's legacy shim does the same),
  // each carrying the server's key and the round's size for a bridge on the other side.
  std::vector<Message> out;
  out.reserve(input.requests.size());
  for (const auto& r : input.requests) {
    const Id input_id = Id::string("mcpmqtt-input-" + std::to_string(next_input_++));
    inputs_[input_id] = client_id;
    call.waiting[input_id] = {r.key, r.method};
    out.push_back(Message::request(
        input_id, r.method,
        modern::input_request_params(r.params_json, r.key, input.requests.size())));
  }
  for (auto& m : out) {
    // The splice may refuse one at once (too many in flight): the call then failed, and the
    // rest of the round is not sent.
    if (!calls_.count(client_id)) break;
    to_client(std::move(m));
  }
}

void ModernUpstream::on_input_answer(const Id& client_id, Message m) {
  auto it = calls_.find(client_id);
  if (it == calls_.end()) return;
  auto& call = it->second;
  auto w = call.waiting.find(m.id());
  if (w == call.waiting.end()) return;
  const auto [key, method] = w->second;
  call.waiting.erase(w);
  if (m.kind() == jsonrpc::Kind::error) {
    cancel_inputs(call, "another input request of the round failed");
    jsonrpc::Error e = m.error();
    e.message = method + " (input \"" + key + "\") to the MQTT client failed: " + e.message;
    return finish_call(client_id, Message::error(client_id, e));
  }
  const auto* result = m.result_value();
  call.answers.push_back({key, result ? jsonrpc::to_json(*result) : std::string("{}")});
  if (call.waiting.empty()) send_attempt(call, client_id);
}

void ModernUpstream::cancel_inputs(Call& call, const std::string& reason) {
  std::vector<Message> out;
  for (const auto& [id, key_method] : call.waiting) {
    inputs_.erase(id);
    out.push_back(Message::notification(
        "notifications/cancelled",
        R"({"requestId":)" + id.to_json() + R"(,"reason":)" + jsonrpc::quote(reason) + "}"));
  }
  call.waiting.clear();
  for (auto& m : out)
    to_client(std::move(m));
}

void ModernUpstream::cancel_upstream(const Id& upstream_id, const std::string& reason) {
  // stdio: notifications/cancelled (draft cancellation); HTTP: the client closes that request's
  // stream instead of posting it (streamable-http §Cancellation).
  to_upstream(Message::notification(
      "notifications/cancelled",
      modern::with_envelope(R"({"requestId":)" + upstream_id.to_json() + R"(,"reason":)" +
                                jsonrpc::quote(reason) + "}",
                            envelope(false))));
}

void ModernUpstream::finish_call(const Id& client_id, Message answer) {
  if (auto it = calls_.find(client_id); it != calls_.end()) {
    if (it->second.pause) scheduler_.cancel(it->second.pause);
    if (it->second.attempt) own_.erase(*it->second.attempt);
    calls_.erase(it);
  }
  to_client(std::move(answer));
}

void ModernUpstream::fail_call(const Id& client_id, int code, const std::string& message) {
  logger()->warn("{} request {}: {}", options_.log_prefix, client_id.to_string(), message);
  finish_call(client_id, Message::error(client_id, code, message));
}

// ---- listen ----------------------------------------------------------------------------------

ModernUpstream::Listen* ModernUpstream::find_listen(const Id& id) {
  for (auto& l : listens_)
    if (l.id == id) return &l;
  return nullptr;
}

void ModernUpstream::update_listen() {
  const std::vector<std::string> uris(uris_.begin(), uris_.end());
  const auto filter = modern::honoured_filter(discovered_.capabilities_json, uris);
  if (!listens_.empty() && listens_.back().filter == filter) return;
  if (filter.empty()) {
    auto all = std::move(listens_);
    listens_.clear();
    for (auto& l : all)
      close_listen(l, "nothing to listen to");
    active_listen_.reset();
    return;
  }
  open_listen();
}

void ModernUpstream::open_listen() {
  if (phase_ != Phase::modern || listen_unsupported_) return;
  if (listen_retry_timer_) scheduler_.cancel(listen_retry_timer_);
  listen_retry_timer_ = 0;
  const std::vector<std::string> uris(uris_.begin(), uris_.end());
  const auto filter = modern::honoured_filter(discovered_.capabilities_json, uris);
  if (filter.empty()) return;
  // A newer listen supersedes one that is not acknowledged yet; the active one stays until the
  // new one is acknowledged, so nothing is missed in between.
  for (auto it = listens_.begin(); it != listens_.end();) {
    if (!it->acknowledged && (!active_listen_ || it->seq != *active_listen_)) {
      auto l = *it;
      it = listens_.erase(it);
      close_listen(l, "superseded by a listen with other filters");
    } else {
      ++it;
    }
  }
  Listen l;
  l.seq = next_listen_seq_++;
  l.id = next_upstream_id(Own::listen, {}, l.seq);
  l.filter = filter;
  std::weak_ptr<ModernUpstream> weak = weak_from_this();
  const Id id = l.id;
  l.ack_timer = scheduler_.schedule(options_.discover_timeout, [weak, id] {
    auto self = weak.lock();
    if (!self) return;
    if (auto* found = self->find_listen(id)) found->ack_timer = 0;
    self->on_listen_end(id, "no acknowledgement within " + ms_text(self->options_.discover_timeout),
                        false);
  });
  listens_.push_back(l);
  to_upstream(
      Message::request(id, "subscriptions/listen", modern::listen_params(filter, envelope(false))));
}

void ModernUpstream::on_listen_notification(Message m) {
  const auto sid = m.subscription_id();
  Listen* l = sid ? find_listen(*sid) : nullptr;
  if (!l) return;
  if (m.method() == "notifications/subscriptions/acknowledged") {
    if (!l->acknowledged) on_listen_ack(*l);
    return;
  }
  // Only the active listen speaks: around a switch the old and the new one may both carry an
  // event, and the client gets it once.
  if (!active_listen_ || l->seq != *active_listen_) return;
  if (m.method() == "notifications/tools/list_changed" && options_.tool_headers)
    options_.tool_headers->forget();  // the annotations may have changed with the tools
  auto params = modern::without_subscription_id(m.params());
  if (params == "{}") params.clear();
  to_client(Message::notification(m.method(), params));
}

void ModernUpstream::on_listen_ack(const Listen& acked) {
  const std::uint64_t seq = acked.seq;
  if (auto* l = find_listen(acked.id)) {
    l->acknowledged = true;
    l->acknowledged_at = scheduler_.now();
    if (l->ack_timer) scheduler_.cancel(l->ack_timer);
    l->ack_timer = 0;
  }
  listen_failures_ = 0;
  if (!active_listen_ || *active_listen_ < seq) {
    active_listen_ = seq;
    for (auto it = listens_.begin(); it != listens_.end();) {
      if (it->seq < seq) {
        auto old = *it;
        it = listens_.erase(it);
        close_listen(old, "replaced by a listen with other filters");
      } else {
        ++it;
      }
    }
  }
  std::vector<Id> ready;
  std::erase_if(subscribe_waiters_, [&](const SubscribeWaiter& w) {
    if (w.listen_seq > seq) return false;
    ready.push_back(w.client_id);
    return true;
  });
  for (const auto& id : ready)
    answer(id, "{}");
}

void ModernUpstream::close_listen(const Listen& l, const std::string& reason) {
  if (l.ack_timer) scheduler_.cancel(l.ack_timer);
  if (own_.erase(l.id)) cancel_upstream(l.id, reason);
}

void ModernUpstream::on_listen_end(const Id& id, const std::string& why, bool refused) {
  const auto it =
      std::find_if(listens_.begin(), listens_.end(), [&](const Listen& l) { return l.id == id; });
  if (it == listens_.end()) return;
  const Listen ended = *it;
  listens_.erase(it);
  if (ended.ack_timer) scheduler_.cancel(ended.ack_timer);
  if (own_.erase(id)) cancel_upstream(id, "not acknowledged in time");
  const bool was_active = active_listen_ && *active_listen_ == ended.seq;
  if (was_active) active_listen_.reset();
  const bool newest = ended.seq + 1 == next_listen_seq_;
  logger()->log(refused ? spdlog::level::warn : spdlog::level::info,
                "{} subscriptions/listen ended: {}", options_.log_prefix, why);
  if (refused && !ended.acknowledged) {
    // A server that refuses listens will not carry updates: say so to whoever waits.
    listen_unsupported_ = true;
    std::vector<Id> waiting;
    for (const auto& w : subscribe_waiters_)
      waiting.push_back(w.client_id);
    subscribe_waiters_.clear();
    for (const auto& wid : waiting)
      answer_error(wid, internal_error,
                   "the server refused subscriptions/listen, which carries resource updates in "
                   "2026-07-28: " +
                       why);
    uris_.clear();
    return;
  }
  // A listen that served for a while is replaced at once (an idle stream the HTTP client gave
  // up on, say); one that failed young backs off, so a server that ends every listen at once is
  // not asked again and again.
  const bool served =
      ended.acknowledged && scheduler_.now() - ended.acknowledged_at >= options_.listen_retry_max;
  if ((was_active || newest) && phase_ == Phase::modern) schedule_listen_retry(served);
}

void ModernUpstream::schedule_listen_retry(bool at_once) {
  if (listen_retry_timer_ || listen_unsupported_) return;
  auto delay = options_.listen_retry_min;
  for (unsigned i = 0; i < listen_failures_ && delay < options_.listen_retry_max; ++i)
    delay *= 2;
  delay = at_once ? std::chrono::milliseconds(0) : std::min(delay, options_.listen_retry_max);
  ++listen_failures_;
  std::weak_ptr<ModernUpstream> weak = weak_from_this();
  listen_retry_timer_ = scheduler_.schedule(delay, [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->listen_retry_timer_ = 0;
    self->open_listen();
  });
}

}  // namespace mcpmqtt::bridge

#include <algorithm>

#include "bridge/modern/upstream.hpp"
#include "bridge/modern/upstream_detail.hpp"

namespace mcpmqtt::bridge {

using jsonrpc::Id;
using jsonrpc::Message;
using namespace modern_upstream_detail;

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
                                    log::duration_text(self->options_.discover_timeout));
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
      log::bridge()->info(
          "{} the server refused initialize with -32022 and {}; passing its answer on",
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
    log::bridge()->info("{} {}: speaking 2025 (initialize) to the server",
                        self->options_.log_prefix, why);
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
    log::bridge()->info("{} speaking 2025 (initialize) to a server of both eras",
                        options_.log_prefix);
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
    log::bridge()->info(
        "{} the server refused initialize with -32022 naming {}; trying server/discover",
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
  log::bridge()->info("{} the server's protocol era is {} (remembered for its next sessions): {}",
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
  log::bridge()->info("{} the server speaks {}: the session is translated ({})",
                      options_.log_prefix, version_, why);
  // 004 §Initialization: the answer to the client's initialize, from what discover said.
  answer(initialize_->id(),
         modern::legacy_initialize_result(discovered_, requested_version_, fallback_server_info()));
  if (phase_ == Phase::closed) return;
  update_listen();
  release_held();
}

void ModernUpstream::fail_initialize(const std::string& message) {
  log::bridge()->warn("{} {}", options_.log_prefix, message);
  to_client(Message::error(initialize_->id(), internal_error, message));
  CloseReason why{CloseReason::Kind::error, message};
  close(why);
  if (receiver_.on_close) receiver_.on_close(why);
}

}  // namespace mcpmqtt::bridge

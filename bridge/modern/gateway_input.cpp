#include <algorithm>

#include "bridge/modern/gateway.hpp"
#include "bridge/modern/gateway_parts.hpp"
#include "bridge/modern/round_state.hpp"
#include "common/hex.hpp"

namespace mcpmqtt::bridge {

using namespace gateway_detail;

namespace {}  // namespace

void ModernGateway::gather(Run& run, const jsonrpc::Message& m) {
  InputRequest in;
  in.server_id = m.id();
  in.method = m.method();
  std::string wanted_key;
  std::optional<std::size_t> round_size;
  if (const Value* params = m.params(); params && params->IsObject()) {
    rapidjson::Document d;
    d.CopyFrom(*params, d.GetAllocator());
    if (d.HasMember("_meta") && d["_meta"].IsObject()) {
      auto& meta = d["_meta"];
      if (const Value* k = member(&meta, modern::bridge_key::input_key); k && k->IsString())
        wanted_key.assign(k->GetString(), k->GetStringLength());
      if (const Value* size = member(member(&meta, modern::bridge_key::input_round), "size");
          size && size->IsUint64() && size->GetUint64() > 0 && size->GetUint64() <= 1024)
        round_size = static_cast<std::size_t>(size->GetUint64());
      meta.RemoveMember(modern::bridge_key::input_key);
      meta.RemoveMember(modern::bridge_key::input_round);
      if (meta.MemberCount() == 0) d.RemoveMember("_meta");
    }
    in.params_json = jsonrpc::to_json(d);
  }
  auto used = [&](const std::string& k) {
    for (const auto* list : {&run.gathering, &run.asked, &run.late})
      for (const auto& x : *list)
        if (x.key == k) return true;
    return false;
  };
  if (!wanted_key.empty() && !used(wanted_key)) {
    in.key = std::move(wanted_key);
  } else {
    // Keys a 2025 server cannot send: invented, unique within the request (mrtr: keys are the
    // server's choice, opaque to the client).
    const std::string kind(modern::capability_for_input(in.method));
    do {
      in.key = kind + "-" + std::to_string(++run.counters[kind]);
    } while (used(in.key));
  }
  if (run.state != RunState::running || !run.call) {
    run.late.push_back(std::move(in));
    return;
  }
  run.gathering.push_back(std::move(in));
  if (round_size) run.round_size = round_size;
  if (run.round_size && run.gathering.size() >= *run.round_size) {
    close_round(run.id);
    return;
  }
  if (run.round_timer) scheduler_.cancel(run.round_timer);
  // Without the egress's round size, a round closes after a quiet window (the v2 SDK's legacy
  // shim sends a round's requests at once); with it, the window is only a fallback.
  const auto wait = run.round_size ? std::max(options_.round_quiet, std::chrono::milliseconds(1000))
                                   : options_.round_quiet;
  std::weak_ptr<ModernGateway> weak = weak_from_this();
  run.round_timer = scheduler_.schedule(wait, [weak, id = run.id] {
    auto self = weak.lock();
    if (!self) return;
    if (auto r = self->runs_.find(id); r != self->runs_.end()) r->second->round_timer = 0;
    self->close_round(id);
  });
}

void ModernGateway::close_round(std::uint64_t run_id) {
  auto r = runs_.find(run_id);
  if (r == runs_.end()) return;
  Run& run = *r->second;
  if (run.round_timer) {
    scheduler_.cancel(run.round_timer);
    run.round_timer = 0;
  }
  if (run.gathering.empty() || run.state != RunState::running || !run.call) return;
  auto c = calls_.find(run.call);
  if (c == calls_.end()) return;
  run.asked = std::move(run.gathering);
  run.gathering.clear();
  run.round_size.reset();
  ask(run, *c->second);
}

void ModernGateway::ask(Run& run, Pending& p) {
  if (!transition(run, RunEvent::asked)) return;
  ++run.round;
  auto nonce = random_bytes(12);
  run.nonce = nonce ? hex_encode(*nonce) : std::to_string(run.id) + "-" + std::to_string(run.round);
  if (run.park_timer) scheduler_.cancel(run.park_timer);
  std::weak_ptr<ModernGateway> weak = weak_from_this();
  run.park_timer =
      scheduler_.schedule(options_.input_timeout, [weak, id = run.id, round = run.round] {
        if (auto self = weak.lock()) self->on_park_timeout(id, round);
      });
  if (run.params_digest.empty() && run.original) {
    run.params_digest = params_digest(*run.original);
    run.original.reset();
  }
  const std::string state =
      mint_round_state(codec_, {run.id, run.nonce, run.round},
                       {run.principal, run.key, run.method, options_.replica}, run.params_digest,
                       to_ms(scheduler_.now()) + options_.input_timeout.count());
  // basic/patterns/mrtr: {resultType: input_required, inputRequests: {key: {method, params}},
  // requestState}; the embedded requests carry no jsonrpc or id.
  std::string requests;
  for (const auto& in : run.asked) {
    requests += (requests.empty() ? "" : ",") + jsonrpc::quote(in.key) + R"(:{"method":)" +
                jsonrpc::quote(in.method) +
                (in.params_json.empty() ? "" : R"(,"params":)" + in.params_json) + "}";
  }
  const std::string body = R"({"resultType":"input_required","inputRequests":{)" + requests +
                           R"(},"requestState":)" + jsonrpc::quote(state) + "}";
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  const auto json = modern::complete_result(d, run.method, run.server_info_json);
  run.call = 0;
  if (!options_.metrics_direction.empty())
    metrics::registry()
        .counter("mcpmqtt_modern_input_rounds_total",
                 "input_required results the modern gateway answered (one per round of "
                 "server→client requests).",
                 {"direction"}, {options_.metrics_direction})
        .inc();
  log::bridge()->debug("{} {} asks the client for input (round {}, {} request(s))",
                       options_.log_prefix, run.method, run.round, run.asked.size());
  finish(p, jsonrpc::Message::result(p.call.message.id(), json), 200, "input_required");
}

void ModernGateway::resume(CallId id, const std::string& state) {
  auto c = calls_.find(id);
  if (c == calls_.end()) return;
  Pending& p = *c->second;
  const auto& m = p.call.message;
  auto fail = [&](const std::string& why) {
    log::bridge()->debug("{} requestState of {} {} refused: {}", options_.log_prefix, m.method(),
                         m.id().to_string(), why);
    refuse(p, modern::invalid_request_state(), 200, "error");
  };
  const auto ticket = open_round_state(codec_, state, {p.call.principal.key, p.key, m.method(), {}},
                                       m, to_ms(scheduler_.now()));
  if (!ticket) return fail(ticket.error());
  auto r = runs_.find(ticket->run);
  if (r == runs_.end() || r->second->state == RunState::running ||
      r->second->nonce != ticket->nonce || r->second->round != ticket->round)
    return fail("the request it belongs to no longer waits for it");
  Run& run = *r->second;

  // mrtr §Error Handling: malformed InputResponses get a JSON-RPC error; the state stays good.
  const Value* responses = member(m.params(), "inputResponses");
  if (responses && !responses->IsNull() && !responses->IsObject()) {
    refuse(p,
           {jsonrpc::code::invalid_params,
            "Invalid params: inputResponses must be an object keyed like the inputRequests",
            {}},
           200, "error");
    return;
  }
  if (!responses || responses->IsNull()) responses = nullptr;
  for (const auto& in : run.asked) {
    const Value* v = member(responses, in.key.c_str());
    if (v && !v->IsObject()) {
      refuse(p,
             {jsonrpc::code::invalid_params,
              "Invalid params: inputResponses[" + jsonrpc::quote(in.key) +
                  "] must be the result object of " + in.method,
              {}},
             200, "error");
      return;
    }
  }
  if (run.state == RunState::settled) {
    // The request ended while it waited (the server gave up, the session went away).
    unsigned status = 200;
    const auto out = to_downstream(run, m.id(), *run.outcome, status);
    transition(run, RunEvent::retried);
    erase_run(run.id);
    finish(p, out, status, out.kind() == jsonrpc::Kind::result ? "result" : "error");
    return;
  }
  auto si = sessions_.find(run.session);
  if (si == sessions_.end()) return fail("its MQTT session is gone");
  Session& s = *si->second;
  std::vector<InputRequest> remaining;
  for (auto& in : run.asked) {
    if (const Value* v = member(responses, in.key.c_str())) {
      deliver(s, jsonrpc::Message::result(in.server_id, jsonrpc::to_json(*v)));
    } else {
      remaining.push_back(std::move(in));  // mrtr §Error Handling: asked again
    }
  }
  for (auto& in : run.late)
    remaining.push_back(std::move(in));
  run.late.clear();
  run.asked.clear();
  if (run.state == RunState::settled || !sessions_.count(run.session)) {
    // The session ended under the deliveries: the retry hears how.
    unsigned status = 200;
    const auto out = run.outcome ? to_downstream(run, m.id(), *run.outcome, status)
                                 : jsonrpc::Message::error(
                                       m.id(), jsonrpc::code::connection_closed,
                                       m.method() + " was not answered: the MQTT session ended");
    erase_run(run.id);
    finish(p, out, status, out.kind() == jsonrpc::Kind::result ? "result" : "closed");
    return;
  }
  if (!transition(run, RunEvent::retried)) return fail("the request it belongs to is not parked");
  p.where = Pending::Where::running;
  p.session = run.session;
  p.run = run.id;
  run.call = p.id;
  if (!remaining.empty()) {
    run.asked = std::move(remaining);
    ask(run, p);
    return;
  }
  if (run.park_timer) {
    scheduler_.cancel(run.park_timer);
    run.park_timer = 0;
  }
  run.progress_token = p.envelope.progress_token;
  run.log_rank.reset();
  if (p.envelope.log_level) run.log_rank = modern::log_level_rank(*p.envelope.log_level);
  set_log_level(s, p.envelope.log_level);
}

void ModernGateway::answer_inputs_with_error(Session* s, Run& run, const std::string& why) {
  for (auto* list : {&run.gathering, &run.asked, &run.late}) {
    for (const auto& in : *list) {
      if (s)
        deliver(*s, jsonrpc::Message::error(in.server_id, jsonrpc::code::internal_error,
                                            in.method + " was not answered: " + why));
    }
    list->clear();
  }
}

void ModernGateway::cancel_run(std::uint64_t run_id, const std::string& why) {
  auto r = runs_.find(run_id);
  if (r == runs_.end()) return;
  auto run = std::move(r->second);
  runs_.erase(r);
  cancel_timers(*run);
  auto si = sessions_.find(run->session);
  if (!run->session || si == sessions_.end()) return;
  Session& s = *si->second;
  s.run = 0;
  // 002 §Cancellation; then the session is closed rather than reused, since a 2025 server may
  // still send messages of the cancelled request.
  deliver(s, jsonrpc::Message::notification("notifications/cancelled",
                                            R"({"requestId":)" + run->upstream_id.to_json() +
                                                R"(,"reason":)" + jsonrpc::quote(why) + "}"));
  answer_inputs_with_error(&s, *run, why);
  drop_session(s.serial, {CloseReason::Kind::normal, "request cancelled: " + why});
}

void ModernGateway::on_park_timeout(std::uint64_t run_id, std::uint32_t round) {
  auto r = runs_.find(run_id);
  if (r == runs_.end() || r->second->state == RunState::running || r->second->round != round)
    return;
  r->second->park_timer = 0;
  log::bridge()->info("{} {} waited {} for the client's input responses; cancelled",
                      options_.log_prefix, r->second->method,
                      log::duration_text(options_.input_timeout));
  if (!r->second->session) {
    transition(*r->second, RunEvent::expired);
    erase_run(run_id);
    return;
  }
  cancel_run(run_id, "no retry with the input responses within " +
                         log::duration_text(options_.input_timeout) +
                         " (ingress.modern.input_timeout_ms)");
}

}  // namespace mcpmqtt::bridge

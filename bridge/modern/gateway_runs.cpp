#include <algorithm>

#include "bridge/modern/gateway.hpp"
#include "bridge/modern/gateway_parts.hpp"

namespace mcpmqtt::bridge {

using namespace gateway_detail;

void ModernGateway::answer_discover(const DiscoverInfo& info, Pending& p) {
  finish(p, jsonrpc::Message::result(p.call.message.id(), discover_result_json(info)), 200,
         "result");
}

void ModernGateway::start_run(Session& s, Pending& p) {
  const auto& m = p.call.message;
  auto owned = std::make_unique<Run>();
  Run& run = *owned;
  run.id = next_run_++;
  run.session = s.serial;
  run.call = p.id;
  run.method = m.method();
  run.key = p.key;
  run.server_name = p.call.server_name;
  run.principal = p.call.principal.key;
  run.original = m;  // shares its text; the digest waits for a round that needs it
  run.server_info_json = s.info.server_info_json;
  if (run.method == "resources/read") {
    if (const Value* uri = member(m.params(), "uri"); uri && uri->IsString())
      run.uri.assign(uri->GetString(), uri->GetStringLength());
  }
  run.upstream_id = jsonrpc::Id::integer(s_next_id(s));
  run.upstream_token = p.envelope.progress_token;
  run.progress_token = p.envelope.progress_token;
  if (p.envelope.log_level) run.log_rank = modern::log_level_rank(*p.envelope.log_level);
  run.allows_input = modern::allows_input_required(run.method);
  s.state = Session::State::busy;
  s.run = run.id;
  p.where = Pending::Where::running;
  p.session = s.serial;
  p.run = run.id;
  const auto upstream =
      jsonrpc::Message::request(run.upstream_id, run.method, modern::without_envelope(m.params()));
  runs_.emplace(run.id, std::move(owned));
  set_log_level(s, p.envelope.log_level);
  deliver(s, upstream);
}

void ModernGateway::set_log_level(Session& s, const std::optional<std::string>& level) {
  // With a logLevel, the server is told the level first, so it sends less (the filter applies
  // anyway); without one the session's level stays and every message is dropped.
  if (!level || !s.info.has_logging || s.log_level == level) return;
  const auto id = jsonrpc::Id::integer(s_next_id(s));
  s.own.push_back(id);
  s.log_level = level;
  deliver(s, jsonrpc::Message::request(id, "logging/setLevel",
                                       R"({"level":)" + jsonrpc::quote(*level) + "}"));
}

jsonrpc::Message ModernGateway::to_downstream(const Run& run, const jsonrpc::Id& id,
                                              const jsonrpc::Message& upstream,
                                              unsigned& status) const {
  if (upstream.kind() == jsonrpc::Kind::result) {
    status = 200;
    const Value* result = upstream.result_value();
    static const Value kEmpty(rapidjson::kObjectType);
    return jsonrpc::Message::result(
        id, modern::complete_result(result ? *result : kEmpty, run.method, run.server_info_json));
  }
  const auto e = modern::modern_error(upstream.error(), run.uri);
  status = modern::http_status_for(e.code);
  return jsonrpc::Message::error(id, e);
}

void ModernGateway::on_final(Session& s, Run& run, const jsonrpc::Message& m) {
  if (run.round_timer) {
    scheduler_.cancel(run.round_timer);
    run.round_timer = 0;
  }
  answer_inputs_with_error(&s, run, "the request they belong to has ended");
  run.session = 0;
  s.run = 0;
  if (run.state != RunState::running) {
    // Parked: the answer waits for the retry (or the end of the state's life).
    if (transition(run, RunEvent::upstream_done)) run.outcome = m;
    release(s);
    return;
  }
  if (run.method == "tools/list" && m.kind() == jsonrpc::Kind::result && m.result_value())
    param_headers_.learn(run.server_name, *m.result_value());
  const CallId call = run.call;
  unsigned status = 200;
  std::optional<jsonrpc::Message> out;
  if (auto c = calls_.find(call); call && c != calls_.end())
    out = to_downstream(run, c->second->call.message.id(), m, status);
  erase_run(run.id);  // `run` is gone
  if (out) {
    if (auto c = calls_.find(call); c != calls_.end())
      finish(*c->second, *out, status, out->kind() == jsonrpc::Kind::result ? "result" : "error");
  }
  release(s);
}

bool ModernGateway::transition(Run& run, RunEvent event) {
  const auto next = next_state(run.state, event);
  if (!next) {
    log::bridge()->error("{} {} run {}: {} cannot happen when {}; ignored", options_.log_prefix,
                         run.method, run.id, to_string(event), to_string(run.state));
    return false;
  }
  run.state = *next;
  return true;
}

void ModernGateway::cancel_timers(Run& run) {
  if (run.round_timer) scheduler_.cancel(run.round_timer);
  if (run.park_timer) scheduler_.cancel(run.park_timer);
  run.round_timer = 0;
  run.park_timer = 0;
}

void ModernGateway::erase_run(std::uint64_t run_id) {
  auto r = runs_.find(run_id);
  if (r == runs_.end()) return;
  cancel_timers(*r->second);
  runs_.erase(r);
}

}  // namespace mcpmqtt::bridge

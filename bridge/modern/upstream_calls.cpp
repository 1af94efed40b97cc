#include <algorithm>

#include "bridge/modern/upstream.hpp"
#include "bridge/modern/upstream_detail.hpp"

namespace mcpmqtt::bridge {

using jsonrpc::Id;
using jsonrpc::Message;
using namespace modern_upstream_detail;

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
    log::bridge()->warn(
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
  log::bridge()->warn("{} request {}: {}", options_.log_prefix, client_id.to_string(), message);
  finish_call(client_id, Message::error(client_id, code, message));
}

}  // namespace mcpmqtt::bridge

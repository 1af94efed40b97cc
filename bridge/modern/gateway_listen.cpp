#include <algorithm>

#include "bridge/modern/gateway.hpp"
#include "bridge/modern/gateway_parts.hpp"

namespace mcpmqtt::bridge {

using namespace gateway_detail;

void ModernGateway::start_listen(Session& s, Pending& p) {
  s.state = Session::State::listening;
  unindex(s);  // a listen's session is not the pool's
  s.listen_call = p.id;
  s.listen_id = p.call.message.id();
  s.listen_acked = false;
  p.where = Pending::Where::listening;
  p.session = s.serial;
  // The ingress's SubscriptionHub answers it on this session (with this id, so subscriptionId
  // is the request's id with its JSON type); the server never sees it.
  deliver(s, jsonrpc::Message::request(*s.listen_id, "subscriptions/listen",
                                       modern::without_envelope(p.call.message.params())));
}

void ModernGateway::on_listen_message(Session& s, const jsonrpc::Message& m) {
  auto c = calls_.find(s.listen_call);
  if (!s.listen_call || c == calls_.end()) return;
  Pending& p = *c->second;
  if (m.is_notification()) {
    const auto& sid = m.subscription_id();
    if (!sid || *sid != *s.listen_id) return;  // untagged list changes of the session
    if (m.method() == "notifications/subscriptions/acknowledged") {
      s.listen_acked = true;
      if (p.responder.notify) p.responder.notify(m);
      // Nothing honoured: the acknowledgement and the result at once, as the v2 SDK does.
      const Value* n = member(m.params(), "notifications");
      if (n && n->IsObject() && n->MemberCount() == 0) {
        const auto serial = s.serial;
        end_listen_gracefully(s);
        drop_session(serial, {CloseReason::Kind::normal, "nothing to listen to"});
      }
      return;
    }
    if (s.listen_acked && p.responder.notify) p.responder.notify(m);
    return;
  }
  if (!m.is_response() || m.id() != *s.listen_id) return;
  if (m.kind() == jsonrpc::Kind::error && !s.listen_acked) {
    // Refused before the acknowledgement (a bad filter): in-band, and the session is done.
    const auto serial = s.serial;
    s.listen_call = 0;
    finish(p, jsonrpc::Message::error(m.id(), m.error()), 200, "error");
    drop_session(serial, {CloseReason::Kind::normal, "subscriptions/listen refused"});
    return;
  }
  // The session is ending (server gone, shutdown): a graceful end of the listen either way.
  end_listen_gracefully(s);
}

void ModernGateway::end_listen_gracefully(Session& s) {
  auto c = calls_.find(s.listen_call);
  s.listen_call = 0;
  if (c == calls_.end() || !s.listen_id) return;
  // schema SubscriptionsListenResult: the empty result with _meta.subscriptionId.
  std::string json = R"({"resultType":"complete","_meta":{)" +
                     jsonrpc::quote(modern::key::subscription_id) + ":" + s.listen_id->to_json();
  if (!s.info.server_info_json.empty())
    json += "," + jsonrpc::quote(modern::key::server_info) + ":" + s.info.server_info_json;
  json += "}}";
  finish(*c->second, jsonrpc::Message::result(*s.listen_id, json), 200, "result");
}

}  // namespace mcpmqtt::bridge

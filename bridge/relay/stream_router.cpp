#include "bridge/relay/stream_router.hpp"

#include <algorithm>
#include <charconv>

namespace mcpmqtt::bridge {

namespace {

constexpr std::size_t kCancelledRemembered = 256;
constexpr std::size_t kListenReplay = 8;
// A response at most this long is kept as it is when a replay buffer is over its bytes: the
// error that would replace it is about as long.
constexpr std::size_t kReplacedResponseMax = 512;

}  // namespace

StreamRouter::StreamRouter(Limits limits) : limits_(limits) {}

std::string StreamRouter::event_id(StreamId stream, std::uint64_t seq) {
  return std::to_string(stream) + "-" + std::to_string(seq);
}

std::optional<std::pair<StreamRouter::StreamId, std::uint64_t>> StreamRouter::parse_event_id(
    std::string_view id) {
  const auto dash = id.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 >= id.size()) return std::nullopt;
  auto number = [](std::string_view s, std::uint64_t& out) {
    if (s.size() > 1 && s.front() == '0') return false;  // one spelling per number
    const auto* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, out);
    return ec == std::errc() && p == end;
  };
  std::uint64_t stream = 0, seq = 0;
  if (!number(id.substr(0, dash), stream) || !number(id.substr(dash + 1), seq)) return std::nullopt;
  return std::make_pair(stream, seq);
}

Expected<StreamRouter::StreamId, std::string> StreamRouter::open_post(
    const std::vector<jsonrpc::Message>& body, StreamOptions options) {
  std::unordered_set<jsonrpc::Id, jsonrpc::IdHash> seen;
  std::size_t requests = 0;
  for (const auto& m : body) {
    if (!m.is_request()) continue;
    ++requests;
    if (pending_.count(m.id()))
      return unexpected("request id " + m.id().to_string() +
                        " is already in use by a pending request of this session; use a new id");
    if (!seen.insert(m.id()).second)
      return unexpected("request id " + m.id().to_string() + " appears twice in this batch");
  }
  if (requests == 0) return unexpected(std::string("the body holds no request"));

  const StreamId id = next_stream_++;
  Stream s;
  s.attached = options.attached;
  s.options = std::move(options);
  s.open_requests = requests;
  for (const auto& m : body) {
    if (!m.is_request()) continue;
    s.requests.push_back(m.id());
    pending_[m.id()] = RequestRoute{id, m.progress_token()};
    if (m.progress_token()) progress_[*m.progress_token()] = id;
    cancelled_.erase(m.id());
  }
  streams_.emplace(id, std::move(s));
  return id;
}

bool StreamRouter::open_get() {
  auto [it, created] = streams_.try_emplace(kGetStream);
  if (!created && it->second.attached) return false;
  it->second.attached = true;
  return true;
}

Expected<StreamRouter::Resumed, std::string> StreamRouter::resume(std::string_view last_event_id) {
  const auto parsed = parse_event_id(last_event_id);
  if (!parsed)
    return unexpected("Last-Event-ID \"" + std::string(last_event_id) +
                      "\" is not an event id of this server (expected <stream>-<number>)");
  const auto [id, seq] = *parsed;
  auto it = streams_.find(id);
  if (it == streams_.end()) {
    if (id != kGetStream && id < next_stream_)
      return unexpected("Last-Event-ID \"" + std::string(last_event_id) + "\": stream " +
                        std::to_string(id) +
                        " of this session is no longer held (a session keeps its " +
                        std::to_string(limits_.retained_streams) +
                        " most recent finished streams); send the request again");
    return unexpected("Last-Event-ID \"" + std::string(last_event_id) +
                      "\" was not sent in this session");
  }
  Stream& s = it->second;
  if (s.options.format != Format::sse || seq >= s.next_seq)
    return unexpected("Last-Event-ID \"" + std::string(last_event_id) +
                      "\" was not sent in this session");
  return replay_after(id, s, seq);
}

StreamRouter::Resumed StreamRouter::attach_from_start(StreamId stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return Resumed{stream, {}, true, false, false};
  return replay_after(stream, it->second, 0);
}

StreamRouter::Resumed StreamRouter::replay_after(StreamId id, Stream& s, std::uint64_t seq) {
  Resumed r;
  r.stream = id;
  r.replaced = s.attached;
  r.incomplete = s.max_evicted_seq > seq;
  for (auto& e : s.replay) {
    if (e.seq <= seq) continue;
    r.events.push_back(Event{event_id(id, e.seq), e.message});
    e.written = true;
  }
  if (s.finished) {
    r.finished = true;
  } else {
    s.attached = true;
  }
  return r;
}

std::vector<StreamRouter::Event> StreamRouter::drain_backlog(StreamId stream) {
  std::vector<Event> out;
  auto it = streams_.find(stream);
  if (it == streams_.end() || !accepts_unsolicited(stream) || !it->second.attached) return out;
  while (!backlog_.empty()) {
    Routed r = append(stream, it->second, backlog_.front());
    backlog_bytes_ -= std::min(backlog_bytes_, backlog_.front().size());
    backlog_.pop_front();
    if (r.event) out.push_back(std::move(*r.event));
  }
  return out;
}

std::string StreamRouter::priming_event_id(StreamId stream) {
  auto it = streams_.find(stream);
  if (stream != kGetStream || it == streams_.end()) return event_id(stream, 0);
  // The GET stream lives across connections: a priming event takes the next number, so
  // resuming from it replays only what follows it.
  return event_id(stream, it->second.next_seq++);
}

StreamRouter::Routed StreamRouter::route(const jsonrpc::Message& m) {
  if (m.is_response()) return route_response(m);

  if (m.is_notification() && m.method() == "notifications/progress" && m.progress_token()) {
    auto p = progress_.find(*m.progress_token());
    if (p != progress_.end()) {
      Stream& s = streams_.at(p->second);
      if (s.options.format == Format::sse && !s.finished) return append(p->second, s, m);
    }
  }
  if (const auto& sid = m.subscription_id()) {
    // 000: tagged for one listen; no other stream may carry it.
    auto p = pending_.find(*sid);
    if (p != pending_.end()) {
      Stream& s = streams_.at(p->second.stream);
      if (s.options.format == Format::sse && !s.finished) return append(p->second.stream, s, m);
    }
    Routed r;
    r.why = "subscription " + sid->to_string() + " has ended";
    r.expected = true;
    return r;
  }
  for (auto& [id, s] : streams_) {
    if (id != kGetStream && accepts_unsolicited(id) && s.attached && !s.finished)
      return append(id, s, m);
  }
  if (auto g = streams_.find(kGetStream); g != streams_.end() && g->second.attached)
    return append(kGetStream, g->second, m);
  return to_backlog(m);
}

StreamRouter::Routed StreamRouter::route_response(const jsonrpc::Message& m) {
  auto p = pending_.find(m.id());
  if (p == pending_.end()) {
    Routed r;
    if (cancelled_.count(m.id())) {
      r.why = "the client cancelled request " + m.id().to_string();
      r.expected = true;
    } else {
      r.why = "no request with id " + m.id().to_string() + " is pending in this session";
    }
    return r;
  }
  const StreamId id = p->second.stream;
  if (p->second.progress_token) {
    auto t = progress_.find(*p->second.progress_token);
    if (t != progress_.end() && t->second == id) progress_.erase(t);
  }
  pending_.erase(p);
  Stream& s = streams_.at(id);
  Routed r;
  if (s.options.format == Format::json) {
    s.json_responses.insert_or_assign(m.id(), m);
    r.to = Routed::To::stream;
    r.stream = id;
  } else {
    r = append(id, s, m);
  }
  request_done(id, s, r);
  return r;
}

std::optional<StreamRouter::Routed> StreamRouter::cancel(const jsonrpc::Id& request) {
  auto p = pending_.find(request);
  if (p == pending_.end()) return std::nullopt;
  const StreamId id = p->second.stream;
  if (p->second.progress_token) {
    auto t = progress_.find(*p->second.progress_token);
    if (t != progress_.end() && t->second == id) progress_.erase(t);
  }
  pending_.erase(p);
  remember_cancelled(request);
  Stream& s = streams_.at(id);
  if (s.options.format == Format::json) {
    // A JSON body must still hold one response per request.
    s.json_responses.insert_or_assign(
        request,
        jsonrpc::Message::error(request, jsonrpc::code::connection_closed,
                                "request cancelled by the client (notifications/cancelled)"));
  }
  Routed r;
  r.to = Routed::To::stream;
  r.stream = id;
  request_done(id, s, r);
  return r;
}

void StreamRouter::request_done(StreamId id, Stream& s, Routed& r) {
  if (s.open_requests > 0) --s.open_requests;
  if (s.open_requests > 0) return;
  r.finished = true;
  if (s.options.format == Format::json) {
    r.write = s.attached;
    r.json_batch = s.options.batch;
    for (const auto& rid : s.requests) {
      auto it = s.json_responses.find(rid);
      if (it != s.json_responses.end()) r.json_body.push_back(it->second);
    }
    streams_.erase(id);
    return;
  }
  r.write = s.attached;
  s.finished = true;
  s.attached = false;
  retain(id);
}

StreamRouter::Routed StreamRouter::append(StreamId id, Stream& s, const jsonrpc::Message& m) {
  Routed r;
  r.to = Routed::To::stream;
  r.stream = id;
  const std::uint64_t seq = s.next_seq++;
  // An attached listen stream writes each event at once and is never resumed (closing it
  // cancels the listen, 000 §Cancellation): nothing to keep. At high fan-out this bookkeeping
  // per event was a tenth of the bridge's CPU (bench_fanout).
  if (s.options.listen && s.attached) {
    s.max_evicted_seq = seq;  // a resume attempt learns the stream is incomplete
  } else {
    s.replay.push_back(Entry{seq, m, s.attached});
    s.replay_bytes += m.size();
    evict(s, r.evicted);
  }
  r.write = s.attached;
  r.event = Event{event_id(id, seq), m};
  return r;
}

void StreamRouter::evict(Stream& s, std::vector<jsonrpc::Message>& out) {
  // A listen stream is never resumed (closing it cancels the listen): it keeps only what its
  // connection may still be waiting for.
  const std::size_t bound = s.options.listen
                                ? std::min<std::size_t>(limits_.replay_events, kListenReplay)
                                : limits_.replay_events;
  auto erase = [&](std::deque<Entry>::iterator victim) {
    s.max_evicted_seq = std::max(s.max_evicted_seq, victim->seq);
    if (!victim->written) out.push_back(victim->message);
    s.replay_bytes -= std::min(s.replay_bytes, victim->message.size());
    s.replay.erase(victim);
  };
  while (s.replay.size() > bound) {
    // Notifications go first: a response lost from a detached stream leaves a request unanswered.
    auto victim = std::find_if(s.replay.begin(), s.replay.end(),
                               [](const Entry& e) { return e.message.is_notification(); });
    if (victim == s.replay.end()) victim = s.replay.begin();
    erase(victim);
  }
  // Bytes: notifications first, then what the client was given already; a response it was not
  // given is replaced by a short error for its request, so the request is still answered. The
  // newest event always stays.
  while (s.replay.size() > 1 && s.replay_bytes > limits_.replay_bytes) {
    const auto newest = std::prev(s.replay.end());
    auto victim = std::find_if(s.replay.begin(), newest,
                               [](const Entry& e) { return e.message.is_notification(); });
    if (victim == newest)
      victim = std::find_if(s.replay.begin(), newest, [](const Entry& e) { return e.written; });
    if (victim != newest) {
      erase(victim);
      continue;
    }
    bool shrunk = false;
    for (auto it = s.replay.begin(); it != newest && !shrunk; ++it) {
      if (!it->message.is_response() || it->message.size() <= kReplacedResponseMax) continue;
      auto error = jsonrpc::Message::error(
          it->message.id(), jsonrpc::code::connection_closed,
          "the response (" + std::to_string(it->message.size()) +
              " bytes) was not kept: the client was away and the stream held more than "
              "http.limits.replay_buffer_bytes (" +
              std::to_string(limits_.replay_bytes) + "); send the request again");
      s.replay_bytes -= it->message.size();
      s.replay_bytes += error.size();
      out.push_back(it->message);
      it->message = std::move(error);
      shrunk = true;
    }
    if (!shrunk) break;  // only short answers left: bounded by replay_events
  }
}

StreamRouter::Routed StreamRouter::to_backlog(const jsonrpc::Message& m) {
  Routed r;
  auto full = [&] {
    return backlog_.size() >= limits_.backlog_messages ||
           (!backlog_.empty() && backlog_bytes_ + m.size() > limits_.backlog_bytes);
  };
  while (full()) {
    auto victim = std::find_if(backlog_.begin(), backlog_.end(),
                               [](const jsonrpc::Message& b) { return b.is_notification(); });
    if (victim == backlog_.end()) {
      r.why = "the HTTP client has no open stream and the session backlog (" +
              std::to_string(limits_.backlog_messages) + " messages, " +
              std::to_string(limits_.backlog_bytes) + " bytes) is full of requests";
      r.refuse_request = m.is_request();
      return r;
    }
    r.evicted.push_back(*victim);
    backlog_bytes_ -= std::min(backlog_bytes_, victim->size());
    backlog_.erase(victim);
  }
  backlog_bytes_ += m.size();
  backlog_.push_back(m);
  r.to = Routed::To::backlog;
  return r;
}

std::size_t StreamRouter::held_bytes() const {
  std::size_t n = backlog_bytes_;
  for (const auto& [id, s] : streams_)
    n += s.replay_bytes;
  return n;
}

void StreamRouter::retain(StreamId id) {
  finished_.push_back(id);
  auto bytes_of = [this](StreamId sid) {
    std::size_t n = 0;
    if (auto it = streams_.find(sid); it != streams_.end()) {
      for (const auto& e : it->second.replay)
        n += e.message.size();
    }
    return n;
  };
  std::size_t bytes = 0;
  for (auto sid : finished_)
    bytes += bytes_of(sid);
  // The newest may exceed the byte allowance when its client has not been given all of it
  // (it finished while detached): that client is expected back with Last-Event-ID.
  auto unwritten = [this](StreamId sid) {
    auto it = streams_.find(sid);
    if (it == streams_.end()) return false;
    return std::any_of(it->second.replay.begin(), it->second.replay.end(),
                       [](const Entry& e) { return !e.written; });
  };
  const std::size_t keep = unwritten(finished_.back()) ? 1 : 0;
  while (finished_.size() > keep &&
         (finished_.size() > limits_.retained_streams || bytes > limits_.retained_bytes)) {
    bytes -= std::min(bytes, bytes_of(finished_.front()));
    streams_.erase(finished_.front());
    finished_.erase(finished_.begin());
  }
}

void StreamRouter::remember_cancelled(const jsonrpc::Id& id) {
  if (!cancelled_.insert(id).second) return;
  cancelled_order_.push_back(id);
  while (cancelled_order_.size() > kCancelledRemembered) {
    cancelled_.erase(cancelled_order_.front());
    cancelled_order_.pop_front();
  }
}

void StreamRouter::detach(StreamId stream) {
  auto it = streams_.find(stream);
  if (it != streams_.end()) it->second.attached = false;
}

std::vector<jsonrpc::Id> StreamRouter::pending_requests(bool attached_only) const {
  std::vector<jsonrpc::Id> out;
  for (const auto& [id, s] : streams_) {
    if (attached_only && !s.attached) continue;
    for (const auto& rid : s.requests) {
      auto p = pending_.find(rid);
      if (p != pending_.end() && p->second.stream == id) out.push_back(rid);
    }
  }
  return out;
}

bool StreamRouter::attached(StreamId stream) const {
  auto it = streams_.find(stream);
  return it != streams_.end() && it->second.attached;
}

bool StreamRouter::finished(StreamId stream) const {
  auto it = streams_.find(stream);
  return it == streams_.end() || it->second.finished;
}

bool StreamRouter::accepts_unsolicited(StreamId stream) const {
  auto it = streams_.find(stream);
  return it != streams_.end() && it->second.options.format == Format::sse &&
         !it->second.options.listen;
}

std::size_t StreamRouter::attached_count() const {
  return static_cast<std::size_t>(std::count_if(streams_.begin(), streams_.end(),
                                                [](const auto& kv) { return kv.second.attached; }));
}

}  // namespace mcpmqtt::bridge

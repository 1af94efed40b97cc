// Test support for the Streamable HTTP server: a fake Backend that is a tiny in-memory MCP
// server, a server fixture on loopback port 0, and a raw HTTP/1.1 client written with Beast so
// tests control every header and can read SSE streams event by event.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/relay/channel.hpp"
#include "http/server_backend.hpp"
#include "http/server_listener.hpp"
#include "tests/support/mcp_messages.hpp"

namespace mcpmqtt::test {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using jsonrpc::Id;
using jsonrpc::Message;
using namespace std::chrono_literals;

// ---- the fake backend --------------------------------------------------------------------------

// One MCP session as the fake server sees it.
struct FakeSession {
  std::string server_name;
  std::shared_ptr<bridge::Channel> channel;
  std::vector<Message> received;              // from the HTTP client, in order
  std::optional<bridge::CloseReason> closed;  // on_close from the HTTP side
  std::map<std::string, Id> sampling_waits;   // server request id -> tools/call id
  std::vector<Id> slow_calls;                 // tools/call "slow", not yet answered
};

// A tiny MCP server per session. Server-names choose a behaviour:
//   offline/...  answers initialize with an error and closes with peer_gone (→ HTTP 503)
//   refusing/... answers initialize with an error and closes with Kind::error (→ HTTP 200)
//   silent/...   closes with peer_gone without answering (→ HTTP 503, synthesized error)
//   lazy/...     answers initialize with an error and does not close
//   anything else serves initialize, ping, tools/list and the tools echo, progress, sample,
//   slow (answered by complete_slow) and notify.
// Thread-safe: the test thread reads and drives it while the server's threads call it.
class FakeBackend : public http::Backend {
 public:
  void attach(const std::string& server_name, std::shared_ptr<bridge::Channel> channel,
              boost::asio::any_io_executor) override {
    std::size_t index;
    {
      std::lock_guard lock(mu_);
      index = sessions_.size();
      auto s = std::make_shared<FakeSession>();
      s->server_name = server_name;
      s->channel = channel;
      sessions_.push_back(s);
    }
    cv_.notify_all();
    if (server_name.starts_with("silent/")) {
      channel->close(bridge::CloseReason{bridge::CloseReason::Kind::peer_gone,
                                         "no instance of " + server_name + " is online"});
      return;
    }
    bridge::Channel::Receiver r;
    r.on_message = [this, index](Message m) { on_message(index, std::move(m)); };
    r.on_close = [this, index](const bridge::CloseReason& why) {
      {
        std::lock_guard lock(mu_);
        sessions_[index]->closed = why;
      }
      cv_.notify_all();
    };
    channel->start(std::move(r));
  }
  std::string servers_json(const bridge::Principal&) override {
    return R"({"servers":[{"name":"demo/everything"}]})";
  }
  bool ready() override { return ready_; }
  std::string not_ready_reason() override { return "the broker connection is down"; }
  std::string metrics_text() override { return "fake_backend_up 1\n"; }

  std::atomic<bool> ready_{true};

  std::size_t session_count() {
    std::lock_guard lock(mu_);
    return sessions_.size();
  }
  std::shared_ptr<FakeSession> session(std::size_t i) {
    std::lock_guard lock(mu_);
    return i < sessions_.size() ? sessions_[i] : nullptr;
  }
  // Waits until `pred` holds (checked under the lock: it must not call other members).
  bool wait(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, pred);
  }
  bool wait_sessions(std::size_t n) {
    return wait([&] { return sessions_.size() >= n; });
  }
  // Waits until session i received a message with `method` (or a response with `id`).
  bool wait_received(std::size_t i, const std::string& method) {
    return wait([&] {
      if (i >= sessions_.size()) return false;
      for (const auto& m : sessions_[i]->received)
        if (m.method() == method) return true;
      return false;
    });
  }
  // Waits until session i received a response with `id`.
  bool wait_response(std::size_t i, const Id& id) {
    return wait([&] {
      if (i >= sessions_.size()) return false;
      for (const auto& m : sessions_[i]->received)
        if (m.is_response() && m.id() == id) return true;
      return false;
    });
  }
  bool wait_closed(std::size_t i, std::chrono::milliseconds timeout = 10s) {
    return wait([&] { return i < sessions_.size() && sessions_[i]->closed.has_value(); }, timeout);
  }
  std::vector<Message> received(std::size_t i) {
    std::lock_guard lock(mu_);
    return sessions_.at(i)->received;
  }
  std::optional<bridge::CloseReason> closed(std::size_t i) {
    std::lock_guard lock(mu_);
    return sessions_.at(i)->closed;
  }
  // Sends into session i from the test thread (the session posts it onto its strand).
  void send(std::size_t i, const Message& m) { channel(i)->send(m); }
  void close(std::size_t i, bridge::CloseReason why) { channel(i)->close(why); }
  // Answers the oldest unanswered "slow" tool call of session i, after `progress` messages.
  void complete_slow(std::size_t i, const std::string& text = "slow done") {
    Id id;
    {
      std::lock_guard lock(mu_);
      auto& s = *sessions_.at(i);
      REQUIRE_FALSE(s.slow_calls.empty());
      id = s.slow_calls.front();
      s.slow_calls.erase(s.slow_calls.begin());
    }
    send(i, Message::result(id, text_content(text)));
  }
  bool wait_slow_calls(std::size_t i, std::size_t n) {
    return wait([&] { return i < sessions_.size() && sessions_[i]->slow_calls.size() >= n; });
  }

  static std::string text_content(const std::string& text) {
    return R"({"content":[{"type":"text","text":)" + jsonrpc::quote(text) + "}]}";
  }

 private:
  std::shared_ptr<bridge::Channel> channel(std::size_t i) {
    std::lock_guard lock(mu_);
    return sessions_.at(i)->channel;
  }

  // Runs on the session's strand (inside the session's delivery).
  void on_message(std::size_t index, Message m) {
    std::shared_ptr<FakeSession> s;
    {
      std::lock_guard lock(mu_);
      s = sessions_[index];
      s->received.push_back(m);
    }
    cv_.notify_all();
    auto& ch = *s->channel;
    if (m.is_response()) {
      std::optional<Id> tool_call;
      {
        std::lock_guard lock(mu_);
        if (m.id().is_string()) {
          auto it = s->sampling_waits.find(m.id().as_string());
          if (it != s->sampling_waits.end()) {
            tool_call = it->second;
            s->sampling_waits.erase(it);
          }
        }
      }
      if (tool_call) {
        std::string sampled = m.kind() == jsonrpc::Kind::result ? "ok" : "error";
        if (const auto* r = m.result_value(); r && r->IsObject() && r->HasMember("content") &&
                                              (*r)["content"].IsObject() &&
                                              (*r)["content"].HasMember("text"))
          sampled = (*r)["content"]["text"].GetString();
        ch.send(Message::result(*tool_call, text_content("sampled: " + sampled)));
      }
      return;
    }
    if (!m.is_request()) return;
    const auto& method = m.method();
    if (method == "initialize") {
      std::string version = "2025-06-18";
      if (const auto* p = m.params(); p && p->IsObject() && p->HasMember("protocolVersion") &&
                                      (*p)["protocolVersion"].IsString())
        version = (*p)["protocolVersion"].GetString();
      const auto& name = s->server_name;
      if (name.starts_with("offline/")) {
        ch.send(Message::error(m.id(), -32000, "MCP server " + name + " is offline"));
        ch.close({bridge::CloseReason::Kind::peer_gone, "server " + name + " went offline"});
        return;
      }
      if (name.starts_with("refusing/")) {
        ch.send(Message::error(m.id(), -32602, "Unsupported protocol version"));
        ch.close({bridge::CloseReason::Kind::error, "initialize refused"});
        return;
      }
      if (name.starts_with("lazy/")) {
        ch.send(Message::error(m.id(), -32603, "cannot initialize"));
        return;
      }
      ch.send(Message::result(m.id(), R"({"protocolVersion":")" + version +
                                          R"(","capabilities":{"tools":{}},)"
                                          R"("serverInfo":{"name":"fake","version":"1"}})"));
      return;
    }
    if (method == "ping") return ch.send(Message::result(m.id(), "{}"));
    if (method == "tools/list")
      return ch.send(Message::result(
          m.id(), R"({"tools":[{"name":"echo","inputSchema":{"type":"object"}}]})"));
    if (method == "tools/call") {
      std::string tool, text;
      if (const auto* p = m.params(); p && p->IsObject()) {
        if (p->HasMember("name") && (*p)["name"].IsString()) tool = (*p)["name"].GetString();
        if (p->HasMember("arguments") && (*p)["arguments"].IsObject() &&
            (*p)["arguments"].HasMember("text") && (*p)["arguments"]["text"].IsString())
          text = (*p)["arguments"]["text"].GetString();
      }
      if (tool == "echo") return ch.send(Message::result(m.id(), text_content(text)));
      if (tool == "progress") {
        if (m.progress_token()) {
          for (int k = 1; k <= 2; ++k)
            ch.send(Message::notification("notifications/progress",
                                          R"({"progressToken":)" + m.progress_token()->to_json() +
                                              R"(,"progress":)" + std::to_string(k) +
                                              R"(,"total":2})"));
        }
        return ch.send(Message::result(m.id(), text_content("progress done")));
      }
      if (tool == "sample") {
        const std::string sid = "srv-" + std::to_string(next_server_id_++);
        {
          std::lock_guard lock(mu_);
          s->sampling_waits[sid] = m.id();
        }
        return ch.send(Message::request(
            Id::string(sid), "sampling/createMessage",
            R"({"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],)"
            R"("maxTokens":10})"));
      }
      if (tool == "slow") {
        {
          std::lock_guard lock(mu_);
          s->slow_calls.push_back(m.id());
        }
        cv_.notify_all();
        return;
      }
      if (tool == "notify") {
        ch.send(Message::notification("notifications/message",
                                      R"({"level":"info","data":"from the tool"})"));
        return ch.send(Message::result(m.id(), text_content("notified")));
      }
      return ch.send(Message::error(m.id(), -32602, "unknown tool " + tool));
    }
    ch.send(Message::error(m.id(), -32601, "Method not found: " + method));
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<FakeSession>> sessions_;
  std::atomic<int> next_server_id_{1};
};

// ---- the server under test ---------------------------------------------------------------------

inline http::ServerOptions test_http_config() {
  http::ServerOptions c;
  c.listen_host = "127.0.0.1";
  c.listen_port = 0;
  return c;
}

// test_http_config() changed by `f`.
inline http::ServerOptions config_with(const std::function<void(http::ServerOptions&)>& f) {
  auto c = test_http_config();
  f(c);
  return c;
}

// An http::Server on loopback port 0 with a fake backend, run by two threads.
class TestServer {
 public:
  explicit TestServer(http::ServerOptions http = test_http_config(),
                      std::string default_server = "demo/everything")
      : work_(net::make_work_guard(ioc_)),
        server_(std::make_unique<http::Server>(ioc_, std::move(http), std::move(default_server),
                                               backend)) {
    auto ep = server_->start();
    INFO((ep ? std::string() : ep.error().message));
    REQUIRE(ep.has_value());
    endpoint = *ep;
    for (int i = 0; i < 2; ++i)
      threads_.emplace_back([this] { ioc_.run(); });
  }
  ~TestServer() {
    server_->stop();
    work_.reset();
    // Handlers finish once the server's sockets and timers are closed.
    for (auto& t : threads_)
      t.join();
    server_.reset();
  }
  http::Server& server() { return *server_; }
  std::string host() const { return "127.0.0.1:" + std::to_string(endpoint.port()); }

 private:
  // Declared first, destroyed last: the backend holds sessions, whose timers belong to it.
  net::io_context ioc_;

 public:
  FakeBackend backend;
  net::ip::tcp::endpoint endpoint;

 private:
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::unique_ptr<http::Server> server_;
  std::vector<std::thread> threads_;
};

// Resident memory of this process (the server runs in it), from /proc/self/status.
inline std::size_t rss_kib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  std::size_t kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "VmRSS: %zu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}

// ---- a raw HTTP client -------------------------------------------------------------------------

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpResult {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  // names in lowercase
  std::string body;
  bool ok = false;  // a complete response arrived in time
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  bool has(const std::string& name) const { return headers.count(name) != 0; }
  // The JSON-RPC error code of the body, or 0.
  int error_code() const {
    auto m = Message::parse(body);
    return m && m->kind() == jsonrpc::Kind::error ? m->error().code : 0;
  }
  std::string error_message() const {
    auto m = Message::parse(body);
    return m && m->kind() == jsonrpc::Kind::error ? m->error().message : std::string();
  }
};

struct SseEvent {
  std::string id;
  std::string event;
  std::string data;
  std::optional<int> retry;
  bool comment_only = false;
  bool has_id = false;
  std::optional<Message> message() const {
    auto m = Message::parse(data);
    if (!m) return std::nullopt;
    return m.value();
  }
};

// One TCP connection driven from the test thread; every wait has a deadline.
class RawClient {
 public:
  explicit RawClient(const net::ip::tcp::endpoint& ep) : stream_(ioc_) {
    bool done = false;
    beast::error_code ec;
    stream_.async_connect(ep, [&](beast::error_code e) {
      ec = e;
      done = true;
    });
    run_until(done, 5s);
    REQUIRE(done);
    REQUIRE_FALSE(ec);
  }

  // Writes raw bytes (for malformed requests).
  bool write_raw(const std::string& bytes) {
    bool done = false;
    beast::error_code ec;
    net::async_write(stream_, net::buffer(bytes), [&](beast::error_code e, std::size_t) {
      ec = e;
      done = true;
    });
    run_until(done, 5s);
    return done && !ec;
  }

  void send(bhttp::verb verb, const std::string& target, const Headers& headers,
            const std::string& body = {}) {
    bhttp::request<bhttp::string_body> req{verb, target, 11};
    for (const auto& [k, v] : headers)
      req.set(k, v);
    if (!body.empty() || verb == bhttp::verb::post) {
      req.body() = body;
      req.prepare_payload();
    }
    bool done = false;
    beast::error_code ec;
    bhttp::async_write(stream_, req, [&](beast::error_code e, std::size_t) {
      ec = e;
      done = true;
    });
    run_until(done, 5s);
    REQUIRE(done);
    REQUIRE_FALSE(ec);
  }

  // Reads a response header; for a streamed response, read events with next_event().
  HttpResult read_header(std::chrono::milliseconds timeout = 10s) {
    parser_.emplace();
    parser_->body_limit(64 * 1024 * 1024);
    sse_.clear();
    ended_ = false;
    failed_ = false;
    parser_->on_chunk_body(on_chunk_);
    bool done = false;
    beast::error_code ec;
    bhttp::async_read_header(stream_, buffer_, *parser_, [&](beast::error_code e, std::size_t) {
      ec = e;
      done = true;
    });
    run_until(done, timeout);
    HttpResult r;
    if (!done || ec) {
      failed_ = true;
      return r;
    }
    r.ok = true;
    fill_header(r);
    return r;
  }

  // Reads a whole (not streamed) response.
  HttpResult read_response(std::chrono::milliseconds timeout = 10s) {
    HttpResult r = read_header(timeout);
    if (r.ok) read_body(r, timeout);
    return r;
  }

  // Reads the rest of a response whose header read_header() returned.
  bool read_body(HttpResult& r, std::chrono::milliseconds timeout = 10s) {
    bool done = parser_->is_done();
    beast::error_code ec;
    if (!done) {
      bhttp::async_read(stream_, buffer_, *parser_, [&](beast::error_code e, std::size_t) {
        ec = e;
        done = true;
      });
      run_until(done, timeout);
    }
    if (!done || ec) {
      r.ok = false;
      return false;
    }
    r.body = parser_->get().body() + sse_;
    return true;
  }

  HttpResult request(bhttp::verb verb, const std::string& target, const Headers& headers,
                     const std::string& body = {}, std::chrono::milliseconds timeout = 10s) {
    send(verb, target, headers, body);
    return read_response(timeout);
  }

  // The next SSE event of the current streamed response (comments included), or nullopt when
  // the stream ended, failed or nothing came in time.
  std::optional<SseEvent> next_event(std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (auto e = take_event()) return e;
      if (ended_ || failed_ || parser_->is_done()) {
        ended_ = ended_ || parser_->is_done();
        return std::nullopt;
      }
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= 0s) return std::nullopt;
      bool done = false;
      beast::error_code ec;
      bhttp::async_read_some(stream_, buffer_, *parser_, [&](beast::error_code e, std::size_t) {
        ec = e;
        done = true;
      });
      run_until(done, std::chrono::duration_cast<std::chrono::milliseconds>(left));
      if (!done) return std::nullopt;
      if (ec) failed_ = true;
      if (parser_->is_done()) ended_ = true;
    }
  }
  // The next event that carries data (skips keep-alive comments and priming events).
  std::optional<SseEvent> next_message(std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left <= 0ms) return std::nullopt;
      auto e = next_event(left);
      if (!e) return e;
      if (!e->comment_only && !e->data.empty()) return e;
    }
  }
  // Reads to the end of the current stream; true when it ended properly (last chunk).
  bool wait_end(std::chrono::milliseconds timeout = 10s) {
    while (next_event(timeout)) {
    }
    return ended_;
  }
  bool stream_ended() const { return ended_; }
  bool stream_failed() const { return failed_; }

  // True when the server closed the connection (EOF or reset) within the timeout.
  bool wait_closed(std::chrono::milliseconds timeout = 10s) {
    char byte;
    bool done = false;
    beast::error_code ec;
    stream_.async_read_some(net::buffer(&byte, 1), [&](beast::error_code e, std::size_t) {
      ec = e;
      done = true;
    });
    run_until(done, timeout);
    return done && ec;
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

 private:
  void run_until(bool& done, std::chrono::milliseconds timeout) {
    ioc_.restart();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done && std::chrono::steady_clock::now() < deadline)
      ioc_.run_one_for(deadline - std::chrono::steady_clock::now());
    if (!done) {
      // Cancel and let the handler run, so nothing refers to this frame afterwards.
      stream_.cancel();
      ioc_.restart();
      while (!done)
        ioc_.run_one_for(1s);
      done = false;
    }
  }

  void fill_header(HttpResult& r) {
    const auto& res = parser_->get();
    r.status = res.result_int();
    for (const auto& f : res) {
      std::string name(f.name_string().data(), f.name_string().size());
      for (auto& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = std::string(f.value().data(), f.value().size());
    }
  }

  std::optional<SseEvent> take_event() {
    const auto end = sse_.find("\n\n");
    if (end == std::string::npos) return std::nullopt;
    const std::string block = sse_.substr(0, end);
    sse_.erase(0, end + 2);
    SseEvent e;
    bool any_field = false;
    std::size_t pos = 0;
    std::vector<std::string> data_lines;
    while (pos <= block.size()) {
      auto nl = block.find('\n', pos);
      const std::string line =
          block.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      pos = nl == std::string::npos ? block.size() + 1 : nl + 1;
      if (line.empty() || line[0] == ':') continue;
      any_field = true;
      const auto colon = line.find(':');
      std::string field = line.substr(0, colon);
      std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
      if (!value.empty() && value[0] == ' ') value.erase(0, 1);
      if (field == "id") {
        e.id = value;
        e.has_id = true;
      } else if (field == "event") {
        e.event = value;
      } else if (field == "data") {
        data_lines.push_back(value);
      } else if (field == "retry") {
        e.retry = std::stoi(value);
      }
    }
    for (std::size_t i = 0; i < data_lines.size(); ++i)
      e.data += (i ? "\n" : "") + data_lines[i];
    e.comment_only = !any_field;
    return e;
  }

  net::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  std::string sse_;
  bool ended_ = false;
  bool failed_ = false;
  // The parser keeps a reference to its chunk callback.
  std::function<std::size_t(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk_ =
      [this](std::uint64_t, beast::string_view body, beast::error_code&) {
        sse_.append(body.data(), body.size());
        return body.size();
      };
};

// ---- MCP helpers -------------------------------------------------------------------------------

// A member of a message by path ("0" indexes arrays): strings as they are, anything else as
// JSON text; empty when absent.
inline std::string at(const Message& m, std::initializer_list<std::string_view> path) {
  const rapidjson::Value* v = &m.json();
  for (auto key : path) {
    if (v->IsArray()) {
      const auto i = static_cast<rapidjson::SizeType>(std::stoul(std::string(key)));
      if (i >= v->Size()) return {};
      v = &(*v)[i];
      continue;
    }
    if (!v->IsObject()) return {};
    auto it = v->FindMember(rapidjson::Value(rapidjson::StringRef(key.data(), key.size())));
    if (it == v->MemberEnd()) return {};
    v = &it->value;
  }
  return v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : jsonrpc::to_json(*v);
}

// Headers of a POST to the MCP endpoint.
inline Headers post_headers(const std::string& host, const std::string& session = {},
                            const std::string& version = {}) {
  Headers h = {{"Host", host},
               {"Accept", "application/json, text/event-stream"},
               {"Content-Type", "application/json"}};
  if (!session.empty()) h.emplace_back("Mcp-Session-Id", session);
  if (!version.empty()) h.emplace_back("MCP-Protocol-Version", version);
  return h;
}

inline Headers get_headers(const std::string& host, const std::string& session,
                           const std::string& last_event_id = {}) {
  Headers h = {{"Host", host}, {"Accept", "text/event-stream"}, {"Mcp-Session-Id", session}};
  if (!last_event_id.empty()) h.emplace_back("Last-Event-ID", last_event_id);
  return h;
}

// Reads the SSE response of a POST whose one request gets one response; returns that
// response (skipping other events), and checks the stream ends after it.
inline std::optional<Message> sse_response(RawClient& c) {
  std::optional<Message> out;
  while (auto e = c.next_message()) {
    auto m = e->message();
    REQUIRE(m);
    if (m->is_response()) out = m;
  }
  CHECK(c.stream_ended());
  return out;
}

// Initializes a session over a fresh connection; returns its id.
inline std::string open_session(TestServer& ts, const std::string& target = "/mcp",
                                const std::string& version = "2025-11-25") {
  RawClient c(ts.endpoint);
  c.send(bhttp::verb::post, target, post_headers(ts.host()), initialize_body(1, version));
  auto head = c.read_header();
  REQUIRE(head.ok);
  REQUIRE(head.status == 200);
  const auto id = head.header("mcp-session-id");
  REQUIRE(id.size() == 32);
  if (head.header("content-type") == "text/event-stream") {
    auto res = sse_response(c);
    REQUIRE(res);
    REQUIRE(res->kind() == jsonrpc::Kind::result);
  } else {
    REQUIRE(c.read_body(head));
  }
  auto ack =
      c.request(bhttp::verb::post, target, post_headers(ts.host(), id, version), kInitialized);
  REQUIRE(ack.status == 202);
  return id;
}

}  // namespace mcpmqtt::test

// Raw bytes into the real Streamable HTTP server (http::Server: listener, connections, MCP
// sessions, stream routing) on a loopback socket, behind a fake backend that serves a tiny MCP
// server in-process.
//
// Chosen over feeding only the request parser and the pure rules (http_headers_fuzzer does that,
// some twenty times faster): only the real connection reaches what goes wrong between the steps
// — a request refused half-read, keep-alive and pipelining, a body read and dropped,
// 100-continue, SSE streams, sessions created, resumed and deleted, errors written from the
// session's strand. A fresh server per input costs sockets and an io_context: on the shared
// two-core build machine this ran 60 to 120 inputs a second (http_headers: about 2,000), with
// libFuzzer's entropic schedule off (scripts/fuzz.sh): each input touches some 20,000 coverage
// features, and reweighing them took half the time.
//
// One run per input, all on this thread: a fresh io_context and server on 127.0.0.1:0, the
// input written by clients, the io_context polled until nothing more happens (no timer is
// waited for: a stream stays open instead), then every client's write side shut, the server
// stopped and everything destroyed.
//
// Input: the first byte picks the server's configuration (make_configs below); the rest is what
// clients send. Each "@@NEXT@@" starts a new connection (the earlier ones stay open, so a GET
// stream can be open while another connection POSTs); "@@SID@@" is replaced by the last
// Mcp-Session-Id a response carried, "@@EID@@" by the last SSE event id received.
//
// Server-names choose the fake server's behaviour as tests/http/server_test_support.hpp's does:
// offline/... refuses initialize and closes (503), silent/... closes without an answer,
// lazy/... refuses without closing, anything else serves initialize, ping, tools/list and the
// tools echo, progress, notify, sample (a request to the client), slow (never answered) and
// close (the server ends the session).
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/relay/channel.hpp"
#include "common/log.hpp"
#include "http/server_backend.hpp"
#include "http/server_listener.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace http = mcpmqtt::http;
namespace jsonrpc = mcpmqtt::jsonrpc;
namespace bridge = mcpmqtt::bridge;
namespace net = boost::asio;
using jsonrpc::Id;
using jsonrpc::Message;
using mcpmqtt::fuzz::check;

namespace {

// ---- the fake backend --------------------------------------------------------------------------

// A tiny MCP server per session; everything runs on the fuzzer's one thread.
class FakeBackend : public http::Backend {
 public:
  void attach(const std::string& server_name, std::shared_ptr<bridge::Channel> channel,
              net::any_io_executor) override {
    channels_.push_back(channel);
    if (server_name.starts_with("silent/")) {
      channel->close({bridge::CloseReason::Kind::peer_gone, "no instance is online"});
      return;
    }
    std::weak_ptr<bridge::Channel> weak = channel;
    bridge::Channel::Receiver r;
    r.on_message = [this, weak, server_name](Message m) {
      if (auto ch = weak.lock()) on_message(*ch, server_name, m);
    };
    r.on_close = [](const bridge::CloseReason&) {};
    channel->start(std::move(r));
  }
  std::string servers_json(const bridge::Principal&) override {
    return R"({"servers":[{"name":"demo/everything"}]})";
  }
  bool ready() override { return true; }
  std::string metrics_text() override { return "fake_backend_up 1\n"; }

  void release() { channels_.clear(); }

 private:
  static std::string text_content(const std::string& text) {
    return R"({"content":[{"type":"text","text":)" + jsonrpc::quote(text) + "}]}";
  }

  void on_message(bridge::Channel& ch, const std::string& name, const Message& m) {
    if (m.is_response()) {
      // The answer to a "sample" tool's request completes the tool call.
      if (m.id().is_string()) {
        auto it = sampling_.find(m.id().as_string());
        if (it != sampling_.end()) {
          const Id call = it->second;
          sampling_.erase(it);
          ch.send(Message::result(call, text_content("sampled")));
        }
      }
      return;
    }
    if (!m.is_request()) return;
    const auto& method = m.method();
    if (method == "initialize") {
      if (name.starts_with("offline/")) {
        ch.send(Message::error(m.id(), -32000, "MCP server " + name + " is offline"));
        ch.close({bridge::CloseReason::Kind::peer_gone, "server " + name + " went offline"});
        return;
      }
      if (name.starts_with("lazy/")) {
        ch.send(Message::error(m.id(), -32603, "cannot initialize"));
        return;
      }
      std::string version = "2025-06-18";
      if (const auto* p = m.params(); p && p->IsObject()) {
        auto it = p->FindMember("protocolVersion");
        if (it != p->MemberEnd() && it->value.IsString())
          version.assign(it->value.GetString(), it->value.GetStringLength());
      }
      ch.send(Message::result(m.id(), R"({"protocolVersion":)" + jsonrpc::quote(version) +
                                          R"(,"capabilities":{"tools":{}},)"
                                          R"("serverInfo":{"name":"fake","version":"1"}})"));
      return;
    }
    if (method == "ping") return ch.send(Message::result(m.id(), "{}"));
    if (method == "tools/list")
      return ch.send(Message::result(m.id(), R"({"tools":[{"name":"echo"}]})"));
    if (method != "tools/call") {
      return ch.send(
          Message::error(m.id(), jsonrpc::code::method_not_found, "Method not found: " + method));
    }
    std::string tool;
    if (const auto* p = m.params(); p && p->IsObject()) {
      auto it = p->FindMember("name");
      if (it != p->MemberEnd() && it->value.IsString())
        tool.assign(it->value.GetString(), it->value.GetStringLength());
    }
    if (tool == "echo") return ch.send(Message::result(m.id(), text_content("echo")));
    if (tool == "progress") {
      if (m.progress_token()) {
        for (int k = 1; k <= 2; ++k)
          ch.send(Message::notification("notifications/progress",
                                        R"({"progressToken":)" + m.progress_token()->to_json() +
                                            R"(,"progress":)" + std::to_string(k) + "}"));
      }
      return ch.send(Message::result(m.id(), text_content("progress done")));
    }
    if (tool == "notify") {
      ch.send(Message::notification("notifications/message", R"({"level":"info","data":"x"})"));
      return ch.send(Message::result(m.id(), text_content("notified")));
    }
    if (tool == "sample") {
      const std::string sid = "srv-" + std::to_string(next_request_++);
      sampling_[sid] = m.id();
      return ch.send(Message::request(Id::string(sid), "sampling/createMessage",
                                      R"({"messages":[],"maxTokens":10})"));
    }
    if (tool == "slow") return;
    if (tool == "close") {
      ch.close({bridge::CloseReason::Kind::peer_gone, "the server went away"});
      return;
    }
    ch.send(Message::error(m.id(), jsonrpc::code::invalid_params, "unknown tool " + tool));
  }

  std::vector<std::shared_ptr<bridge::Channel>> channels_;
  std::map<std::string, Id> sampling_;
  int next_request_ = 1;
};

// ---- configurations ----------------------------------------------------------------------------

struct Config {
  http::ServerOptions options;
  std::string default_server;
};

std::vector<Config> make_configs() {
  std::vector<Config> out(4);
  for (auto& c : out) {
    c.options.listen_host = "127.0.0.1";
    c.options.listen_port = 0;
    c.default_server = "demo/everything";
  }
  // 1: JSON responses, listed origins and hosts.
  out[1].options.json_response = true;
  out[1].options.allowed_origins = {"https://app.example"};
  out[1].options.allowed_hosts = {"bridge.example"};
  // 2: bearer tokens and small limits.
  out[2].options.bearer_tokens = {"s3cret"};
  out[2].options.limits.max_body_bytes = 1024;
  out[2].options.limits.max_sessions = 2;
  out[2].options.limits.stream_queue_messages = 4;
  out[2].options.limits.session_backlog_messages = 2;
  out[2].options.limits.replay_buffer_events = 2;
  // 3: no default server behind /mcp.
  out[3].default_server.clear();
  return out;
}

const std::vector<Config>& configs() {
  static const auto c = make_configs();
  return c;
}

// ---- clients -----------------------------------------------------------------------------------

struct Client {
  int fd = -1;
  std::string to_send;
  std::string received;
  bool eof = false;
};

bool pump_client(Client& c) {
  bool progress = false;
  while (!c.to_send.empty()) {
    const auto n = ::send(c.fd, c.to_send.data(), c.to_send.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      c.to_send.clear();  // the server closed: what is left cannot go
      break;
    }
    c.to_send.erase(0, static_cast<std::size_t>(n));
    progress = true;
  }
  while (!c.eof) {
    char buf[16384];
    const auto n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      c.eof = true;
      break;
    }
    // Enough to find the session and event ids; a long stream's body need not be kept.
    if (c.received.size() < (1u << 20)) c.received.append(buf, static_cast<std::size_t>(n));
    progress = true;
  }
  return progress;
}

// Polls the server and the clients until neither does anything twice in a row.
void settle(net::io_context& ioc, std::vector<Client>& clients) {
  int quiet = 0;
  for (int round = 0; round < 2000 && quiet < 2; ++round) {
    if (ioc.stopped()) ioc.restart();
    std::size_t ran = ioc.poll();
    bool progress = false;
    for (auto& c : clients)
      progress |= pump_client(c);
    quiet = ran == 0 && !progress ? quiet + 1 : 0;
  }
}

std::string last_value(const std::vector<Client>& clients, std::string_view prefix,
                       std::string_view end) {
  std::string found;
  for (const auto& c : clients) {
    std::size_t pos = 0;
    while ((pos = c.received.find(prefix, pos)) != std::string::npos) {
      pos += prefix.size();
      const auto e = c.received.find_first_of(end, pos);
      if (e == std::string::npos) break;
      found = c.received.substr(pos, e - pos);
    }
  }
  return found;
}

void replace_all(std::string& s, std::string_view what, const std::string& with) {
  if (with.empty()) return;
  std::size_t pos = 0;
  while ((pos = s.find(what, pos)) != std::string::npos) {
    s.replace(pos, what.size(), with);
    pos += with.size();
  }
}

int connect_to(const net::ip::tcp::endpoint& ep) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  check(fd >= 0, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(ep.port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    // libFuzzer's SIGALRM (its -timeout clock) interrupts a connect now and then; the
    // connection goes on being made, so wait for it.
    check(errno == EINTR, "connect");
    pollfd p{fd, POLLOUT, 0};
    while (::poll(&p, 1, 5000) < 0 && errno == EINTR) {
    }
    int error = 0;
    socklen_t len = sizeof error;
    check(::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0,
          "connect, after an interruption");
  }
  // Closed with a reset: no TIME_WAIT left behind by a thousand connections a second.
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mcpmqtt::log::set_level("off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const Config& config = configs()[data[0] % configs().size()];
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

  FakeBackend backend;
  {
    net::io_context ioc(1);
    auto server =
        std::make_unique<http::Server>(ioc, config.options, config.default_server, backend);
    const auto ep = server->start();
    check(ep.has_value(), "the server does not start");

    std::vector<Client> clients;
    std::size_t pos = 0;
    constexpr std::string_view kNext = "@@NEXT@@";
    while (pos <= input.size() && clients.size() < 8) {
      const auto next = input.find(kNext, pos);
      std::string segment(input.substr(pos, next == std::string_view::npos ? next : next - pos));
      pos = next == std::string_view::npos ? input.size() + 1 : next + kNext.size();
      replace_all(segment, "@@SID@@", last_value(clients, "Mcp-Session-Id: ", "\r\n"));
      replace_all(segment, "@@EID@@", last_value(clients, "\nid: ", "\r\n"));
      Client c;
      c.fd = connect_to(*ep);
      c.to_send = std::move(segment);
      clients.push_back(std::move(c));
      settle(ioc, clients);
    }

    // The clients stop sending, the server stops, the clients go.
    for (auto& c : clients)
      ::shutdown(c.fd, SHUT_WR);
    settle(ioc, clients);
    server->stop();
    settle(ioc, clients);
    for (auto& c : clients)
      ::close(c.fd);
    clients.clear();
    backend.release();
    settle(ioc, clients);
    check(server->connection_count() == 0, "a connection outlives stop() and its client");
    check(server->session_count() == 0, "a session outlives stop()");
    server.reset();
  }
  return 0;
}

// A scripted Streamable HTTP server for the client's integration tests: real HTTP/1.1 (plain or
// TLS) on 127.0.0.1, port 0, one blocking thread per connection, and a test-supplied handler per
// request, so each failure mode (refusal, cut stream, slow answer, 404, 500...) is exact.
// Requests are parsed by hand, independently of the Beast code under test.
//
// Thread-safe: the handler runs on connection threads; the test thread reads the request log.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <sys/socket.h>

#include "bridge/jsonrpc/jsonrpc.hpp"

namespace mcpmqtt::test::fake {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Headers = std::vector<std::pair<std::string, std::string>>;

inline std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct Request {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  int connection = 0;  // which accepted connection carried it (1, 2, ...)

  // The value of a header, or "<absent>".
  std::string header(const std::string& name) const {
    auto it = headers.find(lower(name));
    return it == headers.end() ? "<absent>" : it->second;
  }
  bool has(const std::string& needle) const { return body.find(needle) != std::string::npos; }
};

// A blocking queue the test uses to feed a handler (for example events for a GET stream).
template <typename T>
class Queue {
 public:
  void push(T v) {
    {
      std::lock_guard<std::mutex> l(m_);
      q_.push_back(std::move(v));
    }
    cv_.notify_all();
  }
  std::optional<T> pop(std::chrono::milliseconds timeout, const std::atomic<bool>* stop = nullptr) {
    std::unique_lock<std::mutex> l(m_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (q_.empty()) {
      if (stop && *stop) return std::nullopt;
      if (cv_.wait_until(l, std::min(deadline, std::chrono::steady_clock::now() +
                                                   std::chrono::milliseconds(20))) ==
              std::cv_status::timeout &&
          std::chrono::steady_clock::now() >= deadline) {
        return std::nullopt;
      }
    }
    T v = std::move(q_.front());
    q_.pop_front();
    return v;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<T> q_;
};

// One accepted connection, as the handler sees it.
class Conn {
 public:
  Conn(tcp::socket socket, net::ssl::context* tls) : socket_(std::move(socket)) {
    if (tls) tls_ = std::make_unique<net::ssl::stream<tcp::socket&>>(socket_, *tls);
  }

  bool handshake() {
    if (!tls_) return true;
    boost::system::error_code ec;
    tls_->handshake(net::ssl::stream_base::server, ec);
    return !ec;
  }

  // Reads the next request; nullopt when the peer closed the connection.
  std::optional<Request> read_request() {
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return std::nullopt;
    }
    Request r;
    const std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    std::size_t pos = head.find("\r\n");
    const std::string line = head.substr(0, pos);
    const auto sp1 = line.find(' ');
    const auto sp2 = line.find(' ', sp1 + 1);
    r.method = line.substr(0, sp1);
    r.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    while (pos != std::string::npos) {
      const auto next = head.find("\r\n", pos + 2);
      const std::string h =
          head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      const auto colon = h.find(':');
      if (colon != std::string::npos) {
        std::string v = h.substr(colon + 1);
        while (!v.empty() && v.front() == ' ')
          v.erase(0, 1);
        r.headers[lower(h.substr(0, colon))] = v;
      }
      pos = next;
    }
    std::size_t length = 0;
    if (auto it = r.headers.find("content-length"); it != r.headers.end()) {
      length = std::stoul(it->second);
    }
    while (buf_.size() < length) {
      if (!fill()) return std::nullopt;
    }
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }

  bool write(const std::string& bytes) {
    if (closed_) return false;
    boost::system::error_code ec;
    if (tls_) {
      net::write(*tls_, net::buffer(bytes), ec);
    } else {
      net::write(socket_, net::buffer(bytes), ec);
    }
    if (ec) closed_ = true;
    return !ec;
  }

  // A whole response with Content-Length; the connection stays open for the next request.
  bool respond(int status, const std::string& content_type, const std::string& body,
               const Headers& headers = {}) {
    std::string out =
        status_line(status) + "Content-Length: " + std::to_string(body.size()) + "\r\n";
    if (!content_type.empty()) out += "Content-Type: " + content_type + "\r\n";
    for (const auto& [k, v] : headers)
      out += k + ": " + v + "\r\n";
    return write(out + "\r\n" + body);
  }
  bool json(const std::string& body, const Headers& headers = {}) {
    return respond(200, "application/json", body, headers);
  }
  bool accepted() { return respond(202, "", ""); }

  // An SSE response in chunked encoding; each event() is one chunk.
  bool start_sse(const Headers& headers = {}) {
    std::string out = status_line(200) +
                      "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                      "Transfer-Encoding: chunked\r\n";
    for (const auto& [k, v] : headers)
      out += k + ": " + v + "\r\n";
    return write(out + "\r\n");
  }
  bool chunk(const std::string& data) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return write(size + data + "\r\n");
  }
  // One event carrying a JSON-RPC message, with an id when given.
  bool event(const std::string& json_text, const std::string& id = "") {
    return chunk((id.empty() ? "" : "id: " + id + "\n") + "event: message\ndata: " + json_text +
                 "\n\n");
  }
  bool end_sse() { return write("0\r\n\r\n"); }

  // Ends the connection abruptly (no chunked terminator, no response).
  void cut() {
    closed_ = true;
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
  }
  bool closed() const { return closed_; }
  int number = 0;

  // Unblocks a read or write from another thread (server shutdown).
  void abort() {
    closed_ = true;
    ::shutdown(socket_.native_handle(), SHUT_RDWR);
  }

 private:
  static std::string status_line(int status) {
    static const std::map<int, std::string> reasons = {{200, "OK"},
                                                       {202, "Accepted"},
                                                       {400, "Bad Request"},
                                                       {401, "Unauthorized"},
                                                       {404, "Not Found"},
                                                       {405, "Method Not Allowed"},
                                                       {409, "Conflict"},
                                                       {500, "Internal Server Error"},
                                                       {503, "Service Unavailable"}};
    auto it = reasons.find(status);
    return "HTTP/1.1 " + std::to_string(status) + " " +
           (it == reasons.end() ? std::string("Whatever") : it->second) + "\r\n";
  }
  bool fill() {
    if (closed_) return false;
    char tmp[4096];
    boost::system::error_code ec;
    const std::size_t n =
        tls_ ? tls_->read_some(net::buffer(tmp), ec) : socket_.read_some(net::buffer(tmp), ec);
    if (ec || n == 0) return false;
    buf_.append(tmp, n);
    return true;
  }

  tcp::socket socket_;
  std::unique_ptr<net::ssl::stream<tcp::socket&>> tls_;
  std::string buf_;
  std::atomic<bool> closed_{false};
};

class Server {
 public:
  using Handler = std::function<void(Conn&, const Request&)>;

  // Binds 127.0.0.1 on a free port (or on `port`, for a server that comes up where a client
  // was refused); start() begins accepting. Handlers may refer to the server (wait_for,
  // stopping) when it is declared before them.
  explicit Server(std::shared_ptr<net::ssl::context> tls = nullptr, std::uint16_t port = 0)
      : tls_(std::move(tls)), acceptor_(ioc_) {
    const tcp::endpoint ep(net::ip::make_address("127.0.0.1"), port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
  }
  explicit Server(Handler handler, std::shared_ptr<net::ssl::context> tls = nullptr)
      : Server(std::move(tls)) {
    start(std::move(handler));
  }
  void start(Handler handler) {
    handler_ = std::move(handler);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  // New connections are refused from now on; open ones go on.
  void stop_accepting() {
    accepting_ = false;
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    boost::system::error_code ec;
    acceptor_.close(ec);
  }

  // Ends every open connection abruptly, as a crashing server would.
  void drop_connections() {
    std::lock_guard<std::mutex> l(m_);
    for (auto& c : conns_)
      c->abort();
  }

  ~Server() {
    stop_ = true;
    if (accepting_) stop_accepting();
    {
      std::lock_guard<std::mutex> l(m_);
      for (auto& c : conns_)
        c->abort();
    }
    for (auto& t : threads_)
      t.join();
  }

  std::uint16_t port() const { return port_; }
  std::string url(const std::string& path = "/mcp") const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) + path;
  }
  const std::atomic<bool>& stopping() const { return stop_; }

  std::vector<Request> requests() const {
    std::lock_guard<std::mutex> l(m_);
    return requests_;
  }
  int connections() const { return accepted_; }

  // Waits for the n-th (1-based) request that matches; nullopt after the timeout.
  std::optional<Request> wait_for(const std::function<bool(const Request&)>& match,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                  int nth = 1) {
    std::unique_lock<std::mutex> l(m_);
    std::optional<Request> found;
    cv_.wait_for(l, timeout, [&] {
      int seen = 0;
      for (const auto& r : requests_) {
        if (match(r) && ++seen == nth) {
          found = r;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  std::size_t count(const std::function<bool(const Request&)>& match) const {
    std::lock_guard<std::mutex> l(m_);
    std::size_t n = 0;
    for (const auto& r : requests_)
      n += match(r) ? 1 : 0;
    return n;
  }

 private:
  void accept_loop() {
    while (!stop_) {
      boost::system::error_code ec;
      tcp::socket s(ioc_);
      acceptor_.accept(s, ec);
      if (ec || stop_ || !accepting_) return;
      auto conn = std::make_shared<Conn>(std::move(s), tls_.get());
      conn->number = ++accepted_;
      std::lock_guard<std::mutex> l(m_);
      conns_.push_back(conn);
      threads_.emplace_back([this, conn] { serve(conn); });
    }
  }

  void serve(const std::shared_ptr<Conn>& conn) {
    if (!conn->handshake()) return;
    while (!stop_ && !conn->closed()) {
      auto req = conn->read_request();
      if (!req) return;
      req->connection = conn->number;
      {
        std::lock_guard<std::mutex> l(m_);
        requests_.push_back(*req);
      }
      cv_.notify_all();
      handler_(*conn, *req);
    }
  }

  Handler handler_;
  std::shared_ptr<net::ssl::context> tls_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> accepting_{true};
  std::atomic<int> accepted_{0};
  std::thread accept_thread_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<Request> requests_;
  std::list<std::shared_ptr<Conn>> conns_;
  std::vector<std::thread> threads_;
};

// Matchers for wait_for/count.
inline std::function<bool(const Request&)> post_with(const std::string& needle) {
  return [needle](const Request& r) { return r.method == "POST" && r.has(needle); };
}
inline std::function<bool(const Request&)> method_is(const std::string& method) {
  return [method](const Request& r) { return r.method == method; };
}

// ---- a minimal MCP server script ------------------------------------------------------------

inline std::string result_json(const jsonrpc::Id& id, const std::string& result) {
  return R"({"jsonrpc":"2.0","id":)" + id.to_json() + R"(,"result":)" + result + "}";
}
inline std::string init_result(const jsonrpc::Id& id, const std::string& version = "2025-06-18") {
  return result_json(
      id, R"({"protocolVersion":")" + version +
              R"(","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}})");
}

// What the fake MCP server does: initialize gets a JSON result (with the session id when set),
// notifications and responses get 202, GET gets 405 and DELETE 200 unless the test says
// otherwise; every other request goes to `request` (default: an empty result).
struct Script {
  std::string session_id = "sess-1";
  std::function<void(Conn&, const Request&)> get;
  std::function<void(Conn&, const Request&)> del;
  std::function<void(Conn&, const Request&, const jsonrpc::Message&)> request;
  std::function<void(Conn&, const Request&, const jsonrpc::Message&)> initialize;
};

inline Server::Handler mcp(Script s) {
  return [s](Conn& c, const Request& r) {
    if (r.method == "GET") {
      if (s.get) return s.get(c, r);
      c.respond(405, "", "", {{"Allow", "POST, DELETE"}});
      return;
    }
    if (r.method == "DELETE") {
      if (s.del) return s.del(c, r);
      c.respond(200, "", "");
      return;
    }
    auto m = jsonrpc::Message::parse(r.body);
    if (!m) {
      c.respond(400, "text/plain", "not JSON-RPC");
      return;
    }
    if (m->method() == "initialize") {
      if (s.initialize) return s.initialize(c, r, *m);
      Headers h;
      if (!s.session_id.empty()) h.emplace_back("Mcp-Session-Id", s.session_id);
      c.json(init_result(m->id()), h);
      return;
    }
    if (!m->is_request()) {
      c.accepted();
      return;
    }
    if (s.request) return s.request(c, r, *m);
    c.json(result_json(m->id(), "{}"));
  };
}

}  // namespace mcpmqtt::test::fake

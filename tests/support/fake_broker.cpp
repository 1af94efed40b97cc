#include "tests/support/fake_broker.hpp"

#include <algorithm>
#include <stdexcept>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mcpmqtt::test {

namespace wire {

std::string varint(std::size_t v) {
  std::string out;
  do {
    unsigned char b = v % 128;
    v /= 128;
    if (v) b |= 0x80;
    out.push_back(static_cast<char>(b));
  } while (v);
  return out;
}

std::string u16(std::size_t v) {
  return std::string{static_cast<char>((v >> 8) & 0xFF), static_cast<char>(v & 0xFF)};
}

std::string utf8(const std::string& s) {
  return u16(s.size()) + s;
}

std::string packet(unsigned char type_flags, const std::string& body) {
  return std::string(1, static_cast<char>(type_flags)) + varint(body.size()) + body;
}

}  // namespace wire

namespace {

using wire::packet;
using wire::u16;
using wire::utf8;
using wire::varint;

// Writes all of `data`; false when the connection failed. (No SIGPIPE: the client may be gone.)
bool write_all(int fd, const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    const auto n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// A cursor over a packet body.
struct Reader {
  const std::string& s;
  std::size_t pos = 0;
  bool ok = true;
  bool more() const { return ok && pos < s.size(); }
  unsigned byte() {
    if (pos >= s.size()) {
      ok = false;
      return 0;
    }
    return static_cast<unsigned char>(s[pos++]);
  }
  unsigned u16v() { return (byte() << 8) | byte(); }
  std::uint32_t u32v() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v = (v << 8) | byte();
    return v;
  }
  std::size_t var() {
    std::size_t v = 0, mul = 1;
    for (int i = 0; i < 4; ++i) {
      const unsigned b = byte();
      v += (b & 0x7F) * mul;
      if (!(b & 0x80)) break;
      mul *= 128;
    }
    return v;
  }
  std::string str() {
    const std::size_t n = u16v();
    if (pos + n > s.size()) {
      ok = false;
      return {};
    }
    std::string out = s.substr(pos, n);
    pos += n;
    return out;
  }
  // MQTT 5.0 §2.2.2: properties; records user properties, (for CONNECT) the session expiry and
  // the limits and (for PUBLISH) Response Topic and Correlation Data, skips the rest.
  void properties(UserProperties& user, ConnectPacket* connect = nullptr,
                  PublishPacket* publish = nullptr) {
    const std::size_t len = var();
    const std::size_t end = pos + len;
    while (ok && pos < end) {
      const unsigned id = byte();
      switch (id) {
        case 0x26: {
          auto k = str();
          auto v = str();
          user.emplace_back(std::move(k), std::move(v));
          break;
        }
        case 0x11: {
          auto v = u32v();
          if (connect) connect->session_expiry = v;
          break;
        }
        case 0x27: {
          auto v = u32v();
          if (connect) connect->maximum_packet_size = v;
          break;
        }
        case 0x21:
        case 0x22: {
          auto v = u16v();
          if (connect) (id == 0x21 ? connect->receive_maximum : connect->topic_alias_maximum) = v;
          break;
        }
        case 0x01:
        case 0x17:
        case 0x19:
        case 0x24:
        case 0x25:
        case 0x28:
        case 0x29:
        case 0x2A:
          byte();
          break;
        case 0x13:
        case 0x23:
          u16v();
          break;
        case 0x02:
        case 0x18:
          u32v();
          break;
        case 0x0B:
          var();
          break;
        case 0x08:
        case 0x09: {
          auto v = str();
          if (publish) (id == 0x08 ? publish->response_topic : publish->correlation_data) = v;
          break;
        }
        case 0x03:
        case 0x12:
        case 0x15:
        case 0x16:
        case 0x1A:
        case 0x1C:
        case 0x1F:
          str();
          break;
        default:
          ok = false;
          break;
      }
    }
    pos = end;
  }
};

}  // namespace

FakeBroker::FakeBroker(ConnackProperties connack) : connack_(std::move(connack)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 16) != 0) {
    throw std::runtime_error("FakeBroker: cannot listen on 127.0.0.1:0");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

// Reads exactly n bytes; false on EOF/error or when the broker stops. While silent it reads
// nothing (what the client sends waits in the socket).
bool FakeBroker::read_exact(int fd, std::string& out, std::size_t n) {
  out.clear();
  while (out.size() < n) {
    if (stopping_) return false;
    if (silent_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 100);
    if (stopping_) return false;
    if (r <= 0 || silent_) continue;
    char buf[4096];
    const auto got = ::read(fd, buf, std::min(sizeof buf, n - out.size()));
    if (got <= 0) return false;
    out.append(buf, static_cast<std::size_t>(got));
  }
  return true;
}

void FakeBroker::send(int fd, const std::string& data) {
  std::lock_guard lock(write_mu_);
  write_all(fd, data);
}

bool FakeBroker::inject(int connection, const std::string& bytes) {
  std::lock_guard lock(write_mu_);
  if (connection < 0 || static_cast<std::size_t>(connection) >= fds_.size()) return false;
  const int fd = fds_[static_cast<std::size_t>(connection)];
  return fd >= 0 && write_all(fd, bytes);
}

FakeBroker::~FakeBroker() {
  stopping_ = true;
  acceptor_.join();
  for (auto& w : workers_)
    w.join();
  ::close(listen_fd_);
}

void FakeBroker::accept_loop() {
  int n = 0;
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int connection = n++;
    {
      std::lock_guard lock(write_mu_);
      fds_.push_back(fd);
    }
    workers_.emplace_back([this, fd, connection] {
      serve(fd, connection);
      {
        std::lock_guard lock(write_mu_);
        fds_[static_cast<std::size_t>(connection)] = -1;
        ::close(fd);
      }
      if (!stopping_) {
        {
          std::lock_guard lock(mu_);
          closed_.push_back(connection);
        }
        cv_.notify_all();
      }
    });
  }
}

void FakeBroker::serve(int fd, int connection) {
  std::string client_id;
  std::string head, body;
  for (;;) {
    if (!read_exact(fd, head, 1)) return;
    const auto type_flags = static_cast<unsigned char>(head[0]);
    std::size_t len = 0, mul = 1;
    for (int i = 0; i < 4; ++i) {
      std::string b;
      if (!read_exact(fd, b, 1)) return;
      const auto c = static_cast<unsigned char>(b[0]);
      len += (c & 0x7F) * mul;
      if (!(c & 0x80)) break;
      mul *= 128;
    }
    if (!read_exact(fd, body, len)) return;
    Reader r{body};
    switch (type_flags >> 4) {
      case 1: {  // CONNECT
        ConnectPacket c;
        r.str();  // "MQTT"
        c.protocol_level = static_cast<int>(r.byte());
        const unsigned flags = r.byte();
        c.keep_alive = static_cast<int>(r.u16v());
        c.clean_start = flags & 0x02;
        r.properties(c.user_properties, &c);
        c.client_id = r.str();
        if (flags & 0x04) {
          c.will = true;
          c.will_qos = static_cast<int>((flags >> 3) & 0x03);
          c.will_retain = flags & 0x20;
          r.properties(c.will_user_properties);
          c.will_topic = r.str();
          c.will_payload = r.str();
        }
        if (flags & 0x80) c.username = r.str();
        if (flags & 0x40) c.password = r.str();
        client_id = c.client_id;
        UserProperties props = connack_ ? connack_(connection, c) : UserProperties{};
        std::string p;
        if (const std::uint32_t max = maximum_packet_size_) {
          p += '\x27';
          for (int shift = 24; shift >= 0; shift -= 8)
            p += static_cast<char>((max >> shift) & 0xFF);
        }
        for (const auto& [k, v] : props)
          p += std::string(1, '\x26') + utf8(k) + utf8(v);
        send(fd, packet(0x20, std::string{0, 0} + varint(p.size()) + p));
        {
          std::lock_guard lock(mu_);
          connects_.push_back(std::move(c));
        }
        cv_.notify_all();
        break;
      }
      case 3: {  // PUBLISH
        PublishPacket p;
        p.client_id = client_id;
        p.qos = (type_flags >> 1) & 0x03;
        p.retain = type_flags & 0x01;
        p.topic = r.str();
        unsigned id = 0;
        if (p.qos > 0) id = r.u16v();
        r.properties(p.user_properties, nullptr, &p);
        p.payload = body.substr(r.pos);
        p.packet_size = 1 + varint(body.size()).size() + body.size();
        if (p.qos == 1) send(fd, packet(0x40, u16(id)));
        {
          std::lock_guard lock(mu_);
          publishes_.push_back(std::move(p));
        }
        cv_.notify_all();
        break;
      }
      case 8: {  // SUBSCRIBE
        SubscribePacket s;
        s.client_id = client_id;
        const unsigned id = r.u16v();
        UserProperties ignored;
        r.properties(ignored);
        std::string codes;
        while (r.more()) {
          auto f = r.str();
          const int opts = static_cast<int>(r.byte());
          const bool refuse = f.rfind("refused/", 0) == 0;
          s.filters.emplace_back(std::move(f), opts);
          // The granted QoS, or 0x87 Not authorized.
          codes.push_back(static_cast<char>(refuse ? 0x87 : opts & 0x03));
        }
        send(fd, packet(0x90, u16(id) + std::string(1, '\0') + codes));
        {
          std::lock_guard lock(mu_);
          subscribes_.push_back(std::move(s));
        }
        cv_.notify_all();
        break;
      }
      case 10: {  // UNSUBSCRIBE
        const unsigned id = r.u16v();
        UserProperties ignored;
        r.properties(ignored);
        std::string codes;
        std::vector<std::string> filters;
        while (r.more()) {
          filters.push_back(r.str());
          codes.push_back('\0');
        }
        {
          std::lock_guard lock(mu_);
          unsubscribes_.push_back(std::move(filters));
        }
        send(fd, packet(0xB0, u16(id) + std::string(1, '\0') + codes));
        cv_.notify_all();
        break;
      }
      case 4:    // PUBACK
      case 5:    // PUBREC
      case 6:    // PUBREL
      case 7: {  // PUBCOMP
        AckPacket a;
        a.type = static_cast<int>(type_flags >> 4);
        a.packet_id = r.u16v();
        if (r.more()) a.reason_code = static_cast<int>(r.byte());
        {
          std::lock_guard lock(mu_);
          acks_.push_back(a);
        }
        cv_.notify_all();
        break;
      }
      case 12: {  // PINGREQ
        send(fd, packet(0xD0, ""));
        {
          std::lock_guard lock(mu_);
          ++pings_;
        }
        cv_.notify_all();
        break;
      }
      case 14: {  // DISCONNECT: its reason code, then the client closes
        DisconnectPacket d;
        d.connection = connection;
        if (!body.empty()) d.reason_code = static_cast<int>(r.byte());
        {
          std::lock_guard lock(mu_);
          disconnects_.push_back(d);
        }
        cv_.notify_all();
        break;
      }
      default:
        break;
    }
  }
}

namespace {
template <typename T>
std::optional<T> wait_nth(std::mutex& mu, std::condition_variable& cv, const std::vector<T>& v,
                          std::size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu);
  if (!cv.wait_for(lock, timeout, [&] { return v.size() > n; })) return std::nullopt;
  return v[n];
}
}  // namespace

std::optional<ConnectPacket> FakeBroker::connect(std::size_t n, std::chrono::milliseconds timeout) {
  return wait_nth(mu_, cv_, connects_, n, timeout);
}
std::optional<SubscribePacket> FakeBroker::subscribe(std::size_t n,
                                                     std::chrono::milliseconds timeout) {
  return wait_nth(mu_, cv_, subscribes_, n, timeout);
}
std::optional<PublishPacket> FakeBroker::publish(std::size_t n, std::chrono::milliseconds timeout) {
  return wait_nth(mu_, cv_, publishes_, n, timeout);
}
std::optional<DisconnectPacket> FakeBroker::disconnect(std::size_t n,
                                                       std::chrono::milliseconds timeout) {
  return wait_nth(mu_, cv_, disconnects_, n, timeout);
}

std::optional<AckPacket> FakeBroker::ack(std::size_t n, std::chrono::milliseconds timeout) {
  return wait_nth(mu_, cv_, acks_, n, timeout);
}

bool FakeBroker::wait_pings(std::size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return pings_ >= n; });
}

bool FakeBroker::wait_closed(int connection, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    return std::find(closed_.begin(), closed_.end(), connection) != closed_.end();
  });
}

std::vector<std::vector<std::string>> FakeBroker::unsubscribe_packets() const {
  std::lock_guard lock(mu_);
  return unsubscribes_;
}

std::vector<std::string> FakeBroker::unsubscribed() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& p : unsubscribes_)
    out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace mcpmqtt::test

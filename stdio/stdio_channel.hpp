// The bridge's own stdin and stdout as a Channel: `mcp-mqtt-bridge stdio …` launched by a
// desktop host, for which the bridge is then a stdio MCP server (002 §stdio).
//
// Reads newline-delimited JSON-RPC from the input descriptor and writes one message per line to
// the output descriptor; nothing but JSON-RPC is ever written there. A line that is not a valid
// message is answered, when JSON-RPC 2.0 §5 owes it an answer, with an error response (-32700
// for invalid JSON, -32600 for an invalid request, with the request's id when it could be read)
// and is otherwise only logged. EOF on the input closes the channel with Kind::normal ("stdin
// closed"); a host that stops reading makes the bounded output queue overflow, which closes the
// channel with Kind::error; a host that closes the output closes it with Kind::peer_gone.
//
// The channel works on duplicates of the descriptors, so fds 0 and 1 themselves stay open (a
// stray write to fd 1 must not land on a socket that reuses the number). Pipes, sockets and
// ttys are read and written through epoll. Regular files and /dev/null, which epoll refuses,
// are used directly: their reads and writes never wait, so `mcp-mqtt-bridge stdio < file`
// works. Asio switches the descriptors to non-blocking mode, which is shared with the host
// (for a tty, with the shell); the original mode is restored when the channel closes them.
//
// The daemon should also point fd 1 at stderr once the channel exists (dup2(2, 1)), so that
// nothing else in the process can write to the host's stdout, and must ignore SIGPIPE, so that
// a host that goes away is a write error rather than the end of the bridge.
//
// One strand; not thread-safe. Every call on the strand given to create().
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/relay/channel.hpp"
#include "common/expected.hpp"
#include "stdio/line_splitter.hpp"

namespace spdlog {
class logger;
}

namespace mcpmqtt::stdio {

class StdioChannel final : public bridge::Channel,
                           public std::enable_shared_from_this<StdioChannel> {
 public:
  struct Options {
    int input_fd = 0;
    int output_fd = 1;
    jsonrpc::Limits limits;                          // per message read from the input
    std::size_t max_queued_bytes = 8 * 1024 * 1024;  // toward the output, in flight included
    std::size_t max_queued_messages = 16384;         // the same queue, in messages
    // After a close, how long queued messages may take to reach the host before the output
    // is closed anyway.
    std::chrono::milliseconds flush_timeout{2000};
    std::string log_prefix;
  };

  // Fails (with a sentence naming the descriptor) when a descriptor cannot be used.
  static Expected<std::shared_ptr<StdioChannel>, std::string> create(
      boost::asio::any_io_executor strand, Options options);
  static Expected<std::shared_ptr<StdioChannel>, std::string> create(
      boost::asio::any_io_executor strand) {
    return create(std::move(strand), Options{});
  }

  ~StdioChannel() override;

  void start(Receiver receiver) override;
  void send(jsonrpc::Message message) override;
  void close(const bridge::CloseReason& why) override;
  std::string describe() const override;  // "[stdio]"

 private:
  struct Key {
    explicit Key() = default;
  };

 public:
  // For create() only (Key is private).
  StdioChannel(Key, boost::asio::any_io_executor strand, Options options);

 private:
  bool attach(int in_fd, int out_fd, std::string& why);
  void do_read();
  void on_read(const boost::system::error_code& ec, std::size_t n);
  void on_line(LineSplitter::Line&& line);
  void reply(const jsonrpc::Message& error_response);
  void enqueue(jsonrpc::Message message);
  void do_write();
  void on_write(const boost::system::error_code& ec);
  void report(bridge::CloseReason::Kind kind, const std::string& detail);
  void wind_down();
  void close_input();
  void close_output();

  boost::asio::any_io_executor ex_;
  Options options_;
  std::shared_ptr<spdlog::logger> log_;
  boost::asio::posix::stream_descriptor in_, out_;
  int in_flags_ = -1, out_flags_ = -1;  // status flags before Asio changed them
  boost::asio::steady_timer flush_timer_;
  LineSplitter lines_;
  std::unique_ptr<char[]> buf_;

  Receiver receiver_;
  std::deque<jsonrpc::Message> queue_;
  std::size_t queued_bytes_ = 0;
  bool started_ = false;
  bool closed_ = false;  // the owner was told, or closed it
  bool writing_ = false;
  bool input_open_ = true;
  bool output_open_ = true;
};

}  // namespace mcpmqtt::stdio

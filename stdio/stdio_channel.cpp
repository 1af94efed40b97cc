#include "stdio/stdio_channel.hpp"

#include <array>
#include <cerrno>
#include <string_view>
#include <system_error>
#include <utility>

#include <boost/asio/write.hpp>
#include <fcntl.h>
#include <unistd.h>

#include "common/errno_text.hpp"
#include "common/log.hpp"
#include "stdio/line_codec.hpp"

namespace mcpmqtt::stdio {

namespace asio = boost::asio;
using bridge::CloseReason;
using Kind = CloseReason::Kind;
using boost::system::error_code;

namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kLogBytes = 200;

// Puts the shared file status flags back (O_NONBLOCK above all) and closes our duplicate.
void restore_and_close(asio::posix::stream_descriptor& d, int flags) {
  if (!d.is_open()) return;
  if (flags >= 0) ::fcntl(d.native_handle(), F_SETFL, flags);
  error_code ignored;
  d.close(ignored);
}

}  // namespace

Expected<std::shared_ptr<StdioChannel>, std::string> StdioChannel::create(
    asio::any_io_executor strand, Options options) {
  const int in_fd = ::fcntl(options.input_fd, F_DUPFD_CLOEXEC, 3);
  if (in_fd < 0) {
    return unexpected("cannot use the input descriptor " + std::to_string(options.input_fd) + ": " +
                      errno_text(errno));
  }
  const int out_fd = ::fcntl(options.output_fd, F_DUPFD_CLOEXEC, 3);
  if (out_fd < 0) {
    const int err = errno;
    ::close(in_fd);
    return unexpected("cannot use the output descriptor " + std::to_string(options.output_fd) +
                      ": " + errno_text(err));
  }
  auto ch = std::make_shared<StdioChannel>(Key{}, std::move(strand), std::move(options));
  if (std::string why; !ch->attach(in_fd, out_fd, why)) return unexpected(std::move(why));
  return ch;
}

StdioChannel::StdioChannel(Key, asio::any_io_executor strand, Options options)
    : ex_(std::move(strand)),
      options_(std::move(options)),
      log_(log::stdio()),
      in_(ex_),
      out_(ex_),
      flush_timer_(ex_),
      lines_(options_.limits.max_bytes),
      buf_(new char[kReadChunk]) {
  if (options_.log_prefix.empty()) options_.log_prefix = "[stdio]";
}

// Takes ownership of both descriptors, also when it fails.
bool StdioChannel::attach(int in_fd, int out_fd, std::string& why) {
  in_flags_ = ::fcntl(in_fd, F_GETFL);
  out_flags_ = ::fcntl(out_fd, F_GETFL);
  error_code ec;
  in_.assign(in_fd, ec);
  if (ec) {
    ::close(in_fd);
    ::close(out_fd);
    why = "cannot read descriptor " + std::to_string(options_.input_fd) + ": " + ec.message();
    return false;
  }
  out_.assign(out_fd, ec);
  if (ec) {
    ::close(out_fd);
    why = "cannot write descriptor " + std::to_string(options_.output_fd) + ": " + ec.message();
    return false;
  }
  return true;
}

StdioChannel::~StdioChannel() {
  restore_and_close(in_, in_flags_);
  restore_and_close(out_, out_flags_);
}

std::string StdioChannel::describe() const {
  return options_.log_prefix;
}

void StdioChannel::start(Receiver receiver) {
  if (started_) return;
  started_ = true;
  if (closed_) return;
  receiver_ = std::move(receiver);
  do_read();
}

void StdioChannel::send(jsonrpc::Message message) {
  if (closed_) return;  // Channel contract: ignored after close
  enqueue(std::move(message));
}

void StdioChannel::close(const CloseReason& why) {
  if (closed_) return;
  closed_ = true;
  receiver_ = {};
  log_->debug("{} closing: {}", options_.log_prefix,
              why.detail.empty() ? bridge::to_string(why.kind) : why.detail);
  wind_down();
}

// ---- input --------------------------------------------------------------------------------------

void StdioChannel::do_read() {
  in_.async_read_some(
      asio::buffer(buf_.get(), kReadChunk),
      [self = shared_from_this()](const error_code& ec, std::size_t n) { self->on_read(ec, n); });
}

void StdioChannel::on_read(const error_code& ec, std::size_t n) {
  if (!input_open_) return;
  if (n > 0) {
    lines_.feed(std::string_view(buf_.get(), n),
                [this](LineSplitter::Line&& line) { on_line(std::move(line)); });
    if (!input_open_) return;
  }
  if (!ec) return do_read();
  if (ec == asio::error::operation_aborted) return;
  // A last line without its newline still counts.
  if (auto last = lines_.finish()) on_line(std::move(*last));
  if (closed_) return;
  if (ec == asio::error::eof)
    report(Kind::normal, "stdin closed");
  else
    report(Kind::error, "reading stdin failed: " + ec.message());
}

void StdioChannel::on_line(LineSplitter::Line&& line) {
  if (closed_) return;
  if (line.too_long) {
    log_->warn("{} a line of {} bytes from the host exceeds the limit of {} bytes; rejected: {}",
               options_.log_prefix, line.size, options_.limits.max_bytes,
               excerpt(line.text, kLogBytes, line.size));
    reply(jsonrpc::Message::error(jsonrpc::Id{}, jsonrpc::code::invalid_request,
                                  "message of " + std::to_string(line.size) +
                                      " bytes exceeds the limit of " +
                                      std::to_string(options_.limits.max_bytes) + " bytes"));
    return;
  }
  if (is_blank(line.text)) return;
  auto parsed = parse_line(std::move(line.text), options_.limits);
  for (const auto& r : parsed.rejected) {
    log_->warn("{} invalid message from the host ({}){}: {}", options_.log_prefix,
               r.failure.error.message, r.answer ? "" : "; not answered: it is a response",
               excerpt(parsed.line, kLogBytes));
    // JSON-RPC 2.0 §5: the id of the request, or null when it cannot be determined.
    if (r.answer) reply(jsonrpc::Message::error(r.failure.id, r.failure.error));
  }
  for (auto& m : parsed.messages) {
    if (closed_ || !receiver_.on_message) break;  // on_message may close the channel
    receiver_.on_message(std::move(m));
  }
}

void StdioChannel::reply(const jsonrpc::Message& error_response) {
  if (!closed_) enqueue(error_response);
}

void StdioChannel::close_input() {
  if (!input_open_) return;
  input_open_ = false;
  restore_and_close(in_, in_flags_);
}

// ---- output -------------------------------------------------------------------------------------

void StdioChannel::enqueue(jsonrpc::Message message) {
  if (!output_open_) return;
  const std::size_t bytes = message.size() + 1;
  if (const std::string detail =
          queue_full("stdout", "the host is not reading the bridge's output",
                     {options_.max_queued_bytes, options_.max_queued_messages}, queued_bytes_,
                     queue_.size(), bytes);
      !detail.empty()) {
    close_output();  // nothing more can reach a host that does not read
    report(Kind::error, detail);
    return;
  }
  queue_.push_back(std::move(message));
  queued_bytes_ += bytes;
  if (!writing_) do_write();
}

void StdioChannel::do_write() {
  writing_ = true;
  jsonrpc::Message m = queue_.front();  // held by the handler: its bytes outlive a close
  const auto text = m.text();
  const std::array<asio::const_buffer, 2> buffers{asio::buffer(text.data(), text.size()),
                                                  asio::buffer("\n", 1)};
  asio::async_write(
      out_, buffers,
      [self = shared_from_this(), m](const error_code& ec, std::size_t) { self->on_write(ec); });
}

void StdioChannel::on_write(const error_code& ec) {
  writing_ = false;
  if (!output_open_) return;
  if (ec) {
    const std::string detail = "the host closed the bridge's stdout (" + ec.message() + ")";
    close_output();
    if (!closed_) report(Kind::peer_gone, detail);
    return;
  }
  queued_bytes_ -= queue_.front().size() + 1;
  queue_.pop_front();
  if (!queue_.empty())
    do_write();
  else if (closed_)
    close_output();  // flushed after a close
}

void StdioChannel::close_output() {
  if (!output_open_) return;
  output_open_ = false;
  queue_.clear();
  queued_bytes_ = 0;
  flush_timer_.cancel();
  restore_and_close(out_, out_flags_);
}

// ---- closing ------------------------------------------------------------------------------------

void StdioChannel::report(Kind kind, const std::string& detail) {
  closed_ = true;
  auto receiver = std::move(receiver_);
  receiver_ = {};
  if (kind == Kind::normal)
    log_->info("{} {}", options_.log_prefix, detail);
  else
    log_->warn("{} closing: {}", options_.log_prefix, detail);
  wind_down();
  if (receiver.on_close) receiver.on_close(CloseReason{kind, detail});
}

// Stops reading, and lets what is queued reach the host, for at most flush_timeout.
void StdioChannel::wind_down() {
  close_input();
  if (!output_open_) return;
  if (queue_.empty() && !writing_) return close_output();
  flush_timer_.expires_after(options_.flush_timeout);
  flush_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec || !self->output_open_) return;
    self->log_->warn("{} {} bytes of output were not taken by the host within {} ms; dropped",
                     self->options_.log_prefix, self->queued_bytes_,
                     self->options_.flush_timeout.count());
    self->close_output();
  });
}

}  // namespace mcpmqtt::stdio

// Splits a byte stream into lines with a size limit per line (no I/O).
//
// 002 §stdio: messages are delimited by newlines and contain no embedded newline. A trailing
// "\r" is dropped so that peers writing CRLF still work. A line longer than the limit is not kept
// whole: only its first bytes are kept (for a log excerpt) and it is reported as too long once its
// end arrives, so memory stays bounded by the limit whatever the peer writes.
//
// One strand; not thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mcpmqtt::stdio {

class LineSplitter {
 public:
  struct Line {
    std::string text;       // without its terminator; for a too-long line, its first bytes only
    std::size_t size = 0;   // the full size of the line in bytes (without the terminator)
    bool too_long = false;  // size > max_line_bytes
  };

  // `keep_of_long_lines` bytes of a too-long line are kept in Line::text.
  explicit LineSplitter(std::size_t max_line_bytes, std::size_t keep_of_long_lines = 256);

  // Consumes `bytes`, calling on_line(Line&&) for every line completed by them, in order.
  template <typename OnLine>
  void feed(std::string_view bytes, OnLine&& on_line) {
    while (!bytes.empty()) {
      const auto nl = bytes.find('\n');
      append(bytes.substr(0, nl));
      if (nl == std::string_view::npos) return;
      on_line(take());
      bytes.remove_prefix(nl + 1);
    }
  }

  // At end of input: the last line when it had no terminator (nullopt when nothing is pending).
  std::optional<Line> finish();

  // Bytes of the current, unfinished line held in memory.
  std::size_t buffered() const { return current_.size(); }
  // Bytes of the current, unfinished line so far, those not kept included.
  std::size_t unfinished_size() const { return size_; }

 private:
  void append(std::string_view piece);
  Line take();

  std::size_t max_;
  std::size_t keep_;
  std::string current_;
  std::size_t size_ = 0;
  bool too_long_ = false;
  bool last_was_cr_ = false;
};

}  // namespace mcpmqtt::stdio

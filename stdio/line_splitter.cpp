#include "stdio/line_splitter.hpp"

#include <algorithm>
#include <utility>

namespace mcpmqtt::stdio {

LineSplitter::LineSplitter(std::size_t max_line_bytes, std::size_t keep_of_long_lines)
    : max_(max_line_bytes), keep_(std::min(keep_of_long_lines, max_line_bytes)) {}

void LineSplitter::append(std::string_view piece) {
  size_ += piece.size();
  if (!piece.empty()) last_was_cr_ = piece.back() == '\r';
  if (too_long_) return;
  // One byte of slack for the "\r" of a CRLF terminator, which does not count against the limit.
  if (size_ <= max_ || size_ - 1 <= max_) {
    current_.append(piece);
    return;
  }
  too_long_ = true;
  if (current_.size() < keep_) current_.append(piece.substr(0, keep_ - current_.size()));
  current_.resize(std::min(current_.size(), keep_));
  current_.shrink_to_fit();
}

LineSplitter::Line LineSplitter::take() {
  Line line;
  line.size = size_;
  line.too_long = too_long_;
  if (size_ > 0 && last_was_cr_) {
    if (!too_long_) current_.pop_back();
    --line.size;
  }
  if (!too_long_ && line.size > max_) {
    line.too_long = true;
    current_.resize(std::min(current_.size(), keep_));
  }
  line.text = std::move(current_);
  current_.clear();
  size_ = 0;
  too_long_ = false;
  last_was_cr_ = false;
  return line;
}

std::optional<LineSplitter::Line> LineSplitter::finish() {
  if (size_ == 0 && !too_long_) return std::nullopt;
  return take();
}

}  // namespace mcpmqtt::stdio

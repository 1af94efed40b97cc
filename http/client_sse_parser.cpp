#include "http/client_sse_parser.hpp"

#include <algorithm>

namespace mcpmqtt::http {
namespace {

constexpr char kBom[] = "\xEF\xBB\xBF";
// A retry longer than a day is a server mistake; cap it rather than overflow.
constexpr std::chrono::milliseconds kMaxRetry{24 * 60 * 60 * 1000};

}  // namespace

SseParser::SseParser(std::size_t max_event_bytes) : max_(max_event_bytes) {}

bool SseParser::feed(std::string_view bytes, std::vector<Event>& out) {
  if (failed_) return false;
  std::size_t i = 0;
  // WHATWG: one leading U+FEFF BYTE ORDER MARK is ignored; it may arrive split across pieces.
  while (at_start_ && i < bytes.size()) {
    if (bytes[i] == kBom[bom_matched_]) {
      ++i;
      if (++bom_matched_ == 3) at_start_ = false;
      continue;
    }
    at_start_ = false;
    const std::string partial(kBom, bom_matched_);
    bom_matched_ = 0;
    if (!partial.empty() && !feed(partial, out)) return false;
  }
  for (; i < bytes.size(); ++i) {
    const char c = bytes[i];
    got_bytes_ = true;
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;  // the LF of a CRLF pair
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      if (line_.empty()) {
        dispatch(out);
      } else {
        on_line();
        line_.clear();
      }
      if (failed_) return false;
      continue;
    }
    line_.push_back(c);
    if (line_.size() + data_.size() > max_) {
      failed_ = true;
      line_.clear();
      data_.clear();
      return false;
    }
  }
  return true;
}

void SseParser::on_line() {
  if (line_.front() == ':') return;  // a comment, such as a keep-alive
  std::string_view field = line_;
  std::string_view value;
  const auto colon = line_.find(':');
  if (colon != std::string::npos) {
    field = std::string_view(line_).substr(0, colon);
    value = std::string_view(line_).substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    data_.append(value);
    data_.push_back('\n');
    if (data_.size() > max_ + 1) {
      failed_ = true;
      data_.clear();
    }
  } else if (field == "event") {
    type_.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) id_buffer_.assign(value);
  } else if (field == "retry") {
    if (!value.empty() &&
        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      std::chrono::milliseconds::rep ms = 0;
      for (const char c : value) {
        ms = ms * 10 + (c - '0');
        if (ms > kMaxRetry.count()) {
          ms = kMaxRetry.count();
          break;
        }
      }
      retry_ = std::chrono::milliseconds(ms);
    }
  }
  // Other fields are ignored (WHATWG).
}

void SseParser::dispatch(std::vector<Event>& out) {
  last_event_id_ = id_buffer_;
  if (data_.empty()) {
    type_.clear();
    return;
  }
  data_.pop_back();  // the LF after the last data line
  Event e;
  if (!type_.empty()) e.type = std::move(type_);
  e.data = std::move(data_);
  e.id = last_event_id_;
  out.push_back(std::move(e));
  type_.clear();
  data_.clear();
}

}  // namespace mcpmqtt::http

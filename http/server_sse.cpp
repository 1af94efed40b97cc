#include "http/server_sse.hpp"

#include <algorithm>
#include <cstdio>

namespace mcpmqtt::http {

std::string sse_event(std::string_view id, std::string_view data) {
  std::string out;
  out.reserve(data.size() + id.size() + 32);
  append_sse_event(out, id, data);
  return out;
}

void append_sse_event(std::string& out, std::string_view id, std::string_view data) {
  const auto cr = data.find('\r');
  const auto lf = data.find('\n');
  const bool one_line = cr == std::string_view::npos && lf == std::string_view::npos;
  // Reserved to the byte (one "data: " per line): appending a large message piece by piece
  // would otherwise double the buffer's capacity on its last newline.
  const auto lines =
      one_line ? 1
               : 1 + static_cast<std::size_t>(std::count(data.begin(), data.end(), '\n')) +
                     static_cast<std::size_t>(std::count(data.begin(), data.end(), '\r'));
  out.reserve(out.size() + data.size() + id.size() + lines * 7 + 32);
  out += "event: message\n";
  if (!id.empty()) {
    out += "id: ";
    out += id;
    out += '\n';
  }
  if (one_line) {  // compact JSON, the usual case: no scan per character
    out += "data: ";
    out += data;
    out += "\n\n";
    return;
  }
  std::size_t start = 0;
  while (true) {
    auto end = data.find_first_of("\r\n", start);
    out += "data: ";
    out += data.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    out += '\n';
    if (end == std::string_view::npos) break;
    if (data[end] == '\r' && end + 1 < data.size() && data[end + 1] == '\n') ++end;
    start = end + 1;
  }
  out += '\n';
}

std::string sse_priming(std::string_view id, int retry_ms) {
  std::string out = "id: ";
  out += id;
  out += "\nretry: ";
  out += std::to_string(retry_ms);
  out += "\ndata: \n\n";
  return out;
}

std::string_view sse_keepalive() {
  return ": keepalive\n\n";
}

std::size_t chunk_head(char (&head)[24], std::size_t size) {
  return static_cast<std::size_t>(std::snprintf(head, sizeof head, "%zx\r\n", size));
}

void keep_chunk_tail(std::string& data, const char* head, std::size_t head_len, std::size_t sent) {
  const std::size_t size = data.size();
  if (sent < head_len)
    data.insert(0, head + sent, head_len - sent);
  else
    data.erase(0, std::min(sent - head_len, size));
  const std::size_t crlf_sent = sent > head_len + size ? sent - head_len - size : 0;
  data.append(std::string_view("\r\n").substr(crlf_sent));
}

}  // namespace mcpmqtt::http

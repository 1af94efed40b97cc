#include "stdio/line_codec.hpp"

#include <memory>
#include <utility>

#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

namespace mcpmqtt::stdio {

namespace {

constexpr std::string_view kJsonSpace = " \t\r\n";

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(kJsonSpace);
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(kJsonSpace);
  return s.substr(b, e - b + 1);
}

// Records which of "method", "result" and "error" the top-level object has; builds nothing.
class ShapeProbe : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, ShapeProbe> {
 public:
  bool object = false, method = false, result = false, error = false;

  bool Default() { return true; }
  bool StartObject() {
    if (depth_ == 0) object = true;
    ++depth_;
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    --depth_;
    return true;
  }
  bool StartArray() {
    ++depth_;
    return true;
  }
  bool EndArray(rapidjson::SizeType) {
    --depth_;
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    if (depth_ == 1 && object) {
      const std::string_view k(s, n);
      method = method || k == "method";
      result = result || k == "result";
      error = error || k == "error";
    }
    return true;
  }

 private:
  unsigned depth_ = 0;
};

// JSON-RPC 2.0 §5: responses are not answered.
bool looks_like_response(std::string_view text) {
  ShapeProbe probe;
  rapidjson::Reader reader;
  rapidjson::MemoryStream ms(text.data(), text.size());
  // Iterative: deep nesting cannot exhaust the stack. A failed parse leaves what was seen.
  reader.Parse<rapidjson::kParseIterativeFlag>(ms, probe);
  return probe.object && !probe.method && (probe.result || probe.error);
}

ParsedLine::Rejection reject(jsonrpc::ParseFailure f, std::string_view text) {
  const bool answer = f.error.code == jsonrpc::code::parse_error || !looks_like_response(text);
  return ParsedLine::Rejection{std::move(f), answer};
}

}  // namespace

bool is_blank(std::string_view text) {
  return text.find_first_not_of(kJsonSpace) == std::string_view::npos;
}

std::vector<std::string_view> split_array_elements(std::string_view text) {
  std::vector<std::string_view> out;
  text = trim(text);
  if (text.empty() || text.front() != '[') return out;
  std::size_t depth = 0, start = 1;
  bool in_string = false, escaped = false;
  for (std::size_t i = 1; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        ++depth;
        break;
      case ']':
      case '}':
        if (depth == 0) {  // the array's own end
          const auto last = trim(text.substr(start, i - start));
          if (!last.empty() || !out.empty()) out.push_back(last);
          return out;
        }
        --depth;
        break;
      case ',':
        if (depth == 0) {
          out.push_back(trim(text.substr(start, i - start)));
          start = i + 1;
        }
        break;
      default:
        break;
    }
  }
  // Unterminated array: what was collected, and the rest as a last (invalid) element.
  const auto rest = trim(text.substr(start));
  if (!rest.empty()) out.push_back(rest);
  return out;
}

ParsedLine parse_line(std::string line, const jsonrpc::Limits& limits) {
  ParsedLine out;
  const std::string_view t = trim(line);
  if (t.empty() || t.front() != '[') {
    // Message::parse leaves the shared text intact, so a failure can still be examined.
    auto text = std::make_shared<const std::string>(std::move(line));
    auto m = jsonrpc::Message::parse(text, limits);
    if (m)
      out.messages.push_back(std::move(m).value());
    else {
      out.rejected.push_back(reject(std::move(m.error()), *text));
      out.line = *text;
    }
    return out;
  }

  out.batch = true;
  auto body = jsonrpc::parse_body(line, limits);
  if (body) {
    out.messages = std::move(body->messages);
    return out;
  }
  const auto elements = split_array_elements(line);
  if (body.error().error.code == jsonrpc::code::parse_error || elements.empty() ||
      line.size() > limits.max_bytes) {
    // JSON-RPC 2.0 §6: a batch that is not valid JSON, or empty, gets one error response.
    out.rejected.push_back(ParsedLine::Rejection{std::move(body.error()), true});
    out.line = std::move(line);
    return out;
  }
  jsonrpc::Limits inner = limits;
  inner.max_depth = limits.max_depth > 0 ? limits.max_depth - 1 : 0;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    auto m = jsonrpc::Message::parse(std::string(elements[i]), inner);
    if (m) {
      out.messages.push_back(std::move(m).value());
      continue;
    }
    auto f = std::move(m.error());
    f.error.message = "batch element " + std::to_string(i) + ": " + f.error.message;
    out.rejected.push_back(reject(std::move(f), elements[i]));
  }
  if (!out.rejected.empty()) out.line = std::move(line);
  return out;
}

std::string excerpt(std::string_view text, std::size_t max, std::size_t total_size) {
  if (total_size < text.size()) total_size = text.size();
  std::size_t cut = std::min(max, text.size());
  // Do not split a UTF-8 sequence: back up over continuation bytes.
  if (cut < text.size()) {
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
      --cut;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(cut + 16);
  for (std::size_t i = 0; i < cut; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut < total_size) out += "… (" + std::to_string(total_size) + " bytes)";
  return out;
}

std::string queue_full(std::string_view whom, std::string_view why, const QueueBound& bound,
                       std::size_t queued_bytes, std::size_t queued_messages,
                       std::size_t incoming) {
  if (queued_bytes > 0 && queued_bytes + incoming > bound.max_bytes)
    return std::string(whom) + " is full: " + std::to_string(queued_bytes) +
           " bytes wait to be written and " + std::to_string(incoming) +
           " more would pass the limit of " + std::to_string(bound.max_bytes) + " bytes; " +
           std::string(why);
  if (queued_messages >= bound.max_messages)
    return std::string(whom) + " is full: " + std::to_string(queued_messages) +
           " messages wait to be written, the limit; " + std::string(why);
  return {};
}

}  // namespace mcpmqtt::stdio

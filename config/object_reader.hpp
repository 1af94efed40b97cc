// Reads one JSON object of the configuration file: typed members with their bounds, and at the
// end the keys nobody asked about (with the nearest known key as a suggestion) and keys given
// twice. Internal to config/.
//
// Not thread-safe; one per object being read, on the thread that loads the configuration.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "config/config.hpp"

namespace mcpmqtt::config::detail {

using rapidjson::Value;

// "a string", "an object", ... (for messages).
const char* type_name(const Value& v);
// A value for messages: a string quoted (cut at 40 bytes), otherwise its type.
std::string show(const Value& v);
// `parent.key`, the key quoted when it is not an identifier (mcpServers."demo/x").
std::string child_path(const std::string& parent, const std::string& key);

// While key_paths() runs: where every key the readers ask about is written down.
extern thread_local std::vector<std::string>* key_recorder;

// Reads one JSON object of the configuration. Every key the code asks about is a known key;
// finish() reports the others, with the nearest known key as a suggestion.
class ObjectReader {
 public:
  ObjectReader(const Value& obj, std::string path, std::vector<Problem>& problems)
      : obj_(obj), path_(std::move(path)), problems_(problems) {}

  const std::string& path() const { return path_; }
  std::string path_of(const std::string& key) const { return child_path(path_, key); }

  // The member `key` (now a known key), or nullptr when absent.
  const Value* get(const char* key);
  void problem(const std::string& key, std::string message);

  // Typed members: true when `key` is present and valid (then `out` is set); a present but
  // invalid member is reported.
  bool string(const char* key, std::string& out, bool allow_empty = true);
  bool boolean(const char* key, bool& out);
  template <typename T>
  bool integer(const char* key, T& out, long long min, long long max) {
    const Value* v = get(key);
    if (!v) return false;
    if (!v->IsInt64()) {
      problem(key, std::string("expected an integer from ") + std::to_string(min) + " to " +
                       std::to_string(max) + ", found " + show(*v));
      return false;
    }
    const long long n = v->GetInt64();
    if (n < min || n > max) {
      problem(key, "expected an integer from " + std::to_string(min) + " to " +
                       std::to_string(max) + ", found " + std::to_string(n));
      return false;
    }
    out = static_cast<T>(n);
    return true;
  }

  // A duration in milliseconds under `<base>_ms`, or in whole seconds under the older
  // `<base>_s` (kept working); both at once is a problem. True when one was given.
  bool millis(const std::string& base, int& out_ms, long long min_ms, long long max_ms);

  // A duration written in seconds (fractions allowed), stored in milliseconds.
  bool seconds_as_ms(const Value& v, const std::string& key, int& out_ms, double max_s);

  bool string_list(const char* key, std::vector<std::string>& out);
  bool string_map(const char* key, std::map<std::string, std::string>& out);

  // A nested object, or nullptr when absent or not an object (the latter is reported).
  const Value* object(const char* key);

  // Reports keys nobody asked about, and keys given twice (JSON parsers keep only one of them,
  // so the other would be silently ignored).
  void finish();

 private:
  const Value& obj_;
  std::string path_;
  std::vector<Problem>& problems_;
  std::vector<std::string> known_;
};

}  // namespace mcpmqtt::config::detail

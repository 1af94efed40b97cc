#include "config/object_reader.hpp"

#include <algorithm>
#include <set>

namespace mcpmqtt::config::detail {

thread_local std::vector<std::string>* key_recorder = nullptr;

const char* type_name(const Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return "a boolean";
  if (v.IsObject()) return "an object";
  if (v.IsArray()) return "an array";
  if (v.IsString()) return "a string";
  if (v.IsInt64() || v.IsUint64()) return "an integer";
  return "a number";
}

std::string show(const Value& v) {
  if (v.IsString()) {
    std::string s = v.GetString();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return "\"" + s + "\"";
  }
  return type_name(v);
}

namespace {

bool is_identifier(const std::string& key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

std::string child_path(const std::string& parent, const std::string& key) {
  const std::string k = is_identifier(key) ? key : "\"" + key + "\"";
  return parent.empty() ? k : parent + "." + k;
}

const Value* ObjectReader::get(const char* key) {
  known_.push_back(key);
  if (key_recorder) key_recorder->push_back(path_of(key));
  auto it = obj_.FindMember(key);
  return it == obj_.MemberEnd() ? nullptr : &it->value;
}

void ObjectReader::problem(const std::string& key, std::string message) {
  problems_.push_back({path_of(key), std::move(message)});
}

bool ObjectReader::string(const char* key, std::string& out, bool allow_empty) {
  const Value* v = get(key);
  if (!v) return false;
  if (!v->IsString()) {
    problem(key, std::string("expected a string, found ") + type_name(*v));
    return false;
  }
  if (!allow_empty && v->GetStringLength() == 0) {
    problem(key, "must not be empty");
    return false;
  }
  out.assign(v->GetString(), v->GetStringLength());
  return true;
}

bool ObjectReader::boolean(const char* key, bool& out) {
  const Value* v = get(key);
  if (!v) return false;
  if (!v->IsBool()) {
    problem(key, std::string("expected true or false, found ") + show(*v));
    return false;
  }
  out = v->GetBool();
  return true;
}

bool ObjectReader::millis(const std::string& base, int& out_ms, long long min_ms,
                          long long max_ms) {
  const std::string ms_key = base + "_ms", s_key = base + "_s";
  const bool has_ms = obj_.HasMember(ms_key.c_str()), has_s = obj_.HasMember(s_key.c_str());
  if (has_ms && has_s) {
    get(ms_key.c_str());
    get(s_key.c_str());
    problem(ms_key, "is also given as " + s_key + "; keep one (" + ms_key + " takes milliseconds)");
    return false;
  }
  if (has_s) {
    long long s = 0;
    if (!integer(s_key.c_str(), s, (min_ms + 999) / 1000, max_ms / 1000)) return false;
    out_ms = static_cast<int>(s * 1000);
    return true;
  }
  return integer(ms_key.c_str(), out_ms, min_ms, max_ms);
}

bool ObjectReader::seconds_as_ms(const Value& v, const std::string& key, int& out_ms,
                                 double max_s) {
  if (!v.IsNumber()) {
    problem(key, std::string("expected a number of seconds, found ") + show(v));
    return false;
  }
  const double s = v.GetDouble();
  if (!(s > 0) || s > max_s) {
    problem(key, "expected a number of seconds greater than 0 and at most " +
                     std::to_string(static_cast<long long>(max_s)));
    return false;
  }
  out_ms = static_cast<int>(s * 1000.0 + 0.5);
  if (out_ms == 0) out_ms = 1;
  return true;
}

bool ObjectReader::string_list(const char* key, std::vector<std::string>& out) {
  const Value* v = get(key);
  if (!v) return false;
  if (!v->IsArray()) {
    problem(key, std::string("expected an array of strings, found ") + type_name(*v));
    return false;
  }
  std::vector<std::string> items;
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    const Value& e = (*v)[i];
    if (!e.IsString()) {
      problems_.push_back({path_of(key) + "[" + std::to_string(i) + "]",
                           std::string("expected a string, found ") + type_name(e)});
      return false;
    }
    items.emplace_back(e.GetString(), e.GetStringLength());
  }
  out = std::move(items);
  return true;
}

bool ObjectReader::string_map(const char* key, std::map<std::string, std::string>& out) {
  const Value* v = get(key);
  if (!v) return false;
  if (!v->IsObject()) {
    problem(key, std::string("expected an object of strings, found ") + type_name(*v));
    return false;
  }
  std::map<std::string, std::string> items;
  for (auto it = v->MemberBegin(); it != v->MemberEnd(); ++it) {
    const std::string name(it->name.GetString(), it->name.GetStringLength());
    if (!it->value.IsString()) {
      problems_.push_back({child_path(path_of(key), name),
                           std::string("expected a string, found ") + type_name(it->value)});
      return false;
    }
    items[name] = std::string(it->value.GetString(), it->value.GetStringLength());
  }
  out = std::move(items);
  return true;
}

const Value* ObjectReader::object(const char* key) {
  const Value* v = get(key);
  if (!v) return nullptr;
  if (!v->IsObject()) {
    problem(key, std::string("expected an object, found ") + type_name(*v));
    return nullptr;
  }
  return v;
}

void ObjectReader::finish() {
  std::set<std::string> seen;
  for (auto it = obj_.MemberBegin(); it != obj_.MemberEnd(); ++it) {
    const std::string key(it->name.GetString(), it->name.GetStringLength());
    if (!seen.insert(key).second) {
      problems_.push_back({path_of(key), "appears more than once; only one would be used"});
      continue;
    }
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    std::string msg = "unknown key";
    const std::string suggestion = nearest(key, known_);
    if (!suggestion.empty()) {
      msg += "; did you mean \"" + suggestion + "\"?";
    } else {
      std::string list;
      for (const auto& k : known_)
        list += (list.empty() ? "" : ", ") + k;
      msg += " (known keys here: " + list + ")";
    }
    problems_.push_back({path_of(key), msg});
  }
}

}  // namespace mcpmqtt::config::detail

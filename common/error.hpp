// Failures as values that callers can branch on: a kind (an error code of the bridge's own
// category) and a sentence for people. Expected<T, Error> where a caller acts differently by
// kind; Expected<T, std::string> where every failure is only reported.
#pragma once

#include <string>
#include <system_error>
#include <type_traits>

namespace mcpmqtt {

// The kinds of failure callers branch on. The first three are permanent (the same request
// fails the same way until someone changes the configuration or the machine); the next two
// are transient (the same request may succeed later).
enum class Errc {
  invalid_argument = 1,  // the request itself is wrong: an empty command, a malformed address
  not_found,             // what it names does not exist: no such command, file or directory
  permission_denied,     // it exists but may not be used: not executable, a privileged port
  in_use,                // someone else holds it now: an address already bound
  resources_exhausted,   // no process, descriptor or memory to spare now
  failed,                // anything else (the message says what)
};

const std::error_category& bridge_category();
std::error_code make_error_code(Errc e);

// An errno value as a kind: ENOENT is not_found, EACCES permission_denied, EAGAIN and EMFILE
// resources_exhausted, and so on.
Errc errc_from_errno(int err);

// Whether trying the same thing again later may succeed (in_use, resources_exhausted).
bool transient(std::error_code code);
// Whether it fails the same way until someone changes the configuration or the machine
// (invalid_argument, not_found, permission_denied). A failure of kind `failed` is neither.
bool permanent(std::error_code code);

struct Error {
  std::error_code code;
  std::string message;  // one sentence naming what failed and why

  Error(Errc kind, std::string text) : code(make_error_code(kind)), message(std::move(text)) {}
  bool transient() const { return mcpmqtt::transient(code); }
  bool permanent() const { return mcpmqtt::permanent(code); }
};

}  // namespace mcpmqtt

template <>
struct std::is_error_code_enum<mcpmqtt::Errc> : std::true_type {};

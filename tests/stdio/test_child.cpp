// A small stdio MCP-like server for the stdio transport's integration tests. Started directly
// (no shell) by the ChildChannel under test. Writes with write(2) only, so nothing is buffered
// when it exits.
//
// Options (in order of effect):
//   --ignore-term      ignore SIGTERM
//   --stderr LINE      write LINE to stderr at start (repeatable)
//   --banner LINE      write LINE to stdout at start (repeatable)
//   --grandchild       start a grandchild (same process group) that sleeps forever, and
//                      announce it: {"jsonrpc":"2.0","method":"test/grandchild","params":{"pid":N}}
//   --exit N           exit with status N after the above, without reading stdin
//   --no-read          never read stdin; sleep forever
//   --close-stdin      close stdin, then sleep forever
//   --close-stdout     close stdout, then go on reading stdin
//   --ignore-eof       on EOF on stdin, sleep forever instead of exiting
//   --flood            write 'f' to stdout forever, never a newline
// Then it answers requests, one per line:
//   echo  → {"echo": params}           env   → {"env": {NAME: value, …}}
//   cwd   → {"cwd": "…"}               fds   → {"fds": [0, 1, 2, …]}
//   pid   → {"pid": N, "pgid": N}      batch → one line: [notification test/one, the result]
//   raw {"line": L}    → writes L to stdout, then answers {}
//   stderr {"line": L} → writes L to stderr, then answers {}
//   exit {"code": N}   → answers {}, then exits with N
//   other methods      → error -32601
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dirent.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include "bridge/jsonrpc/jsonrpc.hpp"

extern char** environ;

namespace {

using mcpmqtt::jsonrpc::Message;

void write_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const auto n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::_Exit(99);
    off += static_cast<std::size_t>(n);
  }
}

void line(int fd, const std::string& s) {
  write_all(fd, s + "\n");
}

[[noreturn]] void sleep_forever() {
  for (;;)
    ::pause();
}

std::string param_string(const Message& m, const char* name) {
  const auto* p = m.params();
  if (!p || !p->IsObject() || !p->HasMember(name) || !(*p)[name].IsString()) return {};
  return (*p)[name].GetString();
}

int param_int(const Message& m, const char* name) {
  const auto* p = m.params();
  if (!p || !p->IsObject() || !p->HasMember(name) || !(*p)[name].IsInt()) return 0;
  return (*p)[name].GetInt();
}

std::string env_json() {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("env");
  w.StartObject();
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    w.Key(kv.substr(0, eq).c_str());
    w.String(kv.substr(eq + 1).c_str());
  }
  w.EndObject();
  w.EndObject();
  return sb.GetString();
}

std::string fds_json() {
  std::string out = "{\"fds\":[";
  DIR* d = ::opendir("/proc/self/fd");
  bool first = true;
  if (d) {
    const int own = ::dirfd(d);
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const int fd = std::atoi(e->d_name);
      if (fd == own) continue;
      if (!first) out += ",";
      first = false;
      out += std::to_string(fd);
    }
    ::closedir(d);
  }
  return out + "]}";
}

void answer(const Message& req) {
  const std::string& m = req.method();
  std::string result;
  if (m == "echo") {
    const auto* p = req.params();
    result = std::string("{\"echo\":") + (p ? mcpmqtt::jsonrpc::to_json(*p) : "null") + "}";
  } else if (m == "env") {
    result = env_json();
  } else if (m == "cwd") {
    char buf[4096];
    result = std::string("{\"cwd\":") +
             mcpmqtt::jsonrpc::quote(::getcwd(buf, sizeof buf) ? buf : "?") + "}";
  } else if (m == "fds") {
    result = fds_json();
  } else if (m == "pid") {
    result =
        "{\"pid\":" + std::to_string(::getpid()) + ",\"pgid\":" + std::to_string(::getpgrp()) + "}";
  } else if (m == "batch") {
    line(1, "[{\"jsonrpc\":\"2.0\",\"method\":\"test/one\"}," +
                std::string(Message::result(req.id(), "{\"batched\":true}").text()) + "]");
    return;
  } else if (m == "raw") {
    line(1, param_string(req, "line"));
    result = "{}";
  } else if (m == "stderr") {
    line(2, param_string(req, "line"));
    result = "{}";
  } else if (m == "exit") {
    line(1, std::string(Message::result(req.id(), "{}").text()));
    std::_Exit(param_int(req, "code"));
  } else {
    line(1, std::string(
                Message::error(req.id(), mcpmqtt::jsonrpc::code::method_not_found, "no method " + m)
                    .text()));
    return;
  }
  line(1, std::string(Message::result(req.id(), result).text()));
}

}  // namespace

int main(int argc, char** argv) {
  bool ignore_eof = false, no_read = false, ignore_term = false;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--ignore-term") {
      ignore_term = true;
      std::signal(SIGTERM, SIG_IGN);
    } else if (a == "--stderr" && has_value) {
      line(2, args[++i]);
    } else if (a == "--banner" && has_value) {
      line(1, args[++i]);
    } else if (a == "--grandchild") {
      const pid_t g = ::fork();
      if (g == 0) {
        if (ignore_term) std::signal(SIGTERM, SIG_IGN);
        sleep_forever();
      }
      line(1, "{\"jsonrpc\":\"2.0\",\"method\":\"test/grandchild\",\"params\":{\"pid\":" +
                  std::to_string(g) + "}}");
    } else if (a == "--exit" && has_value) {
      std::_Exit(std::atoi(args[++i].c_str()));
    } else if (a == "--no-read") {
      no_read = true;
    } else if (a == "--close-stdin") {
      ::close(0);
      no_read = true;
    } else if (a == "--close-stdout") {
      ::close(1);
    } else if (a == "--ignore-eof") {
      ignore_eof = true;
    } else if (a == "--flood") {
      const std::string chunk(65536, 'f');
      while (::write(1, chunk.data(), chunk.size()) > 0) {
      }
      std::_Exit(4);
    } else {
      line(2, "test_child: unknown option " + a);
      std::_Exit(64);
    }
  }
  if (no_read) sleep_forever();

  std::string buf;
  char chunk[65536];
  for (;;) {
    const auto n = ::read(0, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string text = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      auto m = Message::parse(std::move(text));
      if (m && m->is_request()) answer(*m);
    }
  }
  if (ignore_eof) sleep_forever();
  std::_Exit(0);
}

#include "tests/support/oauth_server.hpp"

#include <chrono>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <catch2/catch.hpp>

#include "http/oauth_documents.hpp"
#include "tests/support/bridge_process.hpp"
#include "tests/support/mqtt_mcp_client.hpp"

namespace mcpmqtt::test {
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;

AuthServer::AuthServer(std::vector<std::string> extra) {
  std::vector<std::string> argv{
      node_binary(),   std::string(MCPMQTT_SOURCE_DIR) + "/tests/node/oauth-server.mjs",
      "--scopes",      "mcp:all mcp:demo",
      "--account",     "alice",
      "--client",      "svc:secret",
      "--client",      "svc2:secret2",
      "--ignore-stdin"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  proc = Process::start(Process::piped(argv));
  auto line = proc->read_line(60s);
  REQUIRE(line);
  issuer = json_at(*line, "issuer").value_or("");
  REQUIRE(!issuer.empty());
  port = static_cast<std::uint16_t>(std::stoi(json_at(*line, "port").value_or("0")));
  REQUIRE(port != 0);
}

AuthServer::Reply AuthServer::request_token(const std::string& resource, const std::string& scope,
                                            const std::string& client) const {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  bhttp::request<bhttp::string_body> req(bhttp::verb::post, "/token", 11);
  req.set(bhttp::field::host, "127.0.0.1:" + std::to_string(port));
  req.set(bhttp::field::content_type, "application/x-www-form-urlencoded");
  const auto colon = client.find(':');
  req.set(bhttp::field::authorization,
          http::oauth::basic_authorization(client.substr(0, colon), client.substr(colon + 1)));
  req.body() = "grant_type=client_credentials&scope=" + http::oauth::form_urlencode(scope) +
               "&resource=" + http::oauth::form_urlencode(resource);
  req.prepare_payload();
  bhttp::write(socket, req);
  boost::beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;
  bhttp::read(socket, buffer, res);
  return {res.result_int(), res.body()};
}

std::string AuthServer::token(const std::string& resource, const std::string& scope,
                              const std::string& client) const {
  const auto r = request_token(resource, scope, client);
  INFO(r.body);
  REQUIRE(r.status == 200);
  auto t = json_at(r.body, "access_token");
  REQUIRE(t);
  return *t;
}

}  // namespace mcpmqtt::test

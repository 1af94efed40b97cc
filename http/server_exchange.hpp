// One HTTP request that an MCP session answers: the session's handle on the connection that
// carries it.
//
// Thread-safe: every method may be called from any strand; the work is posted to the
// connection's strand and done in call order. After the exchange is complete (reply, or end of
// its stream) or the connection is gone, further calls do nothing.
#pragma once

#include <functional>
#include <string>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace mcpmqtt::http {

using Response = boost::beast::http::response<boost::beast::http::string_body>;

class Exchange {
 public:
  virtual ~Exchange() = default;
  // `on_gone` runs once, on the connection's strand, if the connection goes away (client
  // disconnect, a reader too far behind, a failed or stalled write, shutdown) before the
  // exchange completes; at once if it has already gone. Post from it; do not do work in it.
  virtual void watch(std::function<void()> on_gone) = 0;
  // A complete response; the connection then reads its next request.
  virtual void reply(Response response) = 0;
  // Starts a streamed response with this head (its body is ignored).
  virtual void open_stream(Response head) = 0;
  // Bytes of one or more SSE events. A stream whose queue already holds its bound of
  // unwritten pushes is closed (the connection with it).
  virtual void push(std::string bytes) = 0;
  // One SSE message event (see sse_event), framed straight into the stream's queue. `last`: the
  // stream ends with it (end() still follows): the event and the end of the chunked body go out
  // in one write.
  virtual void push_event(std::string_view id, std::string_view data, bool last = false) = 0;
  // Ends the stream after everything pushed; the connection then reads its next request.
  virtual void end() = 0;
  // Closes the connection at once.
  virtual void abort() = 0;
};

}  // namespace mcpmqtt::http

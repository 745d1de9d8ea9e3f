#pragma once
// cpp-httplib's Server with one addition: a handler can ask whether its client has gone away.
//
// httplib 0.11.4 (Debian's libcpp-httplib-dev) has no Request::is_connection_closed, and a
// streaming write only fails after the peer is gone *and* a write was attempted. So this class
// serves each connection itself (the same keep-alive loop as httplib's, over our own socket
// stream) and remembers the connection's socket in a thread-local while its requests are
// handled; client_disconnected() polls that socket without blocking (POLLRDHUP / EOF on peek).
#include <httplib.h>

namespace pypto {

class HttpServer : public httplib::Server {
 public:
  // On the thread of a handler or content provider: true when the peer has closed (or half
  // closed) its side of the connection. False outside a handler.
  static bool client_disconnected();

 private:
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace pypto

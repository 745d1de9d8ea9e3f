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

  // After bind_to_port / bind_to_any_port: lets `backlog` connections wait to be accepted.
  // httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed in the Debian library),
  // so a burst of new connections (a benchmark opening 64 at once) overflows the accept queue;
  // the kernel then drops the handshake's last ACK and the client, which believes it is
  // connected, sees its request go unanswered (httplib's "Read" error). Linux applies a second
  // listen() to the listening socket as the new limit (capped by net.core.somaxconn).
  void set_listen_backlog(int backlog);

 private:
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace pypto

#include "serve/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace pypto {

namespace {

thread_local int tls_socket = -1;

int poll_one(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r <= 0 ? r : (p.revents ? 1 : 0);
  }
}

int to_ms(time_t sec, time_t usec) { return int(sec * 1000 + usec / 1000); }

void endpoint(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                     : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

// A buffered socket stream with poll() timeouts (httplib reads request lines byte by byte).
class ConnStream : public httplib::Stream {
 public:
  ConnStream(int fd, int read_timeout_ms, int write_timeout_ms)
      : fd_(fd), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

  bool is_readable() const override { return pos_ < len_ || poll_one(fd_, POLLIN, read_timeout_ms_) > 0; }
  bool is_writable() const override { return poll_one(fd_, POLLOUT, write_timeout_ms_) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == len_) {
      if (poll_one(fd_, POLLIN, read_timeout_ms_) <= 0) return -1;
      ssize_t n;
      do n = ::recv(fd_, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      pos_ = 0;
      len_ = size_t(n);
    }
    const size_t n = std::min(size, len_ - pos_);
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (poll_one(fd_, POLLOUT, write_timeout_ms_) <= 0) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { endpoint(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { endpoint(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }
  bool buffered() const { return pos_ < len_; }

 private:
  int fd_;
  int read_timeout_ms_;
  int write_timeout_ms_;
  char buf_[4096];
  size_t pos_ = 0;
  size_t len_ = 0;
};

// Waits until the connection has a new request (true) or the keep-alive time ran out (false).
bool wait_for_request(int fd, time_t keep_alive_sec, const std::atomic<socket_t>& svr_sock) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(keep_alive_sec);
  while (svr_sock != INVALID_SOCKET) {
    const int r = poll_one(fd, POLLIN, 50);
    if (r < 0) return false;
    if (r > 0) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
  return false;
}

}  // namespace

bool HttpServer::client_disconnected() {
  if (tls_socket < 0) return false;
  pollfd p{tls_socket, short(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = ::recv(tls_socket, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return false;
}

void HttpServer::set_listen_backlog(int backlog) {
  PYPTO_ASSERT(svr_sock_ != INVALID_SOCKET, "set_listen_backlog before bind");
  if (::listen(svr_sock_, backlog) != 0) fail("listen(backlog ", backlog, "): ", std::strerror(errno));
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  tls_socket = sock;
  // httplib writes a response's headers and body in separate sends; with Nagle's algorithm the
  // body then waits for the ACK of the headers, which a kept-alive client delays by up to 40 ms
  // (delayed ACK): every response after the first on a connection took ~45 ms.
  const int one = 1;
  ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  bool ret = false;
  size_t count = keep_alive_max_count_;
  // One stream for the whole connection: its read buffer may hold the next pipelined request.
  ConnStream strm(sock, to_ms(read_timeout_sec_, read_timeout_usec_), to_ms(write_timeout_sec_, write_timeout_usec_));
  while (count > 0 && (strm.buffered() || wait_for_request(sock, keep_alive_timeout_sec_, svr_sock_))) {
    const bool close_connection = count == 1;
    bool connection_closed = false;
    ret = process_request(strm, close_connection, connection_closed, nullptr);
    if (!ret || connection_closed) break;
    --count;
  }
  tls_socket = -1;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace pypto

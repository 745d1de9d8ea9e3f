#include "serve/server.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "core/error.h"
#include "core/log.h"
#include "serve/growing_thread_pool.h"
#include "serve/heap_return.h"
#include "serve/routes.h"
#include "serve/server_state.h"

namespace pypto {

std::shared_ptr<const ChatTemplate> load_chat_template(const Tokenizer& tokenizer) {
  if (!tokenizer.chat_template()) return nullptr;
  try {
    return ChatTemplate::parse(*tokenizer.chat_template());
  } catch (const Error& e) {
    fail("the model's chat template (tokenizer_config.json chat_template) cannot be used: ", e.what());
  }
}

ServeContext make_serve_context(const std::string& model_dir, std::shared_ptr<EngineClient> engines,
                                const ModelConfig& config, int64_t max_model_len, int32_t max_num_seqs) {
  ServeContext c;
  c.engines = std::move(engines);
  c.tokenizer = Tokenizer::load(model_dir);
  c.chat_template = load_chat_template(*c.tokenizer);
  c.model_config = config;
  c.max_model_len = max_model_len;
  c.max_num_seqs = max_num_seqs;
  return c;
}

Server::Server(ServerOptions options) : state_(std::make_shared<ServerState>(std::move(options))) {}

Server::~Server() { stop(0); }

void Server::start() {
  ServerState& s = *state_;
  const ServerOptions& o = s.options;
  // Every waiting or running generation request holds a worker thread while it streams, so the
  // pool covers the queue bound plus room for running requests and the small endpoints.
  const int threads =
      o.http_threads > 0 ? o.http_threads : int(std::clamp<int64_t>(o.max_queued_requests + 512, 64, 4096));
  // Threads are made as connections need them (growing_thread_pool.h), not all at start-up.
  s.http.new_task_queue = [threads] { return new GrowingThreadPool(size_t(threads)); };
  s.http.set_payload_max_length(o.max_body_bytes);
  s.http.set_read_timeout(30, 0);
  s.http.set_write_timeout(30, 0);
  s.http.set_keep_alive_timeout(5);
  // A client keeps one connection for this many requests (nginx's keepalive_requests default);
  // httplib's default of 5 made clients reconnect every few requests.
  s.http.set_keep_alive_max_count(1000);
  register_routes(*state_);
  if (o.port == 0) {
    port_ = s.http.bind_to_any_port(o.host);
    if (port_ < 0) fail("cannot bind an HTTP port on ", o.host);
  } else {
    if (!s.http.bind_to_port(o.host, o.port))
      fail("cannot listen on ", o.host, ":", o.port, " (address in use, or not an address of this machine)");
    port_ = o.port;
  }
  s.http.set_listen_backlog(SOMAXCONN);  // bursts of new connections wait instead of being dropped
  thread_ = std::thread([this] { state_->http.listen_after_bind(); });
  // Every 2 s; a trim once 32 MiB lie free in the arenas and RSS grew that much since the last.
  heap_ = std::make_unique<HeapReturner>(2.0, size_t(32) << 20);
  log_info("serving model '", s.model_name, "' on http://", o.host, ":", port_,
           s.api_key.empty() ? "" : " (API key required)");
}

int Server::port() const { return port_; }

void Server::set_context(ServeContext context) {
  ServerState& s = *state_;
  PYPTO_ASSERT(!s.ready, "set_context called twice");
  PYPTO_ASSERT(context.engines && context.tokenizer, "ServeContext needs engines and a tokenizer");
  s.ctx = std::move(context);
  if (s.ctx.max_num_seqs < 1) s.ctx.max_num_seqs = 1;
  s.metrics = std::make_unique<ServerMetrics>(s.ctx.engines->num_engines(), s.ctx.max_model_len);
  for (size_t i = 0; i < s.ctx.engines->num_engines(); ++i)
    s.in_flight.push_back(std::make_unique<std::atomic<int64_t>>(0));
  s.reasoning_tokens = s.ctx.tokenizer->token_to_id("<think>") && s.ctx.tokenizer->token_to_id("</think>");
  s.tool_format = resolve_tool_format(s.options.tool_call_parser, s.ctx.chat_template.get());
  log_info("tool calls: ", tool_format_name(s.tool_format), " (--tool-call-parser ", s.options.tool_call_parser, ")");
  // Masks are as wide as the model's logits (151,936 for Qwen3, more than the tokenizer's ids).
  s.grammars = std::make_unique<structured::GrammarCache>(structured::TokenVocab::build(
      *s.ctx.tokenizer, s.ctx.model_config.vocab_size, s.ctx.model_config.eos_token_ids));
  s.ready = true;
}

void Server::stop(double grace_s) {
  ServerState& s = *state_;
  if (!thread_.joinable()) return;
  s.draining = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(int64_t(grace_s * 1e6));
  while (s.total_in_flight > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s.stopping = true;  // handlers still waiting abort their requests and return
  s.http.stop();
  thread_.join();
  heap_.reset();
}

namespace {
struct SignalWait {
  std::mutex mu;
  std::condition_variable cv;
  int signal = 0;
};
}  // namespace

int run_server(const ServerOptions& options, const std::function<ServeContext()>& load) {
  // Signals go to one waiting thread, never interrupt the workers.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto wait = std::make_shared<SignalWait>();
  auto ready = std::make_shared<std::atomic<bool>>(false);
  std::thread([set, wait, ready] {
    int sig = 0;
    sigwait(&set, &sig);
    if (!*ready) {
      std::fprintf(stderr, "pypto-serving: signal %d while loading the model; exiting\n", sig);
      std::_Exit(1);
    }
    std::lock_guard lock(wait->mu);
    wait->signal = sig;
    wait->cv.notify_all();
  }).detach();

  Server server(options);
  try {
    server.start();
    server.set_context(load());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pypto-serving: %s\n", e.what());
    return 1;
  }
  *ready = true;
  log_info("ready: /health answers 200");
  {
    std::unique_lock lock(wait->mu);
    wait->cv.wait(lock, [&] { return wait->signal != 0; });
  }
  log_info("signal ", wait->signal, ": stopping (in-flight requests get ", options.shutdown_grace_s, " s)");
  server.stop(options.shutdown_grace_s);
  return 0;
}

}  // namespace pypto

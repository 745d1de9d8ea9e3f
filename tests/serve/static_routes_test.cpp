// The chat page's routes (serve/static_routes.cpp) over real HTTP: GET / and /webui/<file> answer
// the files of src/serve/webui byte for byte (read from the source tree here: the reference for
// cmake/embed.cmake), with their content types and the CSP; --no-ui turns them off; with an API
// key the page's GET routes are open and everything else still needs the key. The page itself runs
// in a browser in webui_page.test.mjs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <httplib.h>

#include "serve/server.h"
#include "support/script_engine.h"

namespace pypto {
namespace {

std::string source_file(const std::string& name) {
  std::ifstream f(std::filesystem::path(PYPTO_SOURCE_DIR) / "src/serve/webui" / name, std::ios::binary);
  EXPECT_TRUE(f) << name;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

class StaticRoutes : public ::testing::Test {
 protected:
  void start(ServerOptions o = {}) {
    engine_ = testing::make_script_engine(256, 2);
    o.host = "127.0.0.1";
    o.port = 0;
    o.served_model_name = "qwen3-script";
    server_ = std::make_unique<Server>(o);
    server_->start();
    server_->set_context(engine_->context);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(30, 0);  // httplib's 5 s default runs out on a loaded CI machine
  }
  void TearDown() override {
    if (server_) server_->stop(0);
    if (engine_) engine_->loop->shutdown();
  }
  int status(const char* path, const httplib::Headers& h = {}) {
    auto r = client_->Get(path, h);
    EXPECT_TRUE(r) << path;
    return r ? r->status : -1;
  }

  std::unique_ptr<testing::ScriptEngine> engine_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(StaticRoutes, ServesEveryPageFileAsItIsInTheSourceTree) {
  start();
  // Every file of the folder, so one left out of src/serve/CMakeLists.txt's list fails here.
  const std::map<std::string, std::string> types = {{".html", "text/html; charset=utf-8"},
                                                    {".js", "text/javascript; charset=utf-8"},
                                                    {".css", "text/css; charset=utf-8"}};
  int served = 0;
  const std::filesystem::path dir = std::filesystem::path(PYPTO_SOURCE_DIR) / "src/serve/webui";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    auto r = client_->Get(("/webui/" + name).c_str());
    ASSERT_TRUE(r) << name;
    EXPECT_EQ(r->status, 200) << name;
    EXPECT_EQ(r->get_header_value("Content-Type"), types.at(entry.path().extension().string())) << name;
    EXPECT_EQ(r->body, source_file(name)) << name;
    EXPECT_NE(r->get_header_value("Content-Security-Policy").find("script-src 'self'"), std::string::npos);
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff");
    ++served;
  }
  EXPECT_GE(served, 5);
  auto root = client_->Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  EXPECT_EQ(root->body, source_file("index.html"));
  // Every script and stylesheet index.html names is served.
  for (const char* ref : {"/webui/chat.js", "/webui/chat.css"})
    EXPECT_NE(root->body.find(ref), std::string::npos) << ref;
}

TEST_F(StaticRoutes, UnknownFilesAre404WithAnOpenAIError) {
  start();
  for (const char* path : {"/webui/nope.js", "/webui/", "/webui/../CMakeLists.txt", "/index.html"}) {
    auto r = client_->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["type"], "not_found_error") << path << ": " << r->body;
  }
}

TEST_F(StaticRoutes, NoUiTurnsThePageOff) {
  ServerOptions o;
  o.webui = false;
  start(o);
  EXPECT_EQ(status("/"), 404);
  EXPECT_EQ(status("/webui/chat.js"), 404);
  EXPECT_EQ(status("/v1/models"), 200);
}

TEST_F(StaticRoutes, WithAnApiKeyOnlyThePageIsOpen) {
  ServerOptions o;
  o.api_key = "sekrit";
  start(o);
  EXPECT_EQ(status("/"), 200);
  EXPECT_EQ(status("/webui/chat.js"), 200);
  EXPECT_EQ(status("/webui/nope.js"), 404);
  for (const char* path : {"/v1/models", "/metrics", "/version"}) EXPECT_EQ(status(path), 401) << path;
  // POST / is not the page: it needs the key like any other request.
  auto p = client_->Post("/", "{}", "application/json");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 401);
  EXPECT_EQ(status("/v1/models", {{"Authorization", "Bearer sekrit"}}), 200);
}

TEST_F(StaticRoutes, WithAnApiKeyAndNoUiTheRootNeedsTheKey) {
  ServerOptions o;
  o.api_key = "sekrit";
  o.webui = false;
  start(o);
  EXPECT_EQ(status("/"), 401);
  EXPECT_EQ(status("/", {{"Authorization", "Bearer sekrit"}}), 404);
}

}  // namespace
}  // namespace pypto

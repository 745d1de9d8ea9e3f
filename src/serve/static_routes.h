#pragma once
// The chat page (src/serve/webui, embedded in the binary by cmake/embed.cmake): GET / and
// GET /webui/<file>. The page talks to the server only through the OpenAI API, with the API key
// the user types in, so serving the page itself needs no key. --no-ui turns it off (404).
#include <httplib.h>

#include "serve/server_state.h"

namespace pypto {

// True for the page's own GET requests when the page is on; the API-key check lets these pass.
bool is_page_request(const ServerState& s, const httplib::Request& req);

// Registers GET / and GET /webui/<file> when s.options.webui is on.
void register_static_routes(ServerState& s);

}  // namespace pypto

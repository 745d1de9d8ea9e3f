#include "engine/draft_proposer.h"

#include "engine/request.h"

namespace pypto {

void DraftProposer::propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) {
  propose(req.all_token_ids, k, out);
}

void DraftProposer::finish(const Request& req) { forget(req.request_id); }

}  // namespace pypto

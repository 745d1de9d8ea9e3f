// Serve mode (default) and offline mode (--prompt): the seed's command line.
#include <CLI/CLI.hpp>
#include <pthread.h>

#include <csignal>

#include "cli/commands.h"
#include "cli/offline.h"
#include "cli/run_options.h"
#include "cli/serve_mode.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "model/test_model.h"
#include "parallel/mp_rank_group.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_heartbeat.h"
#include "parallel/replicas/rank_worker.h"

namespace pypto::cli {

int cmd_run(int argc, char** argv) {
  CLI::App app{"pypto-serving: serve Qwen3 models over an OpenAI-compatible HTTP API (default), or generate offline "
               "with --prompt.\nSubcommands: make-test-model, inspect, tokenize, logits (pypto-serving <subcommand> "
               "--help)."};
  RunOptions o;
  add_run_options(app, o);
  ServerOptions so;
  add_serve_options(app, so);
  CLI11_PARSE(app, argc, argv);
  validate_run_options(o);

  // Ranks as processes: a child started by rank 0 (mp) or any rank but 0 of an mpirun job runs
  // the rank worker and never the engine.
  std::unique_ptr<MpRankGroup> mp = MpRankGroup::join_from_env();
  if (mp) o.distributed_executor_backend = "mp";
  const bool use_mpi = o.distributed_executor_backend == "mpi";
  const int per_replica = o.tp * o.pp;  // one replica's ranks: pp stages of tp
  const int ranks = o.dp * per_replica;   // replica i: ranks [i·per_replica, (i+1)·per_replica)
  std::unique_ptr<MpiHeartbeat> heartbeat;
  if (use_mpi) {
    const MpiLaunch launch = mpi_launch_from_env();
    const std::string sizes = str_cat(o.dp > 1 ? str_cat("--dp ", o.dp, " x ") : std::string(),
                                      o.pp > 1 ? str_cat("--pp ", o.pp, " x --tp ", o.tp) : str_cat("--tp ", o.tp));
    if (launch.rank < 0)
      fail("--distributed-executor-backend mpi: start pypto-serving with mpirun, one process per rank "
           "(mpirun -np ", ranks, " pypto-serving ... ", sizes, " --distributed-executor-backend mpi)");
    if (launch.size != ranks)
      fail("--distributed-executor-backend mpi: mpirun started ", launch.size, " processes but ",
           o.pp > 1 || o.dp > 1 ? str_cat(sizes, " is ", ranks, " ranks") : str_cat("--tp is ", o.tp),
           ": start exactly one process per rank (mpirun -np ", ranks, ")");
    // MPI_Init starts OpenMPI's own threads, which inherit this thread's signal mask. On rank 0 of
    // a server SIGINT/SIGTERM must reach the server's signal thread (run_server blocks them in
    // the threads it starts), not end the process from an MPI thread: mpirun sends SIGTERM when
    // another rank fails, and the server then drains (/health 503) until mpirun's SIGKILL.
    if (launch.rank == 0 && o.prompts.empty() && o.prompt_token_ids.empty()) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGINT);
      sigaddset(&set, SIGTERM);
      pthread_sigmask(SIG_BLOCK, &set, nullptr);
    }
    o.process_comm = make_mpi_world_communicator();
    // Every process makes the groups together, in this order (MPI_Comm_split is collective): its
    // replica's ranks, its stage's TP group, then one link per replica i > 0 between rank 0 and
    // the replica's first rank (the others pass no color and get none).
    o.replica_comm = o.process_comm;
    if (o.dp > 1) o.replica_comm = make_mpi_split_communicator(launch.rank / per_replica, launch.rank % per_replica);
    if (o.pp > 1 && o.tp > 1) o.stage_comm = make_mpi_split_communicator(launch.rank / o.tp, launch.rank % o.tp);
    for (int i = 1; i < o.dp; ++i) {
      const bool member = launch.rank == 0 || launch.rank == i * per_replica;
      std::shared_ptr<Communicator> link = make_mpi_split_communicator(member ? 0 : -1, launch.rank == 0 ? 0 : 1);
      if (link) o.link_comms.push_back(std::move(link));
    }
    if (o.pp_virtual_engines) {  // rank 0 and the last stage's TP rank 0
      const int last0 = per_replica - o.tp;
      const bool member = launch.rank == 0 || launch.rank == last0;
      o.return_comm = make_mpi_split_communicator(member ? 0 : -1, launch.rank == 0 ? 0 : 1);
    }
    heartbeat = MpiHeartbeat::start();  // a rank that stops without dying is a fault on rank 0
  }
  if (mp) {
    o.process_comm = mp->comm();
    o.replica_comm = mp->replica_comm();
    o.stage_comm = mp->stage_comm();
    o.link_comms = mp->link_comms();
    o.return_comm = mp->return_comm();
  }

  std::string model_dir = o.model;
  if (model_dir.empty()) {
    if (mp || (use_mpi && o.process_comm->rank() != 0))
      fail("ranks as processes need --model (every rank reads its own host's copy of the checkpoint)");
    model_dir = ensure_default_model(Progress::enabled());
    log_warn("no --model given: using the built-in default model at ", model_dir,
             " (RANDOM WEIGHTS, qwen3-0.6b shapes, 4 layers: its text is meaningless)");
  }
  if (mp || (use_mpi && o.process_comm->rank() != 0)) {
    const int rc = run_rank_worker(replica_load_options(o, model_dir));
    heartbeat.reset();
    o.drop_communicators();
    mp.reset();
    mpi_finalize();
    return rc;
  }
  if (o.distributed_executor_backend == "mp" && ranks > 1) {
    mp = MpRankGroup::start(ranks, argv, o.tp, per_replica, o.pp_virtual_engines);
    o.process_comm = mp->comm();
    o.replica_comm = mp->replica_comm();
    o.stage_comm = mp->stage_comm();
    o.link_comms = mp->link_comms();
    o.return_comm = mp->return_comm();
  }
  int rc;
  if (!o.prompts.empty() || !o.prompt_token_ids.empty())
    rc = run_offline(o, model_dir);
  else
    rc = run_serve(o, so, model_dir);
  heartbeat.reset();
  o.drop_communicators();
  mp.reset();  // waits for the other ranks (they stop when the engine does)
  mpi_finalize();
  return rc;
}

}  // namespace pypto::cli

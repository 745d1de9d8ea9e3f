#pragma once
// The MPI communicator: the ranks of one TP group are processes started by `mpirun` (one host or
// several), talking through MPI (TCP, shared memory, InfiniBand: whatever OpenMPI picks). Built only
// when CMake found MPI (PYPTO_HAVE_MPI); otherwise mpi_built() is false and
// make_mpi_world_communicator() throws Error saying how to get it.
//
// The communicator.h contract holds across hosts: all_reduce_sum is not MPI_Allreduce (whose
// reduction order is the library's choice) but a reduce-scatter by MPI_Alltoall (rank r receives
// chunk r of every rank's vector and sums it in rank order) followed by MPI_Allgather of the summed
// chunks, so the result is bitwise identical on every rank and to the shared-memory communicator.
#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace pypto {

// True when this binary was built with MPI.
bool mpi_built();

// The rank and size `mpirun` gave this process (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE), read
// from the environment before MPI_Init; rank -1 when the process was not started by an MPI
// launcher.
struct MpiLaunch {
  int rank = -1, size = 0;
};
MpiLaunch mpi_launch_from_env();

// Initialises MPI (once; MPI_THREAD_MULTIPLE: the engine thread makes the step's calls while
// the heartbeat thread of parallel/mpi_heartbeat.h makes its own) and returns a communicator over every process of the job (MPI_COMM_WORLD, duplicated).
// Throws Error when MPI is not built in or the thread level is not available.
std::unique_ptr<Communicator> make_mpi_world_communicator();

// This host's name (MPI_Get_processor_name when MPI is up, else gethostname) for messages.
std::string this_host_name();

// After make_mpi_world_communicator(): a communicator over the processes that pass the same
// `color`, ranked by `key` (MPI_Comm_split; every process of the job must call it, in the same
// order as its other collectives): a pipeline stage's tensor-parallel group, a --dp replica's
// ranks, or the link between rank 0 and a replica's first rank. A process that passes a negative
// color joins no group (MPI_UNDEFINED) and gets null.
std::unique_ptr<Communicator> make_mpi_split_communicator(int color, int key);

// MPI_Finalize (once, when MPI was initialised); call after the last collective.
void mpi_finalize();

}  // namespace pypto

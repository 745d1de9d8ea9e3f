#include "parallel/mpi_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"

#if PYPTO_HAVE_MPI
// The C API only: OpenMPI's deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace pypto {

MpiLaunch mpi_launch_from_env() {
  auto read = [](const char* a, const char* b) -> int {
    const char* v = std::getenv(a);
    if (!v) v = std::getenv(b);
    return v ? std::atoi(v) : -1;
  };
  MpiLaunch l;
  l.rank = read("OMPI_COMM_WORLD_RANK", "PMI_RANK");
  l.size = l.rank < 0 ? 0 : read("OMPI_COMM_WORLD_SIZE", "PMI_SIZE");
  return l;
}

std::string this_host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

#if PYPTO_HAVE_MPI

namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail("MPI ", what, " failed: ", std::string(msg, size_t(len)));
}

int as_count(int64_t n) {
  PYPTO_ASSERT(n >= 0 && n <= INT_MAX, "MPI message of ", n, " elements");
  return static_cast<int>(n);
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  // A communicator made by MPI_Comm_split (owned: freed with this object).
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(float* x, int64_t n) override {
    if (size_ == 1 || n <= 0) return;
    // Chunk r (`chunk` floats, the tail zero-padded) is summed by rank r.
    const int64_t chunk = (n + size_ - 1) / size_;
    const size_t padded = size_t(chunk * size_);
    send_.assign(padded, 0.f);
    std::memcpy(send_.data(), x, sizeof(float) * size_t(n));
    recv_.resize(padded);
    check_mpi(MPI_Alltoall(send_.data(), as_count(chunk), MPI_FLOAT, recv_.data(), as_count(chunk), MPI_FLOAT, comm_),
              "MPI_Alltoall");
    // recv_[q * chunk + i] is element rank*chunk + i of rank q: sum over q in rank order.
    float* mine = send_.data();  // reused: send_ is free once MPI_Alltoall returned
    for (int64_t i = 0; i < chunk; ++i) {
      float s = recv_[size_t(i)];
      for (int q = 1; q < size_; ++q) s += recv_[size_t(q * chunk + i)];
      mine[i] = s;
    }
    check_mpi(MPI_Allgather(mine, as_count(chunk), MPI_FLOAT, recv_.data(), as_count(chunk), MPI_FLOAT, comm_),
              "MPI_Allgather");
    std::memcpy(x, recv_.data(), sizeof(float) * size_t(n));
  }

  void all_gather(const float* in, int64_t n, float* out) override {
    if (n <= 0) return;
    check_mpi(MPI_Allgather(in, as_count(n), MPI_FLOAT, out, as_count(n), MPI_FLOAT, comm_), "MPI_Allgather");
  }

  void gather_columns(const float* in, int64_t rows, int64_t cols, float* out, int root) override {
    PYPTO_ASSERT(root >= 0 && root < size_, "gather root ", root, " of ", size_, " ranks");
    PYPTO_ASSERT(rows >= 0 && cols >= 0, "gather of ", rows, " x ", cols);
    if (size_ == 1) {
      if (rows > 0 && cols > 0 && out != in) std::memcpy(out, in, sizeof(float) * size_t(rows * cols));
      return;
    }
    // Every rank's column count → root; then the blocks, [size][rows × cols_r], → root.
    int my_cols = as_count(cols);
    std::vector<int> all_cols(static_cast<size_t>(size_)), counts(all_cols.size()), displs(all_cols.size());
    check_mpi(MPI_Gather(&my_cols, 1, MPI_INT, all_cols.data(), 1, MPI_INT, root, comm_), "MPI_Gather");
    int64_t total = 0;
    if (rank_ == root) {
      for (int q = 0; q < size_; ++q) {
        counts[size_t(q)] = as_count(rows * all_cols[size_t(q)]);
        displs[size_t(q)] = as_count(rows * total);
        total += all_cols[size_t(q)];
      }
      recv_.resize(size_t(rows * total));
    }
    check_mpi(MPI_Gatherv(in, as_count(rows * cols), MPI_FLOAT, recv_.data(), counts.data(), displs.data(), MPI_FLOAT,
                          root, comm_),
              "MPI_Gatherv");
    if (rank_ != root || rows == 0) return;
    PYPTO_ASSERT(out != nullptr, "gather root without an output buffer");
    // Block q is [rows, cols_q] at displs[q]; row i goes to out[i, offset_q : offset_q + cols_q].
    int64_t offset = 0;
    for (int q = 0; q < size_; ++q) {
      const int64_t c = all_cols[size_t(q)];
      const float* blk = recv_.data() + displs[size_t(q)];
      for (int64_t i = 0; i < rows; ++i) std::memcpy(out + i * total + offset, blk + i * c, sizeof(float) * size_t(c));
      offset += c;
    }
  }

  void broadcast(void* data, int64_t bytes, int root) override {
    PYPTO_ASSERT(root >= 0 && root < size_, "broadcast root ", root, " of ", size_, " ranks");
    if (size_ == 1 || bytes <= 0) return;
    check_mpi(MPI_Bcast(data, as_count(bytes), MPI_BYTE, root, comm_), "MPI_Bcast");
  }

  void barrier() override { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

  // In pieces of at most 1 GiB (MPI counts are int).
  void send(const void* data, int64_t bytes, int dest) override {
    PYPTO_ASSERT(dest >= 0 && dest < size_ && dest != rank_, "send from rank ", rank_, " to ", dest);
    const char* p = static_cast<const char*>(data);
    for (int64_t b0 = 0; b0 < bytes || b0 == 0; b0 += kPiece) {
      const int64_t len = std::min(kPiece, bytes - b0);
      check_mpi(MPI_Send(p + b0, as_count(len), MPI_BYTE, dest, kP2pTag, comm_), "MPI_Send");
      if (bytes == 0) break;
    }
  }
  void recv(void* data, int64_t bytes, int src) override {
    PYPTO_ASSERT(src >= 0 && src < size_ && src != rank_, "recv on rank ", rank_, " from ", src);
    char* p = static_cast<char*>(data);
    for (int64_t b0 = 0; b0 < bytes || b0 == 0; b0 += kPiece) {
      const int64_t len = std::min(kPiece, bytes - b0);
      check_mpi(MPI_Recv(p + b0, as_count(len), MPI_BYTE, src, kP2pTag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
      if (bytes == 0) break;
    }
  }

 private:
  static constexpr int64_t kPiece = int64_t(1) << 30;
  static constexpr int kP2pTag = 7;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<float> send_, recv_;  // staging, reused between calls
};

bool g_initialised_here = false;

}  // namespace

bool mpi_built() { return true; }

std::unique_ptr<Communicator> make_mpi_world_communicator() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    g_initialised_here = true;
    if (provided < MPI_THREAD_MULTIPLE)
      fail("the MPI library gives thread level ", provided, " but the engine needs MPI_THREAD_MULTIPLE (",
           MPI_THREAD_MULTIPLE, "): the engine thread makes the step's MPI calls while the heartbeat thread "
           "(parallel/mpi_heartbeat.h) makes its own");
  }
  return std::make_unique<MpiCommunicator>();
}

std::unique_ptr<Communicator> make_mpi_split_communicator(int color, int key) {
  PYPTO_ASSERT(g_initialised_here, "MPI is not initialised: make the world communicator first");
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, key, &comm), "MPI_Comm_split");
  if (comm == MPI_COMM_NULL) return nullptr;  // not a member (color < 0)
  return std::make_unique<MpiCommunicator>(comm);
}

void mpi_finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_initialised_here && !finalized) MPI_Finalize();
}

#else  // !PYPTO_HAVE_MPI

bool mpi_built() { return false; }

std::unique_ptr<Communicator> make_mpi_world_communicator() {
  fail("--distributed-executor-backend mpi: this pypto-serving was built without MPI; install OpenMPI "
       "(apt-get install openmpi-bin libopenmpi-dev, as scripts/setup.sh does) and rebuild");
}

std::unique_ptr<Communicator> make_mpi_split_communicator(int, int) { return make_mpi_world_communicator(); }

void mpi_finalize() {}

#endif

}  // namespace pypto

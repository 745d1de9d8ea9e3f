#include "parallel/process_shm_communicator.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

#include "core/error.h"

namespace pypto {

namespace {
constexpr int kMaxRanks = 64;
constexpr uint32_t kMagic = 0x70707331;  // "pps1"
}  // namespace

// The segment's header; the slots follow at `slots_offset`. Every field one rank writes sits on its
// own cache line. std::atomic<uint32_t/uint64_t> are lock-free, so they work across processes.
struct ProcessShmSegment {
  uint32_t magic;
  int32_t size;
  int64_t slot_floats;
  int64_t slots_offset;  // bytes from the segment start
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;
  alignas(64) std::atomic<uint32_t> broken;
  struct alignas(64) RankWords {
    std::atomic<int64_t> count;       // gather_columns: this rank's column count
    std::atomic<uint64_t> heartbeat;  // bumped by the rank's heartbeat thread
    // Point-to-point: 1 while a piece of this rank's message sits in its slot for `dest`.
    std::atomic<uint32_t> p2p_full;
    std::atomic<int32_t> p2p_dest;
    std::atomic<int64_t> p2p_len;  // bytes of the piece
  };
  RankWords ranks[kMaxRanks];
};

namespace {

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word is shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, timeout, nullptr, 0);
}

void group_barrier(ProcessShmSegment& s) {
  const uint32_t gen = s.generation.load(std::memory_order_acquire);
  if (s.arrived.fetch_add(1, std::memory_order_acq_rel) == uint32_t(s.size - 1)) {
    s.arrived.store(0, std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_release);
    futex(&s.generation, FUTEX_WAKE, INT32_MAX, nullptr);
    return;
  }
  for (int i = 0; i < (1 << 14); ++i) {
    if (s.generation.load(std::memory_order_acquire) != gen) return;
    if ((i & 255) == 255) std::this_thread::yield();
  }
  const timespec tick{0, 100 * 1000 * 1000};  // wake every 100 ms to look at `broken`
  while (s.generation.load(std::memory_order_acquire) == gen) {
    if (s.broken.load(std::memory_order_acquire))
      fail("a tensor-parallel rank stopped: the shared-memory group is broken");
    futex(&s.generation, FUTEX_WAIT, gen, &tick);
  }
}

// Waits until `word` != old (spin, then a futex sleep that looks at `broken` every 100 ms).
void wait_word(ProcessShmSegment& s, std::atomic<uint32_t>& word, uint32_t old) {
  for (int i = 0; i < (1 << 14); ++i) {
    if (word.load(std::memory_order_acquire) != old) return;
    if ((i & 255) == 255) std::this_thread::yield();
  }
  const timespec tick{0, 100 * 1000 * 1000};
  while (word.load(std::memory_order_acquire) == old) {
    if (s.broken.load(std::memory_order_acquire))
      fail("a pipeline or tensor-parallel rank stopped: the shared-memory group is broken");
    futex(&word, FUTEX_WAIT, old, &tick);
  }
}

}  // namespace

std::shared_ptr<ProcessShmGroup> ProcessShmGroup::create(int size, int64_t slot_floats) {
  if (size < 1 || size > kMaxRanks) fail("tensor-parallel size ", size, " is outside [1, ", kMaxRanks, "]");
  PYPTO_ASSERT(slot_floats >= 16, "slot of ", slot_floats, " floats");
  slot_floats = (slot_floats + 15) / 16 * 16;
  const int fd = memfd_create("pypto-tp-group", 0);  // inherited across exec by the other ranks
  if (fd < 0) fail("memfd_create for the tensor-parallel group: ", std::strerror(errno));
  const int64_t header = (int64_t(sizeof(ProcessShmSegment)) + 63) / 64 * 64;
  const size_t bytes = size_t(header) + size_t(size) * size_t(slot_floats) * sizeof(float);
  if (ftruncate(fd, off_t(bytes)) != 0) fail("sizing the tensor-parallel group's shared memory: ", std::strerror(errno));
  auto g = attach(fd);
  ProcessShmSegment& s = *g->seg_;
  s.size = size;
  s.slot_floats = slot_floats;
  s.slots_offset = header;
  s.magic = kMagic;
  return g;
}

std::shared_ptr<ProcessShmGroup> ProcessShmGroup::attach(int fd) {
  struct stat_size {
    static size_t of(int fd) {
      const off_t end = lseek(fd, 0, SEEK_END);
      if (end < 0) fail("tensor-parallel group fd ", fd, ": ", std::strerror(errno));
      return size_t(end);
    }
  };
  std::shared_ptr<ProcessShmGroup> g(new ProcessShmGroup());
  g->fd_ = fd;
  g->bytes_ = stat_size::of(fd);
  PYPTO_ASSERT(g->bytes_ >= sizeof(ProcessShmSegment), "tensor-parallel group segment of ", g->bytes_, " bytes");
  void* p = mmap(nullptr, g->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail("mapping the tensor-parallel group's shared memory: ", std::strerror(errno));
  g->seg_ = static_cast<ProcessShmSegment*>(p);  // zero-filled by ftruncate: every atomic starts at 0
  return g;
}

ProcessShmGroup::~ProcessShmGroup() {
  if (seg_) munmap(seg_, bytes_);
  if (fd_ >= 0) close(fd_);
}

int ProcessShmGroup::size() const { return seg_->size; }
uint64_t ProcessShmGroup::heartbeat(int r) const { return seg_->ranks[r].heartbeat.load(std::memory_order_relaxed); }
void ProcessShmGroup::beat(int r) { seg_->ranks[r].heartbeat.fetch_add(1, std::memory_order_relaxed); }
void ProcessShmGroup::mark_broken() {
  seg_->broken.store(1, std::memory_order_release);
  futex(&seg_->generation, FUTEX_WAKE, INT32_MAX, nullptr);
  for (int r = 0; r < seg_->size; ++r) futex(&seg_->ranks[r].p2p_full, FUTEX_WAKE, INT32_MAX, nullptr);
}
bool ProcessShmGroup::broken() const { return seg_->broken.load(std::memory_order_acquire) != 0; }

ProcessShmCommunicator::ProcessShmCommunicator(std::shared_ptr<ProcessShmGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {
  PYPTO_ASSERT(group_ && group_->seg().magic == kMagic, "not a tensor-parallel group segment");
  PYPTO_ASSERT(rank >= 0 && rank < group_->size(), "rank ", rank, " of ", group_->size());
}

int ProcessShmCommunicator::size() const { return group_->size(); }

float* ProcessShmCommunicator::slot(int r) {
  ProcessShmSegment& s = group_->seg();
  return reinterpret_cast<float*>(reinterpret_cast<char*>(&s) + s.slots_offset) + r * s.slot_floats;
}

void ProcessShmCommunicator::barrier() { group_barrier(group_->seg()); }

void ProcessShmCommunicator::all_reduce_sum(float* x, int64_t n) {
  const int size = this->size();
  if (size == 1 || n <= 0) return;
  const int64_t cap = group_->seg().slot_floats;
  for (int64_t p0 = 0; p0 < n; p0 += cap) {
    const int64_t len = std::min(cap, n - p0);
    std::memcpy(slot(rank_), x + p0, sizeof(float) * size_t(len));
    barrier();
    const int64_t chunk = ((len + size - 1) / size + 15) / 16 * 16;  // cache-line multiples
    const int64_t begin = std::min(len, chunk * rank_), end = std::min(len, begin + chunk);
    float* bufs[kMaxRanks];
    for (int r = 0; r < size; ++r) bufs[r] = slot(r);
    for (int64_t i = begin; i < end; ++i) {
      float s = bufs[0][i];
      for (int r = 1; r < size; ++r) s += bufs[r][i];  // rank order: deterministic
      for (int r = 0; r < size; ++r) bufs[r][i] = s;
    }
    barrier();
    std::memcpy(x + p0, slot(rank_), sizeof(float) * size_t(len));
    barrier();  // every rank has read its slot before the next piece overwrites slots
  }
}

void ProcessShmCommunicator::all_gather(const float* in, int64_t n, float* out) {
  const int size = this->size();
  if (n <= 0) return;
  const int64_t cap = group_->seg().slot_floats;
  for (int64_t p0 = 0; p0 < n; p0 += cap) {
    const int64_t len = std::min(cap, n - p0);
    std::memcpy(slot(rank_), in + p0, sizeof(float) * size_t(len));
    barrier();
    for (int r = 0; r < size; ++r) std::memcpy(out + r * n + p0, slot(r), sizeof(float) * size_t(len));
    barrier();
  }
}

void ProcessShmCommunicator::gather_columns(const float* in, int64_t rows, int64_t cols, float* out, int root) {
  const int size = this->size();
  PYPTO_ASSERT(root >= 0 && root < size, "gather root ", root, " of ", size, " ranks");
  PYPTO_ASSERT(rows >= 0 && cols >= 0, "gather of ", rows, " x ", cols);
  if (size == 1) {
    if (rows > 0 && cols > 0 && out != in) std::memcpy(out, in, sizeof(float) * size_t(rows * cols));
    return;
  }
  ProcessShmSegment& s = group_->seg();
  s.ranks[rank_].count.store(cols, std::memory_order_relaxed);
  barrier();
  int64_t total = 0, max_cols = 1;
  int64_t cols_of[kMaxRanks], offset_of[kMaxRanks];
  for (int r = 0; r < size; ++r) {
    cols_of[r] = s.ranks[r].count.load(std::memory_order_relaxed);
    offset_of[r] = total;
    total += cols_of[r];
    max_cols = std::max(max_cols, cols_of[r]);
  }
  barrier();  // every count is read before a later gather rewrites it
  if (rank_ == root) PYPTO_ASSERT(out != nullptr || rows == 0, "gather root without an output buffer");
  PYPTO_ASSERT(max_cols <= s.slot_floats, "gather of ", max_cols, " columns through a slot of ", s.slot_floats);
  const int64_t piece_rows = s.slot_floats / max_cols;
  for (int64_t r0 = 0; r0 < rows; r0 += piece_rows) {
    const int64_t nr = std::min(piece_rows, rows - r0);
    if (cols > 0) std::memcpy(slot(rank_), in + r0 * cols, sizeof(float) * size_t(nr * cols));
    barrier();
    if (rank_ == root)
      for (int r = 0; r < size; ++r)
        for (int64_t i = 0; i < nr; ++i)
          std::memcpy(out + (r0 + i) * total + offset_of[r], slot(r) + i * cols_of[r], sizeof(float) * size_t(cols_of[r]));
    barrier();
  }
}

void ProcessShmCommunicator::send(const void* data, int64_t bytes, int dest) {
  PYPTO_ASSERT(dest >= 0 && dest < size() && dest != rank_, "send from rank ", rank_, " to ", dest);
  ProcessShmSegment& s = group_->seg();
  ProcessShmSegment::RankWords& w = s.ranks[rank_];
  const int64_t cap = s.slot_floats * int64_t(sizeof(float));
  const char* p = static_cast<const char*>(data);
  int64_t b0 = 0;
  do {  // a zero-byte message is one empty piece
    const int64_t len = std::min(cap, bytes - b0);
    wait_word(s, w.p2p_full, 1);  // the previous piece was taken
    if (len > 0) std::memcpy(slot(rank_), p + b0, size_t(len));
    w.p2p_dest.store(dest, std::memory_order_relaxed);
    w.p2p_len.store(len, std::memory_order_relaxed);
    w.p2p_full.store(1, std::memory_order_release);
    futex(&w.p2p_full, FUTEX_WAKE, INT32_MAX, nullptr);
    b0 += len;
  } while (b0 < bytes);
  wait_word(s, w.p2p_full, 1);  // the last piece was taken: the slot is free again
}

void ProcessShmCommunicator::recv(void* data, int64_t bytes, int src) {
  PYPTO_ASSERT(src >= 0 && src < size() && src != rank_, "recv on rank ", rank_, " from ", src);
  ProcessShmSegment& s = group_->seg();
  ProcessShmSegment::RankWords& w = s.ranks[src];
  char* p = static_cast<char*>(data);
  int64_t b0 = 0;
  do {
    wait_word(s, w.p2p_full, 0);
    const int64_t len = w.p2p_len.load(std::memory_order_relaxed);
    PYPTO_ASSERT(w.p2p_dest.load(std::memory_order_relaxed) == rank_ && b0 + len <= bytes, "rank ", rank_,
                 " expected ", bytes, " bytes from rank ", src);
    if (len > 0) std::memcpy(p + b0, slot(src), size_t(len));
    b0 += len;
    w.p2p_full.store(0, std::memory_order_release);
    futex(&w.p2p_full, FUTEX_WAKE, INT32_MAX, nullptr);
  } while (b0 < bytes);
}

void ProcessShmCommunicator::broadcast(void* data, int64_t bytes, int root) {
  const int size = this->size();
  PYPTO_ASSERT(root >= 0 && root < size, "broadcast root ", root, " of ", size, " ranks");
  if (size == 1 || bytes <= 0) return;
  const int64_t cap = group_->seg().slot_floats * int64_t(sizeof(float));
  char* p = static_cast<char*>(data);
  for (int64_t b0 = 0; b0 < bytes; b0 += cap) {
    const int64_t len = std::min(cap, bytes - b0);
    if (rank_ == root) std::memcpy(slot(root), p + b0, size_t(len));
    barrier();
    if (rank_ != root) std::memcpy(p + b0, slot(root), size_t(len));
    barrier();
  }
}

}  // namespace pypto

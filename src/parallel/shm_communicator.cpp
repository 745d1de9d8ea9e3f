#include "parallel/shm_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PYPTO_CPU_RELAX() _mm_pause()
#else
#define PYPTO_CPU_RELAX() ((void)0)
#endif

namespace pypto {

// State shared by the ranks. Every field a rank writes sits on its own cache line.
class ShmGroup {
 public:
  explicit ShmGroup(int size) : size_(size), slots_(size) {}

  int size() const { return size_; }

  // Sense-free generation barrier: the last rank to arrive resets the count and bumps the
  // generation; the others spin briefly (a collective's partner is usually microseconds behind),
  // then sleep on the generation word so an oversubscribed machine is not starved.
  void barrier() {
    const uint32_t gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == size_ - 1) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      generation_.notify_all();
      return;
    }
    for (int i = 0; i < kSpins; ++i) {
      if (generation_.load(std::memory_order_acquire) != gen) return;
      if ((i & 255) == 255)
        std::this_thread::yield();
      else
        PYPTO_CPU_RELAX();
    }
    while (generation_.load(std::memory_order_acquire) == gen) generation_.wait(gen, std::memory_order_acquire);
  }

  struct alignas(64) Slot {
    float* out = nullptr;
    const float* in = nullptr;
    int64_t count = 0;  // gather_columns: this rank's column count
  };
  Slot& slot(int r) { return slots_[r]; }

  // Point-to-point: rank r's outgoing message (one at a time: send waits until it is taken).
  struct alignas(64) Mail {
    std::atomic<uint32_t> full{0};  // 1 while data waits for `dest`
    int dest = -1;
    const void* data = nullptr;
    int64_t bytes = 0;
  };
  Mail& mail(int r) { return mail_[size_t(r)]; }

  // Spins briefly, then sleeps until word != old.
  static void wait_while(const std::atomic<uint32_t>& word, uint32_t old) {
    for (int i = 0; i < kSpins; ++i) {
      if (word.load(std::memory_order_acquire) != old) return;
      if ((i & 255) == 255)
        std::this_thread::yield();
      else
        PYPTO_CPU_RELAX();
    }
    while (word.load(std::memory_order_acquire) == old) word.wait(old, std::memory_order_acquire);
  }

 private:
  static constexpr int kSpins = 1 << 14;
  const int size_;
  std::vector<Slot> slots_;
  std::vector<Mail> mail_ = std::vector<Mail>(size_t(size_));
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};
};

ShmCommunicator::ShmCommunicator(std::shared_ptr<ShmGroup> group, int rank) : group_(std::move(group)), rank_(rank) {
  PYPTO_ASSERT(group_ && rank >= 0 && rank < group_->size(), "rank ", rank);
}

int ShmCommunicator::size() const { return group_->size(); }

void ShmCommunicator::barrier() { group_->barrier(); }

void ShmCommunicator::all_reduce_sum(float* x, int64_t n) {
  const int size = group_->size();
  if (size == 1 || n <= 0) return;
  group_->slot(rank_).out = x;
  group_->barrier();  // every rank's pointer is published (the barrier orders the stores)
  // This rank's chunk: [begin, end), a multiple of 16 floats (one cache line) wide.
  const int64_t chunk = ((n + size - 1) / size + 15) / 16 * 16;
  const int64_t begin = std::min<int64_t>(n, chunk * rank_);
  const int64_t end = std::min<int64_t>(n, begin + chunk);
  float* bufs[64];
  PYPTO_ASSERT(size <= 64, "shared-memory group of ", size, " ranks");
  for (int r = 0; r < size; ++r) bufs[r] = group_->slot(r).out;
  for (int64_t i = begin; i < end; ++i) {
    float s = bufs[0][i];
    for (int r = 1; r < size; ++r) s += bufs[r][i];  // rank order: deterministic
    for (int r = 0; r < size; ++r) bufs[r][i] = s;
  }
  group_->barrier();  // every chunk is written everywhere before anyone reuses its buffer
}

void ShmCommunicator::all_gather(const float* in, int64_t n, float* out) {
  const int size = group_->size();
  if (n <= 0) return;
  if (size == 1) {
    if (out != in) std::memcpy(out, in, sizeof(float) * n);
    return;
  }
  group_->slot(rank_).in = in;
  group_->barrier();
  for (int r = 0; r < size; ++r) {
    const float* src = group_->slot(r).in;
    if (out + r * n != src) std::memcpy(out + r * n, src, sizeof(float) * n);
  }
  group_->barrier();  // nobody's input is released before everyone has copied it
}

void ShmCommunicator::gather_columns(const float* in, int64_t rows, int64_t cols, float* out, int root) {
  const int size = group_->size();
  PYPTO_ASSERT(root >= 0 && root < size, "gather root ", root, " of ", size, " ranks");
  PYPTO_ASSERT(rows >= 0 && cols >= 0, "gather of ", rows, " x ", cols);
  if (rank_ == root) PYPTO_ASSERT(out != nullptr || rows == 0, "gather root without an output buffer");
  if (size == 1) {
    if (rows > 0 && cols > 0 && out != in) std::memcpy(out, in, sizeof(float) * size_t(rows * cols));
    return;
  }
  group_->slot(rank_).count = cols;
  if (rank_ == root) group_->slot(root).out = out;
  group_->barrier();  // every count and the root's pointer are published
  int64_t total = 0, offset = 0;
  for (int r = 0; r < size; ++r) {
    if (r == rank_) offset = total;
    total += group_->slot(r).count;
  }
  // Row i of this rank's block: in[i, 0:cols] → out[i, offset : offset + cols] (out is [rows, total]).
  float* dst = group_->slot(root).out;
  if (cols > 0)
    for (int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * total + offset, in + i * cols, sizeof(float) * size_t(cols));
  group_->barrier();  // the root's buffer is complete, and no rank reuses `in` or the slots early
}

void ShmCommunicator::broadcast(void* data, int64_t bytes, int root) {
  const int size = group_->size();
  PYPTO_ASSERT(root >= 0 && root < size, "broadcast root ", root, " of ", size, " ranks");
  if (size == 1 || bytes <= 0) return;
  if (rank_ == root) group_->slot(root).in = static_cast<const float*>(data);
  group_->barrier();
  if (rank_ != root) std::memcpy(data, group_->slot(root).in, size_t(bytes));
  group_->barrier();  // the root keeps its buffer until every rank has copied it
}

void ShmCommunicator::send(const void* data, int64_t bytes, int dest) {
  PYPTO_ASSERT(dest >= 0 && dest < size() && dest != rank_, "send from rank ", rank_, " to ", dest);
  ShmGroup::Mail& m = group_->mail(rank_);
  PYPTO_ASSERT(m.full.load(std::memory_order_acquire) == 0, "rank ", rank_, " has a message in flight");
  m.dest = dest;
  m.data = data;
  m.bytes = bytes;
  m.full.store(1, std::memory_order_release);
  m.full.notify_all();
  ShmGroup::wait_while(m.full, 1);  // the receiver copied it: `data` may be reused
}

void ShmCommunicator::recv(void* data, int64_t bytes, int src) {
  PYPTO_ASSERT(src >= 0 && src < size() && src != rank_, "recv on rank ", rank_, " from ", src);
  ShmGroup::Mail& m = group_->mail(src);
  ShmGroup::wait_while(m.full, 0);
  PYPTO_ASSERT(m.dest == rank_ && m.bytes == bytes, "rank ", rank_, " expected ", bytes, " bytes from rank ", src,
               ", which sent ", m.bytes, " to rank ", m.dest);
  if (bytes > 0) std::memcpy(data, m.data, size_t(bytes));
  m.full.store(0, std::memory_order_release);
  m.full.notify_all();
}

std::vector<std::unique_ptr<Communicator>> make_shm_communicators(int size) {
  if (size < 1 || size > 64) fail("tensor-parallel size ", size, " is outside [1, 64]");
  auto group = std::make_shared<ShmGroup>(size);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(std::make_unique<ShmCommunicator>(group, r));
  return comms;
}

}  // namespace pypto

// The host emulator for cooperative kernel bodies (fuse/cuda/block.hpp): every thread of a block
// is a fiber (POSIX ucontext) that runs until it reaches a barrier or a shuffle, where it yields.
// A block barrier releases its threads when every live thread of the block waits there, a
// shuffle when every live lane of the warp does; threads run between those points in the
// schedule's order (forward, reverse, shuffled), and a warp or block released runs on at once,
// ahead of the threads later in the order (as far ahead as CUDA lets it). So a body that reads shared memory another
// thread writes, without a barrier between, reads it before or after the write depending on the
// order, and the tests, which run every order, see the difference. Strict where CUDA leaves it
// undefined: a barrier must be reached by every thread of the block and a shuffle by every lane
// of the warp, none having returned; threads that wait at different points, or beside finished
// ones, with nothing left to run (a barrier in divergent code) are an error here. Shared memory starts filled with 0xA5 bytes, as
// uninitialised memory would be anything.
//
// One OS thread runs all fibers, one block at a time; each fiber has its own 256 KiB stack.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "fuse/core/error.hpp"
#include "fuse/cuda/block.hpp"
#include "fuse/cuda/emulate.hpp"
#include "fuse/cuda/launch.hpp"

namespace fuse::cuda {

class emulated_block;

namespace detail {

/// The fibers of one block and their scheduler.
class fiber_scheduler {
 public:
  enum class state : std::uint8_t { ready, at_barrier, at_shuffle, done };

  fiber_scheduler(std::uint32_t threads, std::size_t shared_bytes)
      : fibers_(threads), stacks_(threads), shared_(shared_bytes), slots_(threads) {
    // (not make_unique: it would zero every stack, 256 MiB for a block of 1024 threads)
    for (auto& s : stacks_) s.reset(new unsigned char[stack_bytes]);
  }

  /// Runs body(thread index) for each thread of the block, threads started and resumed in
  /// `order` (a permutation of the thread indices).
  template <class F>
  void run_block(const std::vector<std::uint64_t>& order, F& body) {
    std::fill(shared_.begin(), shared_.end(), static_cast<unsigned char>(0xA5));
    entry_ = [](void* f, std::uint32_t i) { (*static_cast<F*>(f))(i); };
    body_ = &body;
    error_ = nullptr;
    for (std::uint32_t i = 0; i < fibers_.size(); ++i) {
      fiber& f = fibers_[i];
      f.st = state::ready;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = stacks_[i].get();
      f.ctx.uc_stack.ss_size = stack_bytes;
      f.ctx.uc_link = &scheduler_;
      makecontext(&f.ctx, reinterpret_cast<void (*)()>(&fiber_main), 0);
    }
    std::size_t live = fibers_.size();
    while (live > 0) {
      bool ran = false, released = false;
      for (const std::uint64_t i : order) {
        fiber& f = fibers_[i];
        if (f.st != state::ready) continue;
        current_ = this;
        running_ = static_cast<std::uint32_t>(i);
        swapcontext(&scheduler_, &f.ctx);  // back here at its next barrier, shuffle or end
        ran = true;
        if (error_) break;
        // Eagerly: a warp whose shuffle (or a block whose barrier) is complete runs on at once,
        // from the first thread in the order, before threads later in the order have caught
        // up. So a warp races ahead of the others as far as CUDA allows (a shared slot reused
        // without a barrier between its last read and its next write is overwritten early).
        if ((released = release_waiting(static_cast<std::uint32_t>(i)))) break;
      }
      if (error_) break;
      if (released) continue;
      live = static_cast<std::size_t>(
          std::count_if(fibers_.begin(), fibers_.end(), [](const fiber& f) { return f.st != state::done; }));
      if (live == 0) break;
      if (release_barrier() || release_shuffles()) continue;
      if (!ran || std::none_of(fibers_.begin(), fibers_.end(), [](const fiber& f) { return f.st == state::ready; }))
        error_ = std::make_exception_ptr(error(
            "cuda emulator: the threads of a block wait at different barriers or shuffles, or beside threads that "
            "returned (a barrier in divergent code): on a GPU this hangs or is undefined"));
    }
    if (error_) std::rethrow_exception(error_);
  }

  // ---- what emulated_block calls, from inside a fiber ----
  void barrier() { yield(state::at_barrier); }
  template <class T>
  T shuffle_xor(T v, std::uint32_t lane_mask) {
    const std::uint32_t me = running_;
    return exchange(v, (me & ~(warp_size - 1)) | ((me % warp_size) ^ lane_mask));
  }
  template <class T>
  T shuffle(T v, std::uint32_t src_lane) {
    return exchange(v, (running_ & ~(warp_size - 1)) | (src_lane % warp_size));
  }
  /// v of thread `partner` of the block (this one's own where the block has no such thread).
  template <class T>
  T exchange(T v, std::uint32_t partner) {
    static_assert(sizeof(T) <= sizeof(std::uint64_t), "cuda emulator: a shuffle moves at most 8 bytes");
    const std::uint32_t me = running_;
    std::memcpy(&slots_[me], &v, sizeof(T));
    yield(state::at_shuffle);  // every lane of the warp has written its slot
    T r;
    std::memcpy(&r, &slots_[partner < fibers_.size() ? partner : me], sizeof(T));
    yield(state::at_shuffle);  // every lane has read before any writes its slot again
    return r;
  }
  unsigned char* shared() { return shared_.data(); }

 private:
  static constexpr std::size_t stack_bytes = 256 * 1024;
  struct fiber {
    ucontext_t ctx{};
    state st = state::ready;
  };

  static inline thread_local fiber_scheduler* current_ = nullptr;

  static void fiber_main() {
    fiber_scheduler& s = *current_;
    const std::uint32_t i = s.running_;
    try {
      s.entry_(s.body_, i);
    } catch (...) {
      s.error_ = std::current_exception();
    }
    s.fibers_[i].st = state::done;  // uc_link returns to the scheduler
  }

  void yield(state st) {
    fiber& f = fibers_[running_];
    f.st = st;
    swapcontext(&f.ctx, &scheduler_);
  }
  /// Releases the warp of thread i when all its lanes wait at a shuffle, or the block when
  /// every thread waits at the barrier (i having just arrived there).
  bool release_waiting(std::uint32_t i) {
    if (fibers_[i].st == state::at_barrier) return release_barrier();
    if (fibers_[i].st != state::at_shuffle) return false;
    const std::size_t w = i - i % warp_size;
    const auto first = fibers_.begin() + static_cast<std::ptrdiff_t>(w);
    const auto last = fibers_.begin() + static_cast<std::ptrdiff_t>(std::min(fibers_.size(), w + warp_size));
    if (!std::all_of(first, last, [](const fiber& f) { return f.st == state::at_shuffle; })) return false;
    for (auto f = first; f != last; ++f) f->st = state::ready;
    return true;
  }
  /// Releases the block barrier when every thread of the block waits at it.
  bool release_barrier() {
    if (!std::all_of(fibers_.begin(), fibers_.end(), [](const fiber& f) { return f.st == state::at_barrier; }))
      return false;
    for (fiber& f : fibers_) f.st = state::ready;
    return true;
  }
  /// Releases each warp whose lanes all wait at a shuffle.
  bool release_shuffles() {
    bool released = false;
    for (std::size_t w = 0; w < fibers_.size(); w += warp_size) {
      const auto first = fibers_.begin() + static_cast<std::ptrdiff_t>(w);
      const auto last = fibers_.begin() + static_cast<std::ptrdiff_t>(std::min(fibers_.size(), w + warp_size));
      if (!std::all_of(first, last, [](const fiber& f) { return f.st == state::at_shuffle; })) continue;
      for (auto f = first; f != last; ++f) f->st = state::ready;
      released = true;
    }
    return released;
  }

  std::vector<fiber> fibers_;
  std::vector<std::unique_ptr<unsigned char[]>> stacks_;
  std::vector<unsigned char> shared_;
  std::vector<std::uint64_t> slots_;
  ucontext_t scheduler_{};
  void (*entry_)(void*, std::uint32_t) = nullptr;
  void* body_ = nullptr;
  std::uint32_t running_ = 0;
  std::exception_ptr error_;
};

}  // namespace detail

/// The block a cooperative body sees in the emulator (the counterpart of device_block). Its
/// members are FUSE_HD only so that nvcc accepts the __host__ __device__ bodies instantiated
/// with it in a .cu file; their device forms are never called (the emulator runs on the host).
class emulated_block {
 public:
  explicit emulated_block(detail::fiber_scheduler& s) : s_(&s) {}
  FUSE_HD void barrier() const {
#if defined(__CUDA_ARCH__)
    __trap();
#else
    s_->barrier();
#endif
  }
  template <class T>
  FUSE_HD T shuffle_xor(T v, std::uint32_t lane_mask) const {
#if defined(__CUDA_ARCH__)
    __trap();
    return v;
#else
    return s_->shuffle_xor(v, lane_mask);
#endif
  }
  template <class T>
  FUSE_HD T shuffle(T v, std::uint32_t src_lane) const {
#if defined(__CUDA_ARCH__)
    __trap();
    return v;
#else
    return s_->shuffle(v, src_lane);
#endif
  }
  template <class T>
  FUSE_HD T* shared() const {
#if defined(__CUDA_ARCH__)
    __trap();
    return nullptr;
#else
    return reinterpret_cast<T*>(s_->shared());
#endif
  }

 private:
  detail::fiber_scheduler* s_;
};

/// Runs body(thread_coords, emulated_block&) for every thread of the grid of `cfg`, each block's
/// threads as fibers (see the file's top), blocks and threads in the schedule's order.
template <class Body>
void emulate_cooperative_grid(const launch_config& cfg, schedule order, const Body& body) {
  detail::fiber_scheduler sched(static_cast<std::uint32_t>(cfg.threads_per_block()), cfg.shared_bytes);
  emulated_block blk(sched);
  for_each_block(cfg, order, [&](const thread_coords& t, const std::vector<std::uint64_t>& threads) {
    auto run_thread = [&](std::uint32_t i) {
      thread_coords mine = t;
      mine.thread = thread_at(i, cfg.block);
      body(mine, blk);
    };
    sched.run_block(threads, run_thread);
  });
}

}  // namespace fuse::cuda

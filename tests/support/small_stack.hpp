// Runs a test body on a thread with a small stack, so that a short input proves that a pass
// does not recurse once per element (the long-chain tests of the Relay frontend).
#pragma once

#include <pthread.h>

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace fuse::test {

/// The stack `on_small_stack` gives its body: 256 KiB. Every call frame holds at least a return
/// address and, with frame pointers, the saved frame pointer (16 bytes), so a recursion per
/// element of a `small_stack_chain`-long input overflows it at any optimization level and
/// under AddressSanitizer (whose fake stacks move locals off the thread's stack, not frames).
inline constexpr std::size_t small_stack_bytes = std::size_t{256} << 10;
inline constexpr int small_stack_chain = 20000;

/// Calls `f()` on a new thread whose stack is `small_stack_bytes` long and waits for it; an
/// exception `f` throws is rethrown here. A stack overflow crashes the test binary: a failure.
template <class F>
void on_small_stack(F&& f) {
  struct call {
    F* f;
    std::exception_ptr thrown;
  } c{&f, nullptr};
  auto body = [](void* p) -> void* {
    auto* c = static_cast<call*>(p);
    try {
      (*c->f)();
    } catch (...) {
      c->thrown = std::current_exception();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  int rc = pthread_attr_setstacksize(&attr, small_stack_bytes);
  pthread_t thread;
  if (rc == 0) rc = pthread_create(&thread, &attr, body, &c);
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("on_small_stack: could not start a thread (error " + std::to_string(rc) + ")");
  pthread_join(thread, nullptr);
  if (c.thrown) std::rethrow_exception(c.thrown);
}

}  // namespace fuse::test

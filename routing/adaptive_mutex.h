// A mutex for short critical sections that every worker thread enters per
// request (the router's shared statistics): a thread that finds it taken
// spins briefly before it sleeps, as the holder is about to leave — a
// plain std::mutex puts it to sleep at once, a futex wait and wake (two
// syscalls and a context switch) for a wait of a few hundred nanoseconds.
// glibc's adaptive mutex (PTHREAD_MUTEX_ADAPTIVE_NP) spins a bounded,
// self-tuning number of times, then blocks like any mutex. Meets
// Lockable, so std::lock_guard and std::unique_lock take it.
#pragma once

#include <pthread.h>

namespace llmgate::routing {

class AdaptiveMutex {
 public:
  AdaptiveMutex() {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&mu_, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  ~AdaptiveMutex() { pthread_mutex_destroy(&mu_); }
  AdaptiveMutex(const AdaptiveMutex&) = delete;
  AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;

  void lock() { pthread_mutex_lock(&mu_); }
  bool try_lock() { return pthread_mutex_trylock(&mu_) == 0; }
  void unlock() { pthread_mutex_unlock(&mu_); }

 private:
  pthread_mutex_t mu_;
};

}  // namespace llmgate::routing

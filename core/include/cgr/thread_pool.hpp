// The CPU executor's thread pool. `threads` counts every thread that computes, the caller
// included: a pool of N starts N-1 workers and the thread that calls parallel_for() or
// wait() works too. Tasks of several callers (several execution contexts) share the pool.
//
// Idle threads spin for a few tens of microseconds before sleeping, so work handed over between
// short ops does not wait for a kernel wake-up.
//
// parallel_for splits [0, n) into chunks that are claimed atomically, each participating
// thread first from its own contiguous share (the caller's the first), then from the others';
// the caller claims chunks itself and then waits only for chunks other threads are already
// running, so nested use from inside a task (an op splitting its work while other ops run)
// cannot deadlock.
//
// Queued tasks run highest priority first, in submission order among equals. The DAG
// scheduler gives an op the estimated time of the longest chain it starts (list scheduling by
// the cost-weighted critical path); the helpers of a parallel_for inherit the priority of the
// task that calls it, so an op in progress on the critical path gets idle threads before a
// branch that can wait, and a branch that cannot wait gets them first.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cgr {

class ThreadPool {
 public:
  // A pool may have at most this many threads per hardware thread (oversubscription beyond it
  // only adds switching); more is an Error naming the limit.
  static constexpr int kMaxThreadsPerHardwareThread = 4;
  static int hardware_threads();
  static int max_threads();

  // threads <= 0: one per hardware thread. Error when `threads` is over max_threads(), or when
  // the system refuses a thread (the workers already started are stopped first).
  explicit ThreadPool(int threads = 0);
  // How a worker thread is started (std::thread by default): tests make it fail.
  using ThreadStarter = std::function<std::thread(std::function<void()>)>;
  ThreadPool(int threads, const ThreadStarter& start);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }
  // The calling thread's index in the pool that started it: 1 to size() - 1 for a worker, 0
  // for any other thread (a caller of parallel_for / help_until). Profiles name threads by it.
  static int current_worker();

  // Calls body(begin, end) over disjoint ranges covering [0, n). Ranges hold at least
  // `grain` items (except the last); with n <= grain the body runs inline once.
  void parallel_for(std::size_t n, std::size_t grain,
                    const std::function<void(std::size_t, std::size_t)>& body);

  // Queues a task; higher `priority` runs first. Used by the DAG scheduler.
  void submit(std::function<void()> task, double priority = 0);
  // Runs one queued task on the calling thread if there is one; returns whether it did.
  bool run_one();
  // Runs queued tasks on the calling thread until done() holds, sleeping when there are none.
  // Whoever makes done() true must then call notify_waiters().
  void help_until(const std::function<bool()>& done);
  void notify_waiters();

 private:
  struct Task {
    double priority = 0;
    std::uint64_t sequence = 0;  // submission order: first in, first out among equals
    std::function<void()> run;
  };
  void worker_loop();
  void stop_workers() noexcept;
  // Both with mutex_ held.
  void push(std::function<void()> task, double priority);
  Task pop();
  // Runs a popped task with its priority as the calling thread's current one.
  static void run_task(Task& task);

  int size_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Task> tasks_;  // a heap: the highest priority, then the oldest, on top
  std::uint64_t submitted_ = 0;
  // Mirrors tasks_.size() and the stop request so idle threads can spin on them without the
  // lock: at batch 1 an op lasts tens of microseconds, about what a condition-variable
  // wake-up costs, so threads spin briefly before they sleep.
  std::atomic<std::size_t> queued_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace cgr

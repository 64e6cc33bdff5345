#include "cgr/thread_pool.hpp"

#include "cgr/error.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <memory>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cgr {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until ready() or about `budget` has passed; returns ready().
template <typename Ready>
bool spin_until(const Ready& ready,
                std::chrono::microseconds budget = std::chrono::microseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

// Set once by each worker as it starts; 0 on every thread a pool did not start.
thread_local int worker_index = 0;
// The priority of the task the thread is running; a thread outside any task (an eager run's
// caller) is waited on by someone directly, so its helpers go first.
thread_local double current_priority = std::numeric_limits<double>::infinity();

// Heap order: the top is the highest priority, then the lowest sequence.
template <typename Task>
bool runs_later(const Task& a, const Task& b) {
  if (a.priority != b.priority) return a.priority < b.priority;
  return a.sequence > b.sequence;
}

}  // namespace

int ThreadPool::current_worker() {
  return worker_index;
}

int ThreadPool::hardware_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int ThreadPool::max_threads() {
  return kMaxThreadsPerHardwareThread * hardware_threads();
}

ThreadPool::ThreadPool(int threads)
    : ThreadPool(threads, [](std::function<void()> body) { return std::thread(std::move(body)); }) {
}

ThreadPool::ThreadPool(int threads, const ThreadStarter& start) {
  if (threads <= 0) threads = hardware_threads();
  if (threads > max_threads()) {
    fail("a thread pool of {} threads: at most {} ({} per hardware thread, {} here)", threads,
         max_threads(), kMaxThreadsPerHardwareThread, hardware_threads());
  }
  size_ = threads;
  workers_.reserve(static_cast<std::size_t>(threads - 1));
  try {
    for (int i = 1; i < threads; ++i) {
      workers_.push_back(start([this, i] {
        worker_index = i;
        worker_loop();
      }));
    }
  } catch (const std::exception& e) {
    // The destructor will not run for a half-built pool: stop the workers that did start, or
    // they would wait forever (and their std::thread objects would terminate the process).
    const std::size_t started = workers_.size();
    stop_workers();
    fail("a thread pool of {} threads: the system started only {} ({})", threads, started + 1,
         e.what());
  }
}

ThreadPool::~ThreadPool() {
  stop_workers();
}

void ThreadPool::stop_workers() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true);
  }
  wake_.notify_all();
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  workers_.clear();
}

void ThreadPool::push(std::function<void()> task, double priority) {
  tasks_.push_back({priority, submitted_++, std::move(task)});
  std::push_heap(tasks_.begin(), tasks_.end(), runs_later<Task>);
  queued_.store(tasks_.size(), std::memory_order_release);
}

ThreadPool::Task ThreadPool::pop() {
  std::pop_heap(tasks_.begin(), tasks_.end(), runs_later<Task>);
  Task task = std::move(tasks_.back());
  tasks_.pop_back();
  queued_.store(tasks_.size(), std::memory_order_release);
  return task;
}

void ThreadPool::run_task(Task& task) {
  const double outer = current_priority;
  current_priority = task.priority;
  try {
    task.run();
  } catch (...) {
    current_priority = outer;
    throw;
  }
  current_priority = outer;
}

void ThreadPool::submit(std::function<void()> task, double priority) {
  {
    std::lock_guard lock(mutex_);
    push(std::move(task), priority);
  }
  // Without workers the task runs when the caller helps (help_until / run_one).
  if (!workers_.empty()) wake_.notify_one();
}

bool ThreadPool::run_one() {
  Task task;
  {
    std::lock_guard lock(mutex_);
    if (tasks_.empty()) return false;
    task = pop();
  }
  run_task(task);
  return true;
}

void ThreadPool::help_until(const std::function<bool()>& done) {
  for (;;) {
    spin_until([&] { return done() || queued_.load(std::memory_order_acquire) > 0; });
    Task task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return done() || !tasks_.empty(); });
      if (done()) return;
      task = pop();
    }
    run_task(task);
  }
}

void ThreadPool::notify_waiters() {
  // Taking the lock orders this notify after a waiter's predicate check (no lost wake-up).
  std::lock_guard lock(mutex_);
  wake_.notify_all();
}

void ThreadPool::worker_loop() {
  for (;;) {
    spin_until([this] {
      return stopping_.load(std::memory_order_relaxed) ||
             queued_.load(std::memory_order_acquire) > 0;
    });
    Task task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_.load() || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      task = pop();
    }
    run_task(task);
  }
}

namespace {

// Shared state of one parallel_for. Participant p (the caller 0, helpers 1, 2, ...) owns the
// p-th contiguous share of the chunks and claims them front to front with its share's atomic
// counter; then it claims from the other shares the same way (so a late helper finds its
// share taken and a slow one is helped). Each thread thus works on the same part of [0, n)
// in op after op of a chain (the caller, the thread that goes on with the chain, on the first
// part), where the previous op left that part's data in its caches: MobileNet-v2's
// memory-bound depthwise and 1x1 convs, at two threads, read their inputs from the other
// core's caches about half the time when whoever came first took the next chunk.
struct ParallelForState {
  static constexpr std::size_t kMaxShares = 64;
  std::size_t n = 0;
  std::size_t chunk = 0;
  std::size_t chunks = 0;
  std::size_t shares = 1;
  const std::function<void(std::size_t, std::size_t)>* body = nullptr;
  struct alignas(64) Share {
    std::atomic<std::size_t> next{0};
    std::size_t end = 0;
  };
  Share share[kMaxShares];
  std::atomic<std::size_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;
  std::exception_ptr error;

  void split(std::size_t participants) {
    shares = std::clamp<std::size_t>(participants, 1, std::min(chunks, kMaxShares));
    for (std::size_t p = 0; p < shares; ++p) {
      share[p].next.store(p * chunks / shares, std::memory_order_relaxed);
      share[p].end = (p + 1) * chunks / shares;
    }
  }

  void run_chunks(std::size_t participant) {
    for (std::size_t k = 0; k < shares; ++k) {
      Share& from = share[(participant + k) % shares];
      for (;;) {
        const std::size_t index = from.next.fetch_add(1, std::memory_order_relaxed);
        if (index >= from.end) break;
        run_chunk(index);
      }
    }
  }

  void run_chunk(std::size_t index) {
    const std::size_t begin = index * chunk;
    const std::size_t end = std::min(n, begin + chunk);
    try {
      (*body)(begin, end);
    } catch (...) {
      std::lock_guard lock(mutex);
      if (!error) error = std::current_exception();
    }
    if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      std::lock_guard lock(mutex);
      finished.notify_all();
    }
  }
};

}  // namespace

void ThreadPool::parallel_for(std::size_t n, std::size_t grain,
                              const std::function<void(std::size_t, std::size_t)>& body) {
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t max_chunks = (n + grain - 1) / grain;
  // A few chunks per thread balance uneven chunk costs without much claiming overhead.
  const std::size_t chunks = std::min<std::size_t>(max_chunks, static_cast<std::size_t>(size_) * 4);
  if (chunks <= 1 || workers_.empty()) {
    body(0, n);
    return;
  }
  auto state = std::make_shared<ParallelForState>();
  state->n = n;
  state->chunk = (n + chunks - 1) / chunks;
  state->chunks = (n + state->chunk - 1) / state->chunk;
  state->body = &body;
  const std::size_t helpers =
      std::min<std::size_t>({workers_.size(), state->chunks - 1, ParallelForState::kMaxShares - 1});
  state->split(helpers + 1);
  {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < helpers; ++i)
      push([state, i] { state->run_chunks(i + 1); }, current_priority);
  }
  if (helpers == 1) {
    wake_.notify_one();
  } else {
    wake_.notify_all();
  }
  state->run_chunks(0);
  // Only chunks that other threads are running remain; they finish without needing us.
  if (!spin_until([&] { return state->done.load(std::memory_order_acquire) == state->chunks; })) {
    std::unique_lock lock(state->mutex);
    state->finished.wait(lock, [&] { return state->done.load() == state->chunks; });
  }
  if (state->error) std::rethrow_exception(state->error);
}

}  // namespace cgr

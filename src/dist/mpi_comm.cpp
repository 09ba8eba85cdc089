#include "dist/mpi_comm.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include "core/strings.h"

#if STRATA_HAVE_MPI
#include <mpi.h>
#endif

namespace strata::dist {

bool have_mpi() {
  return STRATA_HAVE_MPI != 0;
}

Result<double> dist_timeout_seconds() {
  const char* v = std::getenv("STRATA_DIST_TIMEOUT");
  if (v == nullptr || *v == '\0') return 30.0;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  // Bounded: the deadline arithmetic (steady_clock durations) overflows near 1e10 s.
  if (end == v || *end != '\0' || !(t > 0) || !(t <= 1e6))
    return invalid_argument(std::string("STRATA_DIST_TIMEOUT=") + v +
                            ": expected a number of seconds above 0 and at most 1000000");
  return t;
}

namespace {
std::string seconds_text(double s) {
  std::string t = std::to_string(s);
  t.erase(t.find_last_not_of('0') + 1);
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t + " s";
}
}  // namespace

#if STRATA_HAVE_MPI

namespace {

constexpr int kTagP2P = 1, kTagGather = 2, kTagBcast = 3;
constexpr size_t kChunk = size_t{1} << 30;  // MPI counts are int: bigger messages go in chunks

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, len);
}

using Clock = std::chrono::steady_clock;

}  // namespace

// The keep-alive (with MPI_THREAD_MULTIPLE): a thread that sends one byte to every other rank
// every `interval` seconds over its own communicator and notes when each rank was last heard
// from. A rank whose process runs (computing, loading, waiting) keeps sending; one that died,
// was stopped or cannot be reached falls silent; one that finishes says so (a last "bye" byte)
// and is not taken for silent afterwards. A wait that reaches its deadline asks which ranks are
// silent: those are named; when none is, the wait goes on (up to the wait limit).
class Liveness {
 public:
  Liveness(MPI_Comm comm, double interval, std::vector<std::string> hosts)
      : comm_(comm), interval_(interval), hosts_(std::move(hosts)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    last_ = std::vector<std::atomic<int64_t>>(size_);
    done_ = std::vector<std::atomic<bool>>(size_);
    const int64_t now = now_ns();
    for (auto& t : last_) t.store(now);
    sends_.assign(size_, MPI_REQUEST_NULL);
    // One receive per peer: an error from one (its process gone) leaves the others heard.
    recvs_.assign(size_, MPI_REQUEST_NULL);
    in_.assign(size_, 0);
    deaf_.assign(size_, false);
    thread_ = std::thread([this] { run(); });
  }
  ~Liveness() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    // The last byte to every peer says this rank is done (so its silence from now on is not
    // a failure); eager one-byte sends, not waited for (a peer may already be gone).
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      if (sends_[r] != MPI_REQUEST_NULL) MPI_Request_free(&sends_[r]);
      MPI_Request req = MPI_REQUEST_NULL;
      if (MPI_Isend(&kBye, 1, MPI_BYTE, r, 0, comm_, &req) == MPI_SUCCESS &&
          req != MPI_REQUEST_NULL)
        MPI_Request_free(&req);
    }
    for (MPI_Request& r : recvs_)
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
    MPI_Comm_free(&comm_);
  }
  // While set, the thread itself calls `on_lost` (once) with "rank R on host H did not answer
  // within T s" when a rank falls silent for `seconds`: for a phase in which this rank may not
  // wait on the others for a long time (its own shard load).
  void watch(double seconds, std::function<void(const std::string&)> on_lost) {
    std::lock_guard<std::mutex> lock(mu_);
    watch_seconds_ = seconds;
    on_lost_ = std::move(on_lost);
  }
  double interval() const { return interval_; }
  const std::string& host(int world_rank) const { return hosts_[world_rank]; }
  // World ranks not heard from for `seconds` (this rank and ranks that said they are done
  // excluded), in rank order.
  std::vector<int> silent_for(double seconds) const {
    std::vector<int> out;
    const int64_t now = now_ns(), bound = static_cast<int64_t>(seconds * 1e9);
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && !done_[r].load() && now - last_[r].load() > bound) out.push_back(r);
    return out;
  }

 private:
  static constexpr char kBeat = 1;
  static constexpr char kBye = 2;

  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  }
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      // Takes what arrived from each peer, then sends the next beat to every peer whose last
      // one has left (a peer that stopped reading does not pile up beats here).
      for (int r = 0; r < size_; ++r) {
        if (r == rank_ || deaf_[r]) continue;
        for (;;) {
          if (recvs_[r] == MPI_REQUEST_NULL &&
              MPI_Irecv(&in_[r], 1, MPI_BYTE, r, 0, comm_, &recvs_[r]) != MPI_SUCCESS) {
            deaf_[r] = true;  // stays silent from here: named if a wait needs it
            break;
          }
          int flag = 0;
          if (MPI_Test(&recvs_[r], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            if (recvs_[r] != MPI_REQUEST_NULL) MPI_Request_free(&recvs_[r]);
            deaf_[r] = true;
            break;
          }
          if (!flag) break;
          last_[r].store(now_ns());
          if (in_[r] == kBye) done_[r].store(true);
        }
      }
      for (int r = 0; r < size_; ++r) {
        if (r == rank_ || done_[r].load()) continue;
        int flag = 1;
        if (sends_[r] != MPI_REQUEST_NULL &&
            (MPI_Test(&sends_[r], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag))
          continue;
        MPI_Isend(&kBeat, 1, MPI_BYTE, r, 0, comm_, &sends_[r]);
      }
      lock.lock();
      if (on_lost_) {
        const std::vector<int> silent = silent_for(watch_seconds_);
        if (!silent.empty()) {
          std::string who;
          for (size_t i = 0; i < silent.size(); ++i)
            who += (i == 0 ? "" : (i + 1 == silent.size() ? " and " : ", ")) +
                   std::string("rank ") + std::to_string(silent[i]) + " on host " +
                   hosts_[silent[i]];
          auto f = std::move(on_lost_);
          on_lost_ = nullptr;
          lock.unlock();
          f(who + " did not answer within " + seconds_text(watch_seconds_));
          lock.lock();
        }
      }
      cv_.wait_for(lock, std::chrono::duration<double>(interval_), [this] { return stop_; });
    }
  }

  MPI_Comm comm_;
  double interval_;
  std::vector<std::string> hosts_;  // of each world rank
  int rank_ = 0, size_ = 1;
  std::vector<std::atomic<int64_t>> last_;  // steady-clock ns of the last byte from each rank
  std::vector<std::atomic<bool>> done_;     // the rank said it is done
  std::vector<MPI_Request> sends_, recvs_;
  std::vector<char> in_;
  std::vector<bool> deaf_;  // its receive failed (the thread's own)
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  double watch_seconds_ = 0;
  std::function<void(const std::string&)> on_lost_;
  std::thread thread_;
};

class MpiComm final : public Comm {
 public:
  // `world_ranks[r]` and `hosts[r]`: the world rank and host of group rank r.
  MpiComm(MPI_Comm comm, std::vector<int> world_ranks, std::vector<std::string> hosts,
          std::vector<long> pids, double timeout, std::string name, bool owned)
      : comm_(comm),
        world_ranks_(std::move(world_ranks)),
        hosts_(std::move(hosts)),
        pids_(std::move(pids)),
        timeout_(timeout),
        name_(std::move(name)),
        owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiComm() override {
    // Sends still on their way read from buffers freed below: give them the group's timeout.
    if (broken_.ok()) {
      while (!async_.empty() && reap_async().ok())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (owned_) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double busy_seconds() const override { return busy_; }
  std::string describe_rank(int r) const override {
    if (r < 0 || r >= size_) return "rank ?";
    return "rank " + std::to_string(world_ranks_[r]) + " on host " + hosts_[r] +
           (pids_[r] > 0 ? " (pid " + std::to_string(pids_[r]) + ")" : "");
  }
  void set_where(std::vector<std::string> hosts, std::vector<long> pids) {
    hosts_ = std::move(hosts);
    pids_ = std::move(pids);
  }
  void set_timeout(double t) { timeout_ = t; }
  void set_wait_limit(double t) { limit_ = t; }
  void set_liveness(const Liveness* l) { liveness_ = l; }
  MPI_Comm handle() const { return comm_; }

  Status all_gather(const void* send, size_t bytes, void* recv) override {
    STRATA_RETURN_IF_ERROR(broken_);
    STRATA_RETURN_IF_ERROR(reap_async());
    Pending p;
    auto* out = static_cast<char*>(recv);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      STRATA_RETURN_IF_ERROR(post_recv(&p, r, out + r * bytes, bytes, kTagGather));
    }
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      STRATA_RETURN_IF_ERROR(post_send(&p, r, send, bytes, kTagGather));
    }
    STRATA_RETURN_IF_ERROR(wait(&p, "all-gather"));
    if (out + rank_ * bytes != send) std::memmove(out + rank_ * bytes, send, bytes);
    return ok_status();
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    STRATA_RETURN_IF_ERROR(broken_);
    STRATA_RETURN_IF_ERROR(reap_async());
    if (root < 0 || root >= size_) return invalid_argument("broadcast: bad root");
    Pending p;
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r)
        if (r != root) STRATA_RETURN_IF_ERROR(post_send(&p, r, data, bytes, kTagBcast));
    } else {
      STRATA_RETURN_IF_ERROR(post_recv(&p, root, data, bytes, kTagBcast));
    }
    return wait(&p, "broadcast");
  }

  Status barrier() override {
    char none = 0;
    std::vector<char> all(size_);
    return all_gather(&none, 1, all.data());
  }

  Status send(int dst, const void* data, size_t bytes) override {
    STRATA_RETURN_IF_ERROR(broken_);
    STRATA_RETURN_IF_ERROR(reap_async());
    if (dst < 0 || dst >= size_ || dst == rank_) return invalid_argument("send: bad destination");
    Pending p;
    STRATA_RETURN_IF_ERROR(post_send(&p, dst, data, bytes, kTagP2P));
    return wait(&p, "send");
  }

  Status recv(int src, void* data, size_t bytes) override {
    STRATA_RETURN_IF_ERROR(broken_);
    STRATA_RETURN_IF_ERROR(reap_async());
    if (src < 0 || src >= size_ || src == rank_) return invalid_argument("recv: bad source");
    Pending p;
    STRATA_RETURN_IF_ERROR(post_recv(&p, src, data, bytes, kTagP2P));
    return wait(&p, "receive");
  }

  Status send_async(int dst, const void* data, size_t bytes) override {
    STRATA_RETURN_IF_ERROR(broken_);
    STRATA_RETURN_IF_ERROR(reap_async());
    if (dst < 0 || dst >= size_ || dst == rank_) return invalid_argument("send: bad destination");
    AsyncSend& a = async_.emplace_back();
    a.buffer.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    a.start = std::chrono::steady_clock::now();
    return post_send(&a.pending, dst, a.buffer.data(), bytes, kTagP2P);
  }

 private:
  struct Op {
    MPI_Request request = MPI_REQUEST_NULL;
    int peer = 0;
    bool is_recv = false;
    int expected = 0;  // bytes (receives)
    bool done = false;
  };
  struct Pending {
    std::vector<Op> ops;
  };

  // A send_async() in flight: its own copy of the bytes and its requests.
  struct AsyncSend {
    std::vector<char> buffer;
    Pending pending;
    std::chrono::steady_clock::time_point start;
  };

  // Forgets the async sends that completed; one still not taken after the timeout breaks the
  // group (its receiver is gone or stuck).
  Status reap_async() {
    for (auto it = async_.begin(); it != async_.end();) {
      bool done = true;
      for (Op& op : it->pending.ops) {
        if (op.done) continue;
        int flag = 0;
        const int rc = MPI_Test(&op.request, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_failure(rc, op.peer, "send");
        if (flag)
          op.done = true;
        else
          done = false;
      }
      if (done) {
        it = async_.erase(it);
        continue;
      }
      if (std::chrono::steady_clock::now() - it->start > std::chrono::duration<double>(timeout_)) {
        // The receiver may be busy (a later pipeline stage computing): only silence or the wait
        // limit ends it.
        if (Status s = check_waiting(&it->pending, "send", it->start); !s.ok()) return s;
      }
      ++it;
    }
    return ok_status();
  }

  Status mpi_failure(int code, int peer, const char* what) {
    broken_ = unavailable("MPI " + std::string(what) + " with " + describe_rank(peer) +
                          " failed: " + mpi_error_text(code));
    return broken_;
  }

  Status post_send(Pending* p, int peer, const void* data, size_t bytes, int tag) {
    const char* d = static_cast<const char*>(data);
    size_t off = 0;
    do {
      const size_t n = std::min(kChunk, bytes - off);
      Op op;
      op.peer = peer;
      const int rc =
          MPI_Isend(d + off, static_cast<int>(n), MPI_BYTE, peer, tag, comm_, &op.request);
      if (rc != MPI_SUCCESS) return mpi_failure(rc, peer, "send");
      p->ops.push_back(op);
      off += n;
    } while (off < bytes);
    return ok_status();
  }

  Status post_recv(Pending* p, int peer, void* data, size_t bytes, int tag) {
    char* d = static_cast<char*>(data);
    size_t off = 0;
    do {
      const size_t n = std::min(kChunk, bytes - off);
      Op op;
      op.peer = peer;
      op.is_recv = true;
      op.expected = static_cast<int>(n);
      const int rc =
          MPI_Irecv(d + off, static_cast<int>(n), MPI_BYTE, peer, tag, comm_, &op.request);
      if (rc != MPI_SUCCESS) return mpi_failure(rc, peer, "receive");
      p->ops.push_back(op);
      off += n;
    } while (off < bytes);
    return ok_status();
  }

  // Polls every operation until all are done or the deadline passes.
  Status wait(Pending* p, const char* what) {
    const auto start = Clock::now();
    struct AddBusy {  // the wait's duration, on every return path
      double* busy;
      Clock::time_point start;
      ~AddBusy() { *busy += std::chrono::duration<double>(Clock::now() - start).count(); }
    } add_busy{&busy_, start};
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(timeout_));
    size_t left = p->ops.size();
    int idle_rounds = 0;
    while (left > 0) {
      bool progressed = false;
      for (Op& op : p->ops) {
        if (op.done) continue;
        int flag = 0;
        MPI_Status st;
        const int rc = MPI_Test(&op.request, &flag, &st);
        if (rc != MPI_SUCCESS) return mpi_failure(rc, op.peer, what);
        if (!flag) continue;
        op.done = true;
        progressed = true;
        --left;
        if (op.is_recv) {
          int count = 0;
          MPI_Get_count(&st, MPI_BYTE, &count);
          if (count != op.expected)
            return broken_ = internal_error(describe_rank(op.peer) + " sent " +
                                            std::to_string(count) + " bytes in a " + what + ", " +
                                            std::to_string(op.expected) + " expected");
        }
      }
      if (left == 0) break;
      if (progressed) {
        idle_rounds = 0;
        continue;
      }
      if (Clock::now() >= deadline) {
        STRATA_RETURN_IF_ERROR(check_waiting(p, what, start));
        // Every rank is alive: wait on, asking again after the next beat.
        deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(liveness_->interval()));
      }
      // Spin briefly (a reply is usually close), then back off to sleeps of up to 1 ms so an
      // idle rank does not hold a core.
      ++idle_rounds;
      if (idle_rounds < 200) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, idle_rounds - 180)));
      }
    }
    return ok_status();
  }

  // A wait past the group's timeout: without a keep-alive it has timed out. With one, the
  // ranks silent for the timeout are named (any rank of the job: a stage waiting on a live
  // neighbour that itself waits on a dead rank learns it here), and a wait on live ranks goes on
  // until the wait limit.
  Status check_waiting(Pending* p, const char* what, Clock::time_point start) {
    if (liveness_ == nullptr) return timed_out(p, what, {}, timeout_, false);
    std::vector<int> silent = liveness_->silent_for(timeout_);
    if (!silent.empty()) return timed_out(p, what, silent, timeout_, false);
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (limit_ > 0 && waited >= limit_) return timed_out(p, what, {}, limit_, true);
    return ok_status();
  }

  // Breaks the group naming `silent_world` (world ranks) or, when empty, the peers of the
  // unfinished operations.
  Status timed_out(Pending* p, const char* what, const std::vector<int>& silent_world, double after,
                   bool alive) {
    std::vector<int> peers;
    for (Op& op : p->ops) {
      if (op.done) continue;
      if (std::find(peers.begin(), peers.end(), op.peer) == peers.end()) peers.push_back(op.peer);
      // Receives can be cancelled; sends to a dead peer stay posted (the group is broken and the
      // process is about to stop).
      if (op.is_recv) {
        MPI_Cancel(&op.request);
        MPI_Request_free(&op.request);
      }
    }
    std::vector<std::pair<int, std::string>> named;  // world rank, host
    if (!silent_world.empty()) {
      for (int w : silent_world) named.emplace_back(w, liveness_->host(w));
    } else {
      for (int r : peers) named.emplace_back(world_ranks_[r], hosts_[r]);
    }
    std::sort(named.begin(), named.end());
    std::string who;
    for (size_t i = 0; i < named.size(); ++i) {
      who += (i == 0 ? "" : (i + 1 == named.size() ? " and " : ", "));
      who += "rank " + std::to_string(named[i].first) + " on host " + named[i].second;
    }
    broken_ = unavailable(
        who + (alive ? " is running but did not answer within " : " did not answer within ") +
        seconds_text(after) + " (" + what + " in the " + name_ +
        (alive ? "; STRATA_DIST_START_TIMEOUT bounds the wait on a busy rank)" : ")"));
    return broken_;
  }

  MPI_Comm comm_;
  std::vector<int> world_ranks_;
  std::vector<std::string> hosts_;
  std::vector<long> pids_;
  double timeout_;
  double limit_ = 0;  // with a keep-alive: the longest wait on live ranks (0: none)
  const Liveness* liveness_ = nullptr;
  double busy_ = 0;  // seconds in wait(): busy_seconds()
  std::string name_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  Status broken_;
  std::list<AsyncSend> async_;  // send_async()s not known to be complete, oldest first
};

Result<std::unique_ptr<MpiWorld>> MpiWorld::init(double timeout_seconds) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return failed_precondition("MPI is already initialized in this process");
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    return unavailable("MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED)
    return unavailable("this MPI library gives no thread support (MPI_THREAD_SERIALIZED needed)");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm dup;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &dup) != MPI_SUCCESS) return unavailable("MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  std::unique_ptr<MpiWorld> w(new MpiWorld());
  int size = 1;
  MPI_Comm_size(dup, &size);
  std::vector<int> ranks(size);
  for (int r = 0; r < size; ++r) ranks[r] = r;
  w->world_ =
      std::make_unique<MpiComm>(dup, ranks, std::vector<std::string>(size, "?"),
                                std::vector<long>(size, 0), timeout_seconds, "world group", true);
  // Where every rank runs.
  constexpr size_t kName = MPI_MAX_PROCESSOR_NAME + 16;
  std::vector<char> mine(kName, 0), all(kName * size, 0);
  int len = 0;
  MPI_Get_processor_name(mine.data(), &len);
  const long pid = static_cast<long>(getpid());
  std::memcpy(mine.data() + MPI_MAX_PROCESSOR_NAME + 4, &pid, sizeof(pid));
  const int32_t level = provided;
  std::memcpy(mine.data() + MPI_MAX_PROCESSOR_NAME + 12, &level, sizeof(level));
  STRATA_RETURN_IF_ERROR(w->world_->all_gather(mine.data(), kName, all.data()));
  std::vector<long> pids(size);
  int32_t lowest_level = provided;  // the thread support of every rank (builds may differ)
  for (int r = 0; r < size; ++r) {
    const char* e = all.data() + r * kName;
    w->hosts_.emplace_back(e, strnlen(e, MPI_MAX_PROCESSOR_NAME));
    std::memcpy(&pids[r], e + MPI_MAX_PROCESSOR_NAME + 4, sizeof(long));
    int32_t level = 0;
    std::memcpy(&level, e + MPI_MAX_PROCESSOR_NAME + 12, sizeof(level));
    lowest_level = std::min(lowest_level, level);
  }
  w->world_->set_where(w->hosts_, pids);
  w->pids_ = pids;
  w->timeout_ = timeout_seconds;
  // The keep-alive needs MPI from a second thread at any time, on every rank (MPI_Comm_dup is
  // collective: all ranks take the same branch).
  if (lowest_level >= MPI_THREAD_MULTIPLE) {
    MPI_Comm beats;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &beats) != MPI_SUCCESS)
      return unavailable("MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(beats, MPI_ERRORS_RETURN);
    w->liveness_ =
        std::make_unique<Liveness>(beats, std::clamp(timeout_seconds / 10, 0.005, 0.25), w->hosts_);
    w->world_->set_liveness(w->liveness_.get());
  }
  return w;
}

MpiWorld::~MpiWorld() {
  tp_.reset();
  pp_.reset();
  world_.reset();
  liveness_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int MpiWorld::rank() const {
  return world_->rank();
}
int MpiWorld::size() const {
  return world_->size();
}
Comm& MpiWorld::world() {
  return *world_;
}
void MpiWorld::set_timeout(double seconds) {
  timeout_ = seconds;
  for (MpiComm* c : {world_.get(), tp_.get(), pp_.get()})
    if (c != nullptr) c->set_timeout(seconds);
}
void MpiWorld::set_wait_limit(double seconds) {
  limit_ = seconds;
  for (MpiComm* c : {world_.get(), tp_.get(), pp_.get()})
    if (c != nullptr) c->set_wait_limit(seconds);
}
bool MpiWorld::has_keep_alive() const {
  return liveness_ != nullptr;
}
void MpiWorld::watch(std::function<void(const std::string&)> on_lost) {
  if (liveness_ != nullptr) liveness_->watch(timeout_, std::move(on_lost));
}

Status MpiWorld::split(ModelParallel* parallel) {
  const int tp = parallel->tp_size, pp = parallel->pp_size;
  if (tp < 1 || pp < 1 || tp * pp != size())
    return invalid_argument("tensor parallel size " + std::to_string(tp) + " x pipeline parallel " +
                            "size " + std::to_string(pp) + " does not match the " +
                            std::to_string(size()) + " MPI ranks");
  const int me = rank();
  parallel->tp_rank = me % tp;
  parallel->pp_rank = me / tp;
  // Everyone is there (with a deadline) before the blocking MPI_Comm_split calls.
  STRATA_RETURN_IF_ERROR(world_->barrier());
  auto make = [&](int color, int key, const char* name, std::unique_ptr<MpiComm>* out) -> Status {
    MPI_Comm c;
    if (MPI_Comm_split(world_->handle(), color, key, &c) != MPI_SUCCESS)
      return unavailable(std::string("MPI_Comm_split of the ") + name + " failed");
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int n = 0;
    MPI_Comm_size(c, &n);
    // The world ranks of the group, in group order (rank r = key r).
    std::vector<int> world_ranks;
    std::vector<std::string> hosts;
    std::vector<long> group_pids;
    for (int w = 0; w < size(); ++w) {
      const int w_color = std::string(name) == "tensor-parallel group" ? w / tp : w % tp;
      if (w_color == color) {
        world_ranks.push_back(w);
        hosts.push_back(hosts_[w]);
        group_pids.push_back(pids_[w]);
      }
    }
    *out = std::make_unique<MpiComm>(c, world_ranks, hosts, group_pids, timeout_, name, true);
    (*out)->set_wait_limit(limit_);
    (*out)->set_liveness(liveness_.get());
    return ok_status();
  };
  STRATA_RETURN_IF_ERROR(make(parallel->pp_rank, parallel->tp_rank, "tensor-parallel group", &tp_));
  STRATA_RETURN_IF_ERROR(
      make(parallel->tp_rank, parallel->pp_rank, "pipeline-parallel group", &pp_));
  parallel->tp = tp > 1 ? tp_.get() : nullptr;
  parallel->pp = pp > 1 ? pp_.get() : nullptr;
  return ok_status();
}

void MpiWorld::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else  // !STRATA_HAVE_MPI

class MpiComm {};
class Liveness {};

Result<std::unique_ptr<MpiWorld>> MpiWorld::init(double) {
  return failed_precondition(
      "this build has no MPI: run scripts/install-deps.sh (it installs OpenMPI: openmpi-bin and "
      "libopenmpi-dev) and rebuild");
}
MpiWorld::~MpiWorld() = default;
int MpiWorld::rank() const {
  return 0;
}
int MpiWorld::size() const {
  return 1;
}
Comm& MpiWorld::world() {
  std::abort();
}
void MpiWorld::set_timeout(double) {}
void MpiWorld::set_wait_limit(double) {}
bool MpiWorld::has_keep_alive() const {
  return false;
}
void MpiWorld::watch(std::function<void(const std::string&)>) {}
Status MpiWorld::split(ModelParallel*) {
  return failed_precondition("this build has no MPI");
}
void MpiWorld::abort(int code) {
  std::_Exit(code);
}

#endif

}  // namespace strata::dist

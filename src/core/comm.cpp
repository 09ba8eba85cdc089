#include "core/comm.h"

#include "core/clock.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

namespace strata {

Status broadcast_string(Comm& comm, std::string* s, int root) {
  uint64_t n = comm.rank() == root ? s->size() : 0;
  STRATA_RETURN_IF_ERROR(comm.broadcast(&n, sizeof(n), root));
  if (comm.rank() != root) s->resize(n);
  if (n == 0) return ok_status();
  return comm.broadcast(s->data(), n, root);
}

namespace {

// The state the threads of a local group share.
struct LocalShared {
  explicit LocalShared(int n) : size(n), slots(n) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  // Barrier: `arrived` ranks in generation `generation`.
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<const void*> slots;  // each rank's send pointer during a collective
  std::map<std::pair<int, int>, std::deque<std::string>> mail;  // (src, dst) -> messages

  void wait_all() {
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != gen; });
  }
};

class LocalComm final : public Comm {
 public:
  LocalComm(std::shared_ptr<LocalShared> shared, int rank)
      : shared_(std::move(shared)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return shared_->size; }
  std::string describe_rank(int r) const override { return "thread " + std::to_string(r); }
  double busy_seconds() const override { return busy_; }

  Status all_gather(const void* send, size_t bytes, void* recv) override {
    const Timed timed(&busy_);
    // Publish, wait for all, copy every slot out, wait until all have copied (the senders'
    // buffers may change after the call).
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->slots[rank_] = send;
    }
    shared_->wait_all();
    // A send buffer that aliases recv + rank * bytes holds the same bytes: copy it last.
    auto* out = static_cast<char*>(recv);
    std::string own(static_cast<const char*>(send), bytes);
    for (int r = 0; r < shared_->size; ++r)
      if (r != rank_) std::memcpy(out + r * bytes, shared_->slots[r], bytes);
    shared_->wait_all();
    std::memcpy(out + rank_ * bytes, own.data(), bytes);
    return ok_status();
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    const Timed timed(&busy_);
    if (root < 0 || root >= size()) return invalid_argument("broadcast: bad root");
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      if (rank_ == root) shared_->slots[root] = data;
    }
    shared_->wait_all();
    if (rank_ != root) std::memcpy(data, shared_->slots[root], bytes);
    shared_->wait_all();
    return ok_status();
  }

  Status barrier() override {
    shared_->wait_all();
    return ok_status();
  }

  Status send(int dst, const void* data, size_t bytes) override {
    if (dst < 0 || dst >= size() || dst == rank_) return invalid_argument("send: bad destination");
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->mail[{rank_, dst}].emplace_back(static_cast<const char*>(data), bytes);
    shared_->cv.notify_all();
    return ok_status();
  }

  Status recv(int src, void* data, size_t bytes) override {
    const Timed timed(&busy_);
    if (src < 0 || src >= size() || src == rank_) return invalid_argument("recv: bad source");
    std::unique_lock<std::mutex> lock(shared_->mu);
    auto& box = shared_->mail[{src, rank_}];
    shared_->cv.wait(lock, [&] { return !box.empty(); });
    std::string m = std::move(box.front());
    box.pop_front();
    if (m.size() != bytes)
      return internal_error("recv: rank " + std::to_string(src) + " sent " +
                            std::to_string(m.size()) + " bytes, " + std::to_string(bytes) +
                            " expected");
    std::memcpy(data, m.data(), bytes);
    return ok_status();
  }

 private:
  // Adds the scope's duration to *total.
  struct Timed {
    explicit Timed(double* total) : total(total), t0(now_seconds()) {}
    ~Timed() { *total += now_seconds() - t0; }
    double* total;
    double t0;
  };
  std::shared_ptr<LocalShared> shared_;
  int rank_;
  double busy_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<Comm>> make_local_group(int n) {
  auto shared = std::make_shared<LocalShared>(n);
  std::vector<std::unique_ptr<Comm>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<LocalComm>(shared, r));
  return out;
}

}  // namespace strata

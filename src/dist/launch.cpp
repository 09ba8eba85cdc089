#include "dist/launch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/file_util.h"
#include "core/strings.h"
#include "dist/mpi_comm.h"
#include "net/interfaces.h"

namespace strata::dist {
namespace {

constexpr const char* kGroup = "Parallelism";

int env_int(const char* name, int def) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  return std::atoi(v);  // SLURM's "2(x3)" reads as 2
}

}  // namespace

void add_parallel_options(OptionSet& o) {
  o.add_int("tensor-parallel-size", 1,
            "tensor-parallel ranks (MPI processes; started with mpirun on this host when not "
            "already run under mpirun or srun)",
            kGroup);
  o.add_int("pipeline-parallel-size", 1,
            "pipeline stages (layer ranges; STRATA_PP_LAYER_PARTITION=a,b,... for uneven ones)",
            kGroup);
  o.add_bool("enable-expert-parallel", false,
             "place whole routed experts on the tensor-parallel ranks (MoE models)", kGroup);
  o.add({.name = "distributed-interface",
         .kind = OptionKind::kString,
         .default_value = "",
         .help = "network interface the ranks talk over (default: STRATA_SOCKET_IFNAME, else "
                 "the one that routes to mpirun's host)",
         .group = kGroup,
         .metavar = "IFACE"});
}

Result<ParallelOptions> parallel_options_from_args(const Args& args) {
  ParallelOptions p;
  const int64_t tp = args.get_int("tensor-parallel-size");
  const int64_t pp = args.get_int("pipeline-parallel-size");
  if (tp < 1) return invalid_argument("--tensor-parallel-size must be at least 1");
  if (pp < 1) return invalid_argument("--pipeline-parallel-size must be at least 1");
  if (tp * pp > 4096)
    return invalid_argument("--tensor-parallel-size x --pipeline-parallel-size is too large");
  p.tensor_parallel_size = static_cast<int>(tp);
  p.pipeline_parallel_size = static_cast<int>(pp);
  p.enable_expert_parallel = args.get_bool("enable-expert-parallel");
  p.interface = args.get("distributed-interface");
  if (p.interface.empty()) {
    if (const char* v = std::getenv("STRATA_SOCKET_IFNAME"); v != nullptr) p.interface = v;
  }
  if (!p.interface.empty()) {
    Status s = check_interface(p.interface);
    if (!s.ok())
      return s.with_context(args.is_set("distributed-interface") ? "--distributed-interface"
                                                                 : "STRATA_SOCKET_IFNAME");
  }
  return p;
}

LaunchEnv detect_launch_env() {
  LaunchEnv e;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) {
    e.launcher = "mpirun";
    e.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1);
    e.world_rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    e.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else if (std::getenv("SLURM_STEP_ID") != nullptr && std::getenv("SLURM_NTASKS") != nullptr &&
             (std::getenv("PMI_RANK") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
              std::getenv("SLURM_PROCID") != nullptr)) {
    e.launcher = "srun";
    e.world_size = env_int("SLURM_NTASKS", 1);
    e.world_rank = env_int("SLURM_PROCID", 0);
    e.local_size = env_int("SLURM_NTASKS_PER_NODE", env_int("SLURM_STEP_TASKS_PER_NODE", 1));
  } else if (std::getenv("PMI_SIZE") != nullptr) {
    e.launcher = "mpirun";
    e.world_size = env_int("PMI_SIZE", 1);
    e.world_rank = env_int("PMI_RANK", 0);
    e.local_size = env_int("MPI_LOCALNRANKS", 1);
  }
  if (e.local_size < 1) e.local_size = 1;
  return e;
}

Status check_interface(const std::string& name) {
  return net::choose_interface(name, net::list_interfaces(), {}, net::route_source_address)
      .status();
}

std::string interface_towards(const std::string& host) {
  struct addrinfo hints {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  struct addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return "";
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr, ip, sizeof(ip));
  freeaddrinfo(res);
  const std::optional<std::string> src = net::route_source_address(ip);
  if (!src) return "";
  for (const net::LocalInterface& i : net::list_interfaces())
    if (i.address == *src) return i.name + " " + i.address;
  return "";
}

Result<std::string> choose_rank_interface(const std::string& requested, std::string* why) {
  const char* uri = std::getenv("OMPI_MCA_orte_hnp_uri");
  STRATA_ASSIGN_OR_RETURN(
      net::InterfaceChoice c,
      net::choose_interface(requested, net::list_interfaces(),
                            net::parse_launcher_addresses(uri != nullptr ? uri : ""),
                            net::route_source_address));
  if (why != nullptr) *why = c.reason;
  return c.name;
}

Status use_interface(const std::string& interface) {
  if (interface.empty()) return ok_status();
  STRATA_RETURN_IF_ERROR(check_interface(interface));
  // MPI's data between hosts (the TCP transport). Its launcher's own connections (oob) are set
  // up before this process starts: mpirun's --mca oob_tcp_if_include, which the self-launch
  // passes.
  setenv("OMPI_MCA_btl_tcp_if_include", interface.c_str(), 1);
  return ok_status();
}

namespace {

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (const auto& dir : split(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    const std::string p = std::string(dir) + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// The last SIGINT/SIGTERM the launching process got, for its wait loop to pass on.
std::atomic<int> g_pending_signal{0};

// Whether process `pid` runs (a zombie, dead but not yet reaped by mpirun, does not).
bool process_runs(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return true;            // /proc hidden (hidepid): kill() said it exists
  const size_t close = stat->rfind(')');  // "pid (comm) S ...": the state follows the name
  return close == std::string::npos || close + 2 >= stat->size() || (*stat)[close + 2] != 'Z';
}

std::string this_host() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

// The self-launch's watch over the ranks while they start MPI (before rank 0's groups exist and
// the keep-alive takes over): a rank that ends, or ranks that do not all get there within the
// bound, end the job with a message naming them.
class StartWatch {
 public:
  StartWatch(std::string run_dir, int n, double bound_seconds)
      : dir_(std::move(run_dir)), pids_(n, 0), bound_(bound_seconds) {}
  // A reason to stop the job, or "".
  std::string check() {
    const auto now = std::chrono::steady_clock::now();
    // A rank that failed on its own (a bad flag: every rank prints it, rank 0 reports a code)
    // is not a lost rank: rank 0's report wins.
    if (file_exists(dir_ + "/exit_code")) return "";
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (pids_[r] == 0) {
        auto text = read_file(dir_ + "/rank" + std::to_string(r) + ".start");
        if (text.ok() && !trim(*text).empty())
          pids_[r] = static_cast<pid_t>(std::atoll(std::string(trim(*text)).c_str()));
        continue;
      }
      if (process_runs(pids_[r])) continue;
      // Gone: give rank 0 a moment to report an exit code of its own first.
      if (gone_since_ == std::chrono::steady_clock::time_point{}) gone_since_ = now;
      if (now - gone_since_ < std::chrono::seconds(2)) return "";
      return "rank " + std::to_string(r) + " on host " + this_host() + " (pid " +
             std::to_string(pids_[r]) + ") ended while the ranks were starting MPI";
    }
    // Ranks that never got as far as recording their pid: bounded. Once every rank runs, the
    // wait for MPI to start is MPI's (and a rank that ends is caught above).
    bool all_started = true;
    for (pid_t p : pids_) all_started = all_started && p != 0;
    if (!all_started && now - start_ > std::chrono::duration<double>(bound_)) {
      std::string missing;
      for (size_t r = 0; r < pids_.size(); ++r)
        if (pids_[r] == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      std::ostringstream b;
      b << bound_;
      return "the ranks did not all start MPI within " + b.str() + " s on host " + this_host() +
             (missing.empty() ? "" : " (ranks that never started: " + missing + ")") +
             " (STRATA_DIST_TIMEOUT)";
    }
    return "";
  }

 private:
  std::string dir_;
  std::vector<pid_t> pids_;
  double bound_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), gone_since_{};
};

}  // namespace

int self_launch(const ParallelOptions& options) {
  const int n = options.world_size();
  const std::string mpirun = find_in_path("mpirun");
  if (mpirun.empty()) {
    std::cerr << "strata: --tensor-parallel-size x --pipeline-parallel-size = " << n
              << " ranks need mpirun, which is not on PATH: run scripts/install-deps.sh (it "
                 "installs OpenMPI) or start the ranks with your own launcher (srun)\n";
    return 2;
  }
  auto cmdline = read_file("/proc/self/cmdline");
  char exe[4096];
  const ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (!cmdline.ok() || exe_len <= 0) {
    std::cerr << "strata: cannot read this process's command line to start the ranks\n";
    return 1;
  }
  std::vector<std::string> args;
  for (size_t b = 0; b < cmdline->size();) {
    size_t e = cmdline->find('\0', b);
    if (e == std::string::npos) e = cmdline->size();
    args.push_back(cmdline->substr(b, e - b));
    b = e + 1;
  }
  // mpirun reads an argument that is exactly ":" as the start of another program's section.
  for (const std::string& a : args)
    if (a == ":") {
      std::cerr << "strata: an argument that is exactly \":\" cannot be passed through mpirun; "
                   "write it differently (e.g. in a JSON or a file)\n";
      return 2;
    }
  std::vector<std::string> argv = {mpirun, "-np", std::to_string(n),
                                   // Each rank runs its own compute threads: no pinning to a core,
                                   // and more ranks than cores is allowed.
                                   "--bind-to", "none", "--oversubscribe",
                                   // A rank that dies does not take mpirun down at once: rank 0
                                   // notices, reports it (naming the rank) and ends the job.
                                   "--enable-recovery"};
  if (getuid() == 0) argv.push_back("--allow-run-as-root");
  if (!options.interface.empty()) {
    for (const char* p : {"btl_tcp_if_include", "oob_tcp_if_include"}) {
      argv.push_back("--mca");
      argv.push_back(p);
      argv.push_back(options.interface);
    }
  }
  argv.push_back(std::string(exe, exe_len));
  for (size_t i = 1; i < args.size(); ++i) argv.push_back(args[i]);

  char dir_template[] = "/tmp/strata-dist-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::cerr << "strata: cannot create a temporary folder: " << std::strerror(errno) << "\n";
    return 1;
  }
  const std::string run_dir = dir_template;
  setenv("STRATA_DIST_RUN_DIR", run_dir.c_str(), 1);

  std::string shown;
  for (const auto& a : argv) shown += (shown.empty() ? "" : " ") + a;
  std::cerr << "strata: starting " << n << " ranks on this host: " << shown << "\n";

  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    std::cerr << "strata: fork failed: " << std::strerror(errno) << "\n";
    return 1;
  }
  if (child == 0) {
    // Its own process group: a terminal's Ctrl-C reaches this process only, which passes it to
    // rank 0 for a graceful shutdown (mpirun would kill every rank at once).
    setpgid(0, 0);
    // When this process dies without passing a signal on (kill -9, a crash), mpirun and its ranks
    // are stopped too instead of keeping the port.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    execv(cargv[0], cargv.data());
    std::fprintf(stderr, "strata: cannot run %s: %s\n", cargv[0], std::strerror(errno));
    _exit(127);
  }
  struct sigaction sa {};
  sa.sa_handler = [](int sig) { g_pending_signal = sig; };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // the terminal or ssh session closed
  // Waits for mpirun, passing SIGINT/SIGTERM/SIGHUP on: to rank 0 once it has written its pid (it
  // shuts down gracefully and stops the others), to mpirun before that.
  pid_t rank0 = 0;
  int status = 0;
  // Until rank 0 has its groups (rank0.pid), a rank lost while MPI starts would leave the others
  // waiting inside MPI_Init: watched here. Afterwards rank 0's keep-alive and deadlines name a
  // lost rank and end the job.
  const Result<double> timeout = dist_timeout_seconds();
  StartWatch watch(run_dir, n, std::max(10.0, timeout.ok() ? *timeout : 30.0));
  bool stopping = false;
  for (;;) {
    if (rank0 == 0) {
      auto pid_text = read_file(run_dir + "/rank0.pid");
      if (pid_text.ok() && !trim(*pid_text).empty())
        rank0 = static_cast<pid_t>(std::atoll(std::string(trim(*pid_text)).c_str()));
    }
    if (rank0 == 0 && !stopping) {
      if (const std::string why = watch.check(); !why.empty()) {
        std::cerr << "strata: " << why << "; stopping the job\n";
        stopping = true;
        kill(child, SIGTERM);  // mpirun ends every rank
      }
    }
    if (const int sig = g_pending_signal.exchange(0); sig != 0)
      kill(rank0 > 0 ? rank0 : child, sig == SIGHUP ? SIGTERM : sig);  // a graceful stop
    const pid_t w = waitpid(child, &status, WNOHANG);
    if (w == child || (w < 0 && errno != EINTR)) break;
    usleep(20 * 1000);
  }
  int code = 1;
  auto reported = read_file(run_dir + "/exit_code");
  if (reported.ok() && !trim(*reported).empty()) {
    code = std::atoi(std::string(trim(*reported)).c_str());
    if (stopping && code == 0) code = 1;  // stopped here: never a success
  } else if (stopping) {
    // The job was stopped here; the reason is printed above.
  } else {
    std::cerr << "strata: rank 0 ended without reporting an exit code (mpirun "
              << (WIFEXITED(status) ? "exited with " + std::to_string(WEXITSTATUS(status))
                                    : "was killed by signal " + std::to_string(WTERMSIG(status)))
              << ")\n";
  }
  unlink((run_dir + "/rank0.pid").c_str());
  unlink((run_dir + "/exit_code").c_str());
  for (int r = 0; r < n; ++r) unlink((run_dir + "/rank" + std::to_string(r) + ".start").c_str());
  rmdir(run_dir.c_str());
  return code;
}

void report_started() {
  const char* dir = std::getenv("STRATA_DIST_RUN_DIR");
  const LaunchEnv env = detect_launch_env();
  if (dir == nullptr || *dir == '\0' || !env.under_launcher()) return;
  const std::string path = std::string(dir) + "/rank" + std::to_string(env.world_rank) + ".start";
  // Written whole, then renamed: the launching process reads it while it waits.
  if (write_file(path + ".tmp", std::to_string(getpid()) + "\n").ok())
    std::rename((path + ".tmp").c_str(), path.c_str());
}

void report_exit_code(int code) {
  const char* dir = std::getenv("STRATA_DIST_RUN_DIR");
  if (dir == nullptr || *dir == '\0') return;
  std::ofstream(std::string(dir) + "/exit_code") << code << "\n";
}

}  // namespace strata::dist

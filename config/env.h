// Every environment variable topocoll reads, in one table — name, grammar
// (config/value_grammar.h), default, one doc line — read once per process into one Env.
// The interposer, the tuner and the net plugin (through plugin/process_context.h), and the
// CLI, exec/, net/, fabric/ and accept/ all read their settings from it; nothing else calls
// getenv. `topocoll env` prints the table with this environment's values; docs/usage.md
// lists exactly its TOPOCOLL_* variables (a test checks both ways).
//
// A bad value is one warning naming the variable, the value, what was expected and the
// value used instead (`TOPOCOLL_NET_RENDEZVOUS="maybe": expected 1/0, true/false, yes/no or
// on/off; using 1`), through config/warnings.h once per process; the default is then used.
// Where guessing would be wrong (a rank number) the value is refused instead: whatever needs
// it fails with that same text.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace topocoll::config {

enum class Grammar : uint8_t { Bool, Count, Size, Number, Choice, Text, Marks };

// Whose variable it is: topocoll's own (TOPOCOLL_*), or another program's that topocoll
// also reads (NCCL's, CUDA's, a launcher's, the system's).
enum class Owner : uint8_t { Topocoll, Nccl, Cuda, Launcher, System };
std::string_view to_string(Owner owner);

struct EnvVariable {
  std::string_view name{};
  Owner owner = Owner::Topocoll;
  Grammar grammar = Grammar::Text;
  std::string_view default_value{};  // in the variable's grammar; "" = unset by default
  std::string_view unset_means{};    // what unset does, where there is no default value
  std::string_view doc{};            // one line: what it changes
  int64_t min = 0, max = 0;          // Count, Size: the accepted range
  bool zero_is_off = false;          // Size: 0 is accepted besides [min, max]
  double min_number = 0, max_number = 0;         // Number
  std::span<const std::string_view> choices{};   // Choice
  // A bad value is refused, not replaced: whatever reads it fails naming it (a rank number
  // guessed would join the wrong rank; a fabric's memory limit guessed could exhaust it).
  bool bad_is_error = false;
  // Read from the environment alone, never from NCCL's configuration files: it decides what
  // root trusts, runs or removes, and NCCL_CONF_FILE or ~/.nccl.conf may be another user's.
  bool environment_only = false;
};

// The table, in the order `topocoll env` and the warnings list it.
std::span<const EnvVariable> env_variables();
const EnvVariable* find_env_variable(std::string_view name);  // null when not in the table

using EnvValue = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<uint32_t>>;

// A value of `variable`'s grammar: the value, or what was expected.
struct ParsedEnvValue {
  EnvValue value;  // monostate when bad
  std::string expected;
};
ParsedEnvValue parse_env_value(const EnvVariable& variable, std::string_view text);

// One variable as this process has it.
struct EnvSetting {
  const EnvVariable* variable = nullptr;
  std::optional<std::string> text;  // trimmed; none when unset or only whitespace
  std::string problem;              // the warning (or error) when `text` is bad; "" otherwise
  EnvValue value;                   // `text` parsed, else the default's, else monostate
  bool from_nccl_conf = false;      // set in NCCL's configuration files, not the environment
  bool is_set() const { return text.has_value(); }
};

struct Env {
  // ---- Typed values, each named after its variable (docs/usage.md says what each does).
  // Topology and host.
  std::string topo_file;            // TOPOCOLL_TOPO_FILE; "" = none
  std::string hostname;             // TOPOCOLL_HOSTNAME; "" = unset (config/local_host.h)
  std::string nccl_hostid;          // NCCL_HOSTID
  // Interposer.
  bool enable = false;              // TOPOCOLL_ENABLE
  std::string algo;                 // TOPOCOLL_ALGO: one of config/algorithm_names.h
  int64_t min_bytes = 0;            // TOPOCOLL_MIN_BYTES
  int64_t max_bytes = 0;            // TOPOCOLL_MAX_BYTES; INT64_MAX when unset
  int64_t step_overhead_us = 0;     // TOPOCOLL_STEP_OVERHEAD_US
  double auto_margin = 0;           // TOPOCOLL_AUTO_MARGIN
  int64_t scratch_max_bytes = 0;    // TOPOCOLL_SCRATCH_MAX_BYTES
  int64_t plan_cache_bytes = 0;     // TOPOCOLL_PLAN_CACHE_BYTES
  std::string ring_comm;            // TOPOCOLL_RING_COMM: init | lazy | off
  bool step_times = false;          // TOPOCOLL_STEP_TIMES
  int64_t init_timeout_s = 0;       // TOPOCOLL_INIT_TIMEOUT_S; 0 = no limit
  int64_t vote_timeout_s = 0;       // TOPOCOLL_VOTE_TIMEOUT_S; 0 = no limit
  std::string nccl_comm_blocking;   // NCCL_COMM_BLOCKING
  std::string nccl_comm_split_share_resources;  // NCCL_COMM_SPLIT_SHARE_RESOURCES
  std::string nccl_check_pointers;  // NCCL_CHECK_POINTERS
  std::string cuda_visible_devices; // CUDA_VISIBLE_DEVICES
  // Pipelining (exec/pipeline.h).
  std::optional<int64_t> pipeline_chunk_bytes;  // TOPOCOLL_PIPELINE_CHUNK_BYTES; none: the backend's
  int pipeline_max_chunks = 0;      // TOPOCOLL_PIPELINE_MAX_CHUNKS
  // Tuner.
  bool tuner = false;               // TOPOCOLL_TUNER
  std::string tuner_hosts;          // TOPOCOLL_TUNER_HOSTS; "" = none
  std::string nccl_algo, nccl_proto;  // NCCL_ALGO, NCCL_PROTO
  // Net plugin and socket transport (net/transport_options.h).
  std::string net_ifname;           // TOPOCOLL_NET_IFNAME
  std::string nccl_socket_ifname;   // NCCL_SOCKET_IFNAME
  std::string nccl_comm_id;         // NCCL_COMM_ID
  std::string nccl_topo_file;       // NCCL_TOPO_FILE
  std::string net_plane_addrs;      // TOPOCOLL_NET_PLANE_ADDRS
  std::optional<int> net_sockets_per_conn;  // TOPOCOLL_NET_SOCKETS_PER_CONN; none: the face's default
  std::optional<int> net_threads;   // TOPOCOLL_NET_THREADS; none: the face's default
  int net_timeout_ms = 0;           // TOPOCOLL_NET_TIMEOUT_MS
  std::optional<int> net_stall_timeout_ms;  // TOPOCOLL_NET_STALL_TIMEOUT_MS; none: the face's
  int64_t net_chunk_bytes = 0;      // TOPOCOLL_NET_CHUNK_BYTES
  bool net_chunk_bytes_set = false;  // given, not the default (the net plugin's one-socket chunk)
  int64_t net_min_stripe_bytes = 0; // TOPOCOLL_NET_MIN_STRIPE_BYTES
  int64_t net_eager_bytes = 0;      // TOPOCOLL_NET_EAGER_BYTES
  bool net_rendezvous = false;      // TOPOCOLL_NET_RENDEZVOUS
  std::vector<uint32_t> net_lane_marks;  // TOPOCOLL_NET_LANE_MARKS
  // Launchers (exec/rank_environment.h reads the rank and size variables in their order).
  std::string bootstrap;            // TOPOCOLL_BOOTSTRAP
  bool bootstrap_served = false;    // TOPOCOLL_BOOTSTRAP_SERVED
  std::string master_addr, master_port;  // MASTER_ADDR, MASTER_PORT
  // Emulated fabric.
  std::string fabric_state_dir;     // TOPOCOLL_FABRIC_STATE_DIR
  std::string fabric_iproute2;      // TOPOCOLL_FABRIC_IPROUTE2; "" = PATH and the system's (fabric/iproute2.h)
  // NCCL's logging, which the interposer's stderr lines follow (plugin/log.h).
  std::string nccl_debug, nccl_debug_subsys;  // NCCL_DEBUG, NCCL_DEBUG_SUBSYS
  std::string path;                 // PATH
  std::string sudo_uid;             // SUDO_UID (config/trusted_paths.h)
  std::string tmpdir;               // TMPDIR (exec/private_conversion.h)
  std::string trusted_uids;         // TOPOCOLL_TRUSTED_UIDS (config/trusted_paths.h)

  // ---- Every variable of the table as read, in table order.
  std::vector<EnvSetting> settings;
  // std::out_of_range for a name the table does not have.
  const EnvSetting& setting(std::string_view name) const;
  // The first of `names` that is set (a launcher's precedence list); null when none is.
  const EnvSetting* first_set(std::initializer_list<std::string_view> names) const;
  // The warnings, one per bad value (and per pair that contradicts itself), in table order.
  // Values that are refused instead (EnvVariable::bad_is_error) are not among them.
  std::vector<std::string> warnings;
};

// Where values come from: the process environment, or a map (tests, fuzzing).
using EnvSource = std::function<std::optional<std::string>(std::string_view name)>;
Env read_env_from(const EnvSource& source);
Env read_env(const std::map<std::string, std::string, std::less<>>& values);

// The process's environment, read on first use, with NCCL's configuration files for what it
// does not set (config/nccl_conf.h). Its warnings go to the warning sink (config/warnings.h)
// once, right after that first read.
const Env& env();

}  // namespace topocoll::config

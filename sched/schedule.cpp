#include "sched/schedule.h"

namespace topocoll::sched {

std::string_view abbreviation(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "AR";
    case Collective::ReduceScatter: return "RS";
    case Collective::AllGather: return "AG";
    case Collective::AllToAll: return "A2A";
  }
  return "?";
}

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AllGather: return "allgather";
    case Collective::AllToAll: return "alltoall";
  }
  return "?";
}

std::string_view to_string(Buf b) {
  switch (b) {
    case Buf::Input: return "input";
    case Buf::Output: return "output";
    case Buf::Scratch: return "scratch";
  }
  return "?";
}

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::Send: return "send";
    case OpKind::Recv: return "recv";
    case OpKind::Reduce: return "reduce";
    case OpKind::Copy: return "copy";
    case OpKind::Finalize: return "finalize";
  }
  return "?";
}

}  // namespace topocoll::sched

#include "tests/emu/nccl_emu_collectives.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/avg_scalar.h"
#include "kernels/reduce_cpu.h"

namespace topocoll::emu {
namespace {

namespace k = topocoll::kernels;

std::size_t element_size(ncclDataType_t type) {
  return k::datatype_size(static_cast<k::DataType>(type));
}

std::string describe_call(const char* name, const ncclComm* comm, std::size_t count,
                          ncclDataType_t type) {
  return std::string(name) + " rank " + std::to_string(comm->rank) + "/" +
         std::to_string(comm->nranks) + " count " + std::to_string(count) + " " +
         std::string(k::datatype_name(static_cast<k::DataType>(type)));
}

const std::byte* at(const void* base, std::size_t offset) {
  return static_cast<const std::byte*>(base) + offset;
}
std::byte* at(void* base, std::size_t offset) { return static_cast<std::byte*>(base) + offset; }

// dst = c[0] op c[1] op ... op c[P-1], folded left to right; reduce_cpu takes at most
// kMaxReduceInputs sources, so later chunks continue from the partial result in dst.
void reduce_in_rank_order(ncclDataType_t type, ncclRedOp_t op, void* dst,
                          const std::vector<const std::byte*>& contributions,
                          std::size_t count) {
  const auto t = static_cast<k::DataType>(type);
  const auto o = static_cast<k::ReduceOp>(op);
  // NCCL's Avg on floating types is PreMulSum: each contribution times 1/nranks first
  // (kernels/avg_scalar.h).
  std::vector<std::vector<std::byte>> premultiplied;
  std::vector<const std::byte*> scaled;
  if (o == k::ReduceOp::Avg && k::avg_premultiplies(t)) {
    for (const std::byte* c : contributions) {
      premultiplied.emplace_back(count * k::datatype_size(t));
      k::avg_premul_cpu(t, premultiplied.back().data(), c, count, int(contributions.size()));
      scaled.push_back(premultiplied.back().data());
    }
  }
  const std::vector<const std::byte*>& inputs = scaled.empty() ? contributions : scaled;
  std::vector<const void*> sources;
  std::size_t next = 0;
  while (next < inputs.size()) {
    sources.clear();
    if (next > 0) sources.push_back(dst);
    while (next < inputs.size() && int(sources.size()) < k::kMaxReduceInputs)
      sources.push_back(inputs[next++]);
    k::reduce_cpu(t, o, dst, sources.data(), int(sources.size()), count);
  }
  k::finalize_cpu(t, o, dst, count, int(contributions.size()));
}

// Receives one `bytes` block from every rank into op-owned storage, then reduces them.
void receive_and_reduce(Exchange& x, const ncclComm* comm, void* dst, std::size_t count,
                        ncclDataType_t type, ncclRedOp_t op) {
  const std::size_t bytes = count * element_size(type);
  std::vector<const std::byte*> contributions;
  for (int p = 0; p < comm->nranks; ++p) {
    std::byte* block = x.scratch(bytes);
    x.receive(p, block, bytes);
    contributions.push_back(block);
  }
  x.writes(dst, bytes);
  x.then([=] { reduce_in_rank_order(type, op, dst, contributions, count); });
}

}  // namespace

std::shared_ptr<Exchange> all_reduce(const ncclComm* comm, const void* send, void* recv,
                                     std::size_t count, ncclDataType_t type, ncclRedOp_t op) {
  auto x = std::make_shared<Exchange>(describe_call("AllReduce", comm, count, type), comm,
                                      Channel::Collective);
  const std::size_t bytes = count * element_size(type);
  for (int p = 0; p < comm->nranks; ++p) x->send(p, send, bytes);
  receive_and_reduce(*x, comm, recv, count, type, op);
  return x;
}

std::shared_ptr<Exchange> reduce_scatter(const ncclComm* comm, const void* send, void* recv,
                                         std::size_t count, ncclDataType_t type,
                                         ncclRedOp_t op) {
  auto x = std::make_shared<Exchange>(describe_call("ReduceScatter", comm, count, type), comm,
                                      Channel::Collective);
  const std::size_t bytes = count * element_size(type);
  for (int p = 0; p < comm->nranks; ++p) x->send(p, at(send, std::size_t(p) * bytes), bytes);
  receive_and_reduce(*x, comm, recv, count, type, op);
  return x;
}

std::shared_ptr<Exchange> all_gather(const ncclComm* comm, const void* send, void* recv,
                                     std::size_t count, ncclDataType_t type) {
  auto x = std::make_shared<Exchange>(describe_call("AllGather", comm, count, type), comm,
                                      Channel::Collective);
  const std::size_t bytes = count * element_size(type);
  for (int p = 0; p < comm->nranks; ++p) x->send(p, send, bytes);
  for (int p = 0; p < comm->nranks; ++p) x->receive(p, at(recv, std::size_t(p) * bytes), bytes);
  return x;
}

std::shared_ptr<Exchange> all_to_all(const ncclComm* comm, const void* send, void* recv,
                                     std::size_t count, ncclDataType_t type) {
  auto x = std::make_shared<Exchange>(describe_call("AlltoAll", comm, count, type), comm,
                                      Channel::Collective);
  const std::size_t bytes = count * element_size(type);
  for (int p = 0; p < comm->nranks; ++p) x->send(p, at(send, std::size_t(p) * bytes), bytes);
  for (int p = 0; p < comm->nranks; ++p) x->receive(p, at(recv, std::size_t(p) * bytes), bytes);
  return x;
}

std::shared_ptr<Exchange> broadcast(const ncclComm* comm, const void* send, void* recv,
                                    std::size_t count, ncclDataType_t type, int root) {
  auto x = std::make_shared<Exchange>(describe_call("Broadcast", comm, count, type) + " root " +
                                          std::to_string(root),
                                      comm, Channel::Collective);
  const std::size_t bytes = count * element_size(type);
  if (comm->rank == root)
    for (int p = 0; p < comm->nranks; ++p) x->send(p, send, bytes);
  x->receive(root, recv, bytes);
  return x;
}

std::shared_ptr<Exchange> reduce(const ncclComm* comm, const void* send, void* recv,
                                 std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                                 int root) {
  auto x = std::make_shared<Exchange>(describe_call("Reduce", comm, count, type) + " root " +
                                          std::to_string(root),
                                      comm, Channel::Collective);
  x->send(root, send, count * element_size(type));
  if (comm->rank == root) receive_and_reduce(*x, comm, recv, count, type, op);
  return x;
}

std::shared_ptr<Exchange> send(const ncclComm* comm, const void* data, std::size_t count,
                               ncclDataType_t type, int peer) {
  auto x = std::make_shared<Exchange>(describe_call("Send", comm, count, type) + " peer " +
                                          std::to_string(peer),
                                      comm, Channel::User);
  x->send(peer, data, count * element_size(type));
  return x;
}

std::shared_ptr<Exchange> recv(const ncclComm* comm, void* data, std::size_t count,
                               ncclDataType_t type, int peer) {
  auto x = std::make_shared<Exchange>(describe_call("Recv", comm, count, type) + " peer " +
                                          std::to_string(peer),
                                      comm, Channel::User);
  x->receive(peer, data, count * element_size(type));
  return x;
}

}  // namespace topocoll::emu

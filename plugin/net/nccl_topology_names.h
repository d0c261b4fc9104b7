// Keeps the net face's device names apart from the <net> elements of NCCL's own topology file
// (NCCL_TOPO_FILE). NCCL looks a device up in that XML by name (graph/xml.cc, ncclTopoFillNet)
// and keeps every attribute the file set (graph/topo.cc, ncclTopoPopulateNics: xmlInitAttrInt),
// so a vendor file describing InfiniBand NICs named like the topology's (mlx5_0, ...) would
// give this TCP, host-memory device their gdr="1": NCCL would then register GPU memory with
// it, which it cannot take, and the job would fail at connection setup.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace topocoll::plugin {

// The name attributes of every <net ...> element of an NCCL topology XML text.
std::set<std::string> net_names_in_nccl_topology(std::string_view xml);

// The name NCCL is told for each device: its own, or where `taken` holds it, the name with
// "-topocoll" appended (and a number, should that be taken too). Names stay distinct.
std::vector<std::string> names_apart_from(const std::vector<std::string>& names, const std::set<std::string>& taken);

}  // namespace topocoll::plugin

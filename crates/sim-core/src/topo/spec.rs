//! A topology as a scenario writes it: the table form (nodes, full-duplex links, routing
//! knobs; [`TopologyTable`]) and the `topology` entry that is a preset name or such a table
//! ([`TopologyInput`]). [`super::Topology::from_input`] validates and resolves it.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// The largest link latency accepted, µs (1,000 s): routing sums latencies as integer
/// picoseconds, which a larger value (say 1e308) would overflow.
pub const MAX_LATENCY_US: f64 = 1e9;

/// Node kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Gpu,
    Nvswitch,
    Host,
    Nic,
    Switch,
}

/// Link kinds (informational: costs come from `bandwidth_gbps` and `latency_us`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    Nvlink,
    Nvswitch,
    Pcie,
    Ib,
    Eth,
    /// A TPU's inter-chip interconnect.
    Ici,
}

/// One node of the table form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Unique id (`gpu0`, `n1.nic3`, `ib0`).
    pub id: String,
    pub kind: NodeKind,
    /// GPUs only: the catalog GPU (informational; the scenario's `gpu` prices the steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
}

/// One full-duplex link of the table form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub src: String,
    pub dst: String,
    pub kind: LinkKind,
    /// GB/s per direction, > 0.
    pub bandwidth_gbps: f64,
    /// One traversal, µs, > 0.
    pub latency_us: f64,
}

/// RTMPv2 knobs (all optional in the input).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingSpec {
    /// Weight of bandwidth against latency in the score, [0, 1]. DESIGN: 0.65.
    pub alpha: f64,
    /// Candidate paths per GPU pair (k shortest by latency), 1..=16.
    pub k_paths: u32,
    /// A route is replaced only when beaten by more than this fraction (0.03 = 3%).
    pub hysteresis: f64,
    /// Split each KV transfer (`disagg`) over every path of its GPU pair's Pareto frontier,
    /// in proportion to their bottleneck bandwidths, instead of sending it all on the chosen
    /// route. Off by default.
    #[serde(skip_serializing_if = "is_false")]
    pub multipath_kv: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for RoutingSpec {
    fn default() -> Self {
        RoutingSpec { alpha: 0.65, k_paths: 4, hysteresis: 0.03, multipath_kv: false }
    }
}

/// Table form of a topology.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyTable {
    /// Preset to start from; `nodes` and `links` extend it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    #[serde(default)]
    pub nodes: Vec<NodeSpec>,
    #[serde(default)]
    pub links: Vec<LinkSpec>,
    #[serde(default)]
    pub routing: RoutingSpec,
}

/// A scenario's `topology` entry: a preset name or a table.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TopologyInput {
    Preset(String),
    Table(TopologyTable),
}

struct InputVisitor;

impl<'de> Visitor<'de> for InputVisitor {
    type Value = TopologyInput;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a topology preset name (string) or a table {preset?, nodes, links}")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<TopologyInput, E> {
        Ok(TopologyInput::Preset(v.to_string()))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<TopologyInput, A::Error> {
        TopologyTable::deserialize(de::value::MapAccessDeserializer::new(map)).map(TopologyInput::Table)
    }
}

impl<'de> Deserialize<'de> for TopologyInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(InputVisitor)
    }
}

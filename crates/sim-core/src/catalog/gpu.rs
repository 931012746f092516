//! The GPU record and its presets.
//!
//! Every figure the step model needs about a GPU is a field of its record (peaks, memory,
//! clocks, the block-table descriptor cache, its links, which profile prices it), so that
//! nothing is guessed from a GPU's name.

use serde::{Deserialize, Serialize};

use super::checks::{at_least_one, fraction};
use crate::error::{check, Result, SimError};

/// What prices a GPU's operators when no `cost_model.profile` is given: a shipped calibration
/// profile (by its name) or, with [`ROOFLINE`], the datasheet roofline.
pub const ROOFLINE: &str = "roofline";

/// The matrix unit of an accelerator, which sets the tile its GEMMs are padded to (seed §2.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatrixUnit {
    /// CUDA tensor cores (every GPU preset): 16×16 tiles.
    #[default]
    TensorCore,
    /// A TPU's matrix-multiply units, with the seed's 8×8 tile (a TPU v5e's MXU is 128×128
    /// in fact: the seed's rule understates its padding).
    Mxu,
}

impl MatrixUnit {
    fn is_tensor_core(&self) -> bool {
        *self == MatrixUnit::TensorCore
    }
}

/// One accelerator: its datasheet peaks, the fraction of them real kernels reach, and what
/// prices its operators. A TPU is one too (`matrix_unit = "mxu"`): its ICI is its
/// `nvlink_gbps`, its MXUs its `sms`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gpu {
    /// Preset or user-chosen name (e.g. `h100`).
    pub name: String,
    /// Dense (no sparsity) BF16 tensor-core peak, TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense FP8 tensor-core peak, TFLOP/s; 0 when the part has no FP8 tensor cores.
    pub fp8_tflops: f64,
    /// Device memory visible to the framework, GiB (2³⁰ bytes).
    pub hbm_gib: f64,
    /// Peak device-memory bandwidth, TB/s (10¹² bytes/s).
    pub hbm_tbps: f64,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Per-GPU bidirectional NVLink bandwidth, GB/s (10⁹ bytes/s); parts without NVLink give
    /// their PCIe rate. Each direction carries half of it.
    pub nvlink_gbps: f64,
    /// GPUs one NVLink domain joins: 8 on an HGX board, 2 for PCIe cards joined by NVLink
    /// bridges in pairs, 1 without NVLink. A replica of more GPUs (`tp · pp`) talks over PCIe.
    pub nvlink_gpus: u32,
    /// Per-GPU bidirectional PCIe bandwidth to the host and its peers, GB/s.
    pub pcie_gbps: f64,
    /// Boost SM clock, MHz: turns the descriptor-cache miss cycles into time.
    pub sm_clock_mhz: f64,
    /// Entries of the block-table descriptor cache per sequence (seed §2.5).
    pub descriptor_cache_entries: u32,
    /// SM cycles one descriptor-cache miss costs (seed §2.5).
    pub descriptor_miss_cycles: f64,
    /// Fraction of `bf16_tflops` reached by large GEMMs, in (0, 1].
    pub compute_efficiency: f64,
    /// Fraction of `hbm_tbps` reached by streaming kernels, in (0, 1].
    pub memory_efficiency: f64,
    /// What prices its operators: the name of a shipped calibration profile
    /// ([`crate::calib::PROFILED_GPUS`]) or `roofline` (the datasheet peaks above at their
    /// efficiencies).
    pub priced_by: String,
    /// The matrix unit: tensor cores (GPUs) or a TPU's MXUs. Not written for tensor cores, so
    /// a GPU's record reads as before.
    #[serde(skip_serializing_if = "MatrixUnit::is_tensor_core")]
    pub matrix_unit: MatrixUnit,
}

impl Gpu {
    /// Whether this GPU is at least as capable as `other` in every datasheet figure a step
    /// or a deployment depends on: BF16 and FP8 compute, memory bandwidth and size, and its
    /// links (NVLink bandwidth and domain, PCIe). Such a GPU never runs a step slower (the
    /// step model bounds its operators by the other's, `perf`).
    pub fn dominates(&self, other: &Gpu) -> bool {
        self.bf16_tflops >= other.bf16_tflops
            && self.fp8_tflops >= other.fp8_tflops
            && self.hbm_tbps >= other.hbm_tbps
            && self.hbm_gib >= other.hbm_gib
            && self.nvlink_gbps >= other.nvlink_gbps
            && self.nvlink_gpus >= other.nvlink_gpus
            && self.pcie_gbps >= other.pcie_gbps
    }

    /// Check every field; error paths are relative (`hbm_gib`), callers prefix them (`gpu`).
    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            return Err(SimError::config("name", "must not be empty"));
        }
        check::positive("bf16_tflops", self.bf16_tflops)?;
        check::non_negative("fp8_tflops", self.fp8_tflops)?;
        check::positive("hbm_gib", self.hbm_gib)?;
        check::positive("hbm_tbps", self.hbm_tbps)?;
        at_least_one("sms", self.sms)?;
        check::positive("nvlink_gbps", self.nvlink_gbps)?;
        at_least_one("nvlink_gpus", self.nvlink_gpus)?;
        check::positive("pcie_gbps", self.pcie_gbps)?;
        check::positive("sm_clock_mhz", self.sm_clock_mhz)?;
        at_least_one("descriptor_cache_entries", self.descriptor_cache_entries)?;
        check::non_negative("descriptor_miss_cycles", self.descriptor_miss_cycles)?;
        fraction("compute_efficiency", self.compute_efficiency)?;
        fraction("memory_efficiency", self.memory_efficiency)?;
        if self.priced_by != ROOFLINE && !crate::calib::PROFILED_GPUS.contains(&self.priced_by.as_str()) {
            let mut valid = crate::calib::PROFILED_GPUS.to_vec();
            valid.push(ROOFLINE);
            return Err(check::unknown_name("priced_by", "profile", &self.priced_by, &valid));
        }
        Ok(())
    }

    /// The shipped profile that prices this GPU, if any (`None` = roofline).
    pub fn profile_name(&self) -> Option<&str> {
        (self.priced_by != ROOFLINE).then_some(self.priced_by.as_str())
    }

    /// Bandwidth (GB/s, bidirectional) of the link a replica of `gpus` GPUs communicates
    /// over: NVLink while the replica fits one NVLink domain, else PCIe.
    pub fn link_gbps(&self, gpus: u32) -> f64 {
        if gpus <= self.nvlink_gpus {
            self.nvlink_gbps
        } else {
            self.pcie_gbps
        }
    }
}

/// 48 GB (decimal, as NVIDIA's L40S datasheet states it) expressed in GiB.
const L40S_GIB: f64 = 48.0e9 / 1_073_741_824.0;

/// The GPU presets.
///
/// Sources (dense, i.e. without 2:4 sparsity; boost clocks; PCIe figures bidirectional):
/// * `a100-80g` (SXM4): NVIDIA A100 Tensor Core GPU datasheet (BF16 312 TFLOP/s, 80 GB
///   HBM2e, 2,039 GB/s, NVLink 600 GB/s, PCIe Gen4 64 GB/s) and the A100 architecture
///   whitepaper (108 SMs, 1,410 MHz boost). No FP8 tensor cores.
/// * `a100-40g` (SXM4): the same datasheet's 40 GB HBM2 column: 1,555 GB/s, otherwise as
///   `a100-80g`.
/// * `a100-80g-pcie`: the datasheet's A100 80GB PCIe column: 1,935 GB/s, NVLink bridge
///   600 GB/s joining two GPUs, PCIe Gen4 64 GB/s.
/// * `h100` (SXM5): NVIDIA H100 Tensor Core GPU datasheet (BF16 989.4 / FP8 1,978.9 TFLOP/s
///   dense, 80 GB HBM3, 3.35 TB/s, NVLink 900 GB/s, PCIe Gen5 128 GB/s) and the Hopper
///   whitepaper (132 SMs, 1,980 MHz boost).
/// * `h100-pcie`: the Hopper whitepaper's H100 PCIe column (114 SMs, 1,755 MHz boost, BF16
///   756 / FP8 1,513 TFLOP/s dense) and the H100 datasheet (80 GB HBM2e at 2.0 TB/s,
///   NVLink bridge 600 GB/s joining two GPUs, PCIe Gen5 128 GB/s).
/// * `h100-nvl`: the H100 datasheet's H100 NVL column, per GPU (BF16 1,671 / FP8 3,341
///   TFLOP/s with sparsity, i.e. 835.5 / 1,670.5 dense; 94 GB HBM3 at 3.9 TB/s; NVLink
///   bridge 600 GB/s joining two GPUs; PCIe Gen5 128 GB/s); 132 SMs at 1,785 MHz boost.
/// * `h200`: NVIDIA H200 datasheet, SXM (same tensor cores as H100, 141 GB HBM3e, 4.8 TB/s,
///   NVLink 900 GB/s). Memory is our own measurement: 139.8 GiB visible to PyTorch; our
///   H200 reports a 1,980 MHz maximum SM clock.
/// * `l40s`: NVIDIA L40S datasheet (BF16 362.05 / FP8 733 TFLOP/s dense, 48 GB GDDR6 =
///   44.7 GiB, 864 GB/s, 142 SMs, 2,520 MHz boost, PCIe Gen4 x16 = 64 GB/s, no NVLink:
///   `nvlink_gbps` holds its PCIe rate).
/// * `h800` (SXM5): the H100 SXM5 part with its NVLink cut to 400 GB/s, the GPU of
///   DeepSeek's published V3/R1 runs. NVIDIA H800 Tensor Core GPU datasheet: the H100 SXM5's
///   tensor cores (BF16 989.4 / FP8 1,978.9 TFLOP/s dense), 80 GB HBM3 at 3.35 TB/s, NVLink
///   400 GB/s, PCIe Gen5 128 GB/s; 132 SMs at 1,980 MHz as the H100 (same GH100 die). DeepEP's
///   README measures about 160 GB/s of it in one direction in practice ("H800 (~160 GB/s
///   NVLink maximum bandwidth)"); the record keeps the datasheet peak.
/// * `b200` (HGX B200, 1,000 W): NVIDIA HGX/DGX B200 datasheets, per GPU (FP8 4.5 / BF16
///   2.25 PFLOP/s dense, i.e. half the sparse figures; the DGX B200 user guide's 1,440 GB
///   of HBM3e over 8 GPUs = 180 GB at 8 TB/s; fifth-generation NVLink 1.8 TB/s on 8 GPUs;
///   PCIe Gen5 128 GB/s: the DGX B200 user guide's hosts are PCIe Gen5 Xeons with one
///   ConnectX-7 400 Gb/s card per GPU). 148 SMs and a 1,965 MHz boost are commonly reported
///   figures, not datasheet ones.
/// * `gb200`: one Blackwell GPU of a GB200 NVL72 rack (1,200 W). NVIDIA GB200 NVL72
///   datasheet, per GPU (the rack's 72 GPUs): FP8 720 / BF16 360 PFLOP/s with sparsity per
///   rack = 10 / 5 PFLOP/s per GPU, dense half of it (FP8 5 / BF16 2.5 PFLOP/s; the same
///   figures as the Blackwell technical brief's GB200 column); 13.4 TB HBM3e per rack =
///   186 GB per GPU at 576 TB/s / 72 = 8 TB/s; NVLink 130 TB/s per rack = 1.8 TB/s per
///   GPU on one NVLink Switch domain of 72 GPUs (`nvlink_gpus = 72`). Its host link is
///   NVLink-C2C to a Grace CPU; `pcie_gbps` is the PCIe Gen5 x16 (128 GB/s) of its
///   ConnectX NIC, an assumption of this record. SMs and clock as `b200` (the same die).
/// * `mi300x`: AMD Instinct MI300X datasheet (BF16 1,307.4 / FP8 2,614.9 TFLOP/s dense,
///   192 GB HBM3 at 5.3 TB/s, 304 compute units — `sms` holds CUs —, 2,100 MHz peak engine
///   clock, Infinity Fabric 7 × 128 GB/s = 896 GB/s to its peers, PCIe Gen5 128 GB/s).
///   CUDA tile alignment is kept (an approximation).
/// * `tpu-v5e`: Google Cloud's TPU v5e documentation, per chip: one TensorCore with four
///   MXUs (`sms` holds them), BF16 197 TFLOP/s (INT8 393 TOP/s; no FP8), 16 GB HBM2 at
///   819 GB/s, bidirectional ICI 400 GB/s over 4 ports (`nvlink_gbps`; a 2D torus of up to
///   256 chips, `nvlink_gpus`), 8 chips per host with 2 × 100 Gb/s NICs (`pcie_gbps` holds a
///   chip's share of the data-centre network, 3.125 GB/s). The clock is not published:
///   1,500 MHz is what the peak implies (197 TFLOP/s / (4 MXUs × 128 × 128 × 2 FLOP)). Its
///   GEMMs are padded to the seed's 8×8 MXU tile (§2.4); the remap is not priced (the seed
///   gives no TPU figures). No CUDA graphs: a step is one compiled XLA program, priced as
///   one launch like a graph replay.
///
/// HBM capacities are taken as GiB (HBM stacks are binary), except the H200's measured one.
///
/// Descriptor cache (seed §2.5): A100 64 entries / 4 cycles a miss, Hopper 256 / 2; the
/// seed gives no figures for L40S, B200, GB200 and MI300X, which take the Hopper values (an
/// assumption).
///
/// Efficiencies: our H200 measurements show an 8192³ BF16 matmul at 767.8 TFLOP/s (0.78 of
/// peak) and a device-to-device copy at 4,211 GB/s read+write (0.88 of peak); the presets use
/// slightly lower round figures (0.75 / 0.85) for Hopper since serving GEMMs are smaller, and
/// 0.70 / 0.80 for the others (estimates, not measured). Calibrated profiles ship for h200
/// (our measurements), a100-80g and h100 (derived from Vidur's); every other preset is priced
/// by the roofline (`priced_by = "roofline"`): the profiles' tables were timed on those exact
/// parts, and a variant with other clocks and bandwidth would inherit their times.
pub fn gpu_presets() -> Vec<Gpu> {
    GPU_PRESETS
        .iter()
        .map(|p| Gpu {
            name: p.name.to_string(),
            bf16_tflops: p.peaks.bf16_tflops,
            fp8_tflops: p.peaks.fp8_tflops,
            hbm_gib: p.peaks.hbm_gib,
            hbm_tbps: p.peaks.hbm_tbps,
            sms: p.peaks.sms,
            sm_clock_mhz: p.peaks.sm_clock_mhz,
            nvlink_gbps: p.links.nvlink_gbps,
            nvlink_gpus: p.links.nvlink_gpus,
            pcie_gbps: p.links.pcie_gbps,
            descriptor_cache_entries: p.tuning.descriptor_cache_entries,
            descriptor_miss_cycles: p.tuning.descriptor_miss_cycles,
            compute_efficiency: p.tuning.compute_efficiency,
            memory_efficiency: p.tuning.memory_efficiency,
            priced_by: p.priced_by.to_string(),
            matrix_unit: p.matrix_unit,
        })
        .collect()
}

/// One row of [`GPU_PRESETS`]: a [`Gpu`] as constant data, its figures grouped as the
/// sources give them.
struct GpuPreset {
    name: &'static str,
    peaks: Peaks,
    links: Links,
    tuning: Tuning,
    /// [`Gpu::priced_by`]: a shipped profile's name or [`ROOFLINE`].
    priced_by: &'static str,
    matrix_unit: MatrixUnit,
}

/// Datasheet peaks (units as in [`Gpu`]).
struct Peaks {
    bf16_tflops: f64,
    fp8_tflops: f64,
    hbm_gib: f64,
    hbm_tbps: f64,
    sms: u32,
    sm_clock_mhz: f64,
}

/// Links (units as in [`Gpu`]).
struct Links {
    nvlink_gbps: f64,
    nvlink_gpus: u32,
    pcie_gbps: f64,
}

/// Descriptor cache and efficiencies.
struct Tuning {
    descriptor_cache_entries: u32,
    descriptor_miss_cycles: f64,
    compute_efficiency: f64,
    memory_efficiency: f64,
}

const AMPERE: Tuning = Tuning { descriptor_cache_entries: 64, descriptor_miss_cycles: 4.0, compute_efficiency: 0.70, memory_efficiency: 0.80 };
const HOPPER: Tuning = Tuning { descriptor_cache_entries: 256, descriptor_miss_cycles: 2.0, compute_efficiency: 0.75, memory_efficiency: 0.85 };
const OTHER: Tuning = Tuning { descriptor_cache_entries: 256, descriptor_miss_cycles: 2.0, compute_efficiency: 0.70, memory_efficiency: 0.80 };
// No block-table figures for a TPU in the seed: its remap is not priced (0 cycles).
const TPU: Tuning = Tuning { descriptor_cache_entries: 256, descriptor_miss_cycles: 0.0, compute_efficiency: 0.70, memory_efficiency: 0.80 };
const CUDA: MatrixUnit = MatrixUnit::TensorCore;

/// The GPU presets, in catalog order, each defined once. [`gpu_presets`] and
/// [`gpu_preset_names`] read this table (sources in [`gpu_presets`]' documentation).
const GPU_PRESETS: &[GpuPreset] = &[
    GpuPreset {
        name: "a100-80g",
        peaks: Peaks { bf16_tflops: 312.0, fp8_tflops: 0.0, hbm_gib: 80.0, hbm_tbps: 2.039, sms: 108, sm_clock_mhz: 1410.0 },
        links: Links { nvlink_gbps: 600.0, nvlink_gpus: 8, pcie_gbps: 64.0 },
        tuning: AMPERE,
        priced_by: "a100-80g",
        matrix_unit: CUDA,
    },
    GpuPreset {
        name: "a100-40g",
        peaks: Peaks { bf16_tflops: 312.0, fp8_tflops: 0.0, hbm_gib: 40.0, hbm_tbps: 1.555, sms: 108, sm_clock_mhz: 1410.0 },
        links: Links { nvlink_gbps: 600.0, nvlink_gpus: 8, pcie_gbps: 64.0 },
        tuning: AMPERE,
        priced_by: ROOFLINE,
        matrix_unit: CUDA,
    },
    GpuPreset {
        name: "a100-80g-pcie",
        peaks: Peaks { bf16_tflops: 312.0, fp8_tflops: 0.0, hbm_gib: 80.0, hbm_tbps: 1.935, sms: 108, sm_clock_mhz: 1410.0 },
        links: Links { nvlink_gbps: 600.0, nvlink_gpus: 2, pcie_gbps: 64.0 },
        tuning: AMPERE,
        priced_by: ROOFLINE,
        matrix_unit: CUDA,
    },
    GpuPreset {
        name: "h100",
        peaks: Peaks { bf16_tflops: 989.4, fp8_tflops: 1978.9, hbm_gib: 80.0, hbm_tbps: 3.35, sms: 132, sm_clock_mhz: 1980.0 },
        links: Links { nvlink_gbps: 900.0, nvlink_gpus: 8, pcie_gbps: 128.0 },
        tuning: HOPPER,
        priced_by: "h100",
        matrix_unit: CUDA,
    },
    GpuPreset {
        name: "h100-pcie",
        peaks: Peaks { bf16_tflops: 756.0, fp8_tflops: 1513.0, hbm_gib: 80.0, hbm_tbps: 2.0, sms: 114, sm_clock_mhz: 1755.0 },
        links: Links { nvlink_gbps: 600.0, nvlink_gpus: 2, pcie_gbps: 128.0 },
        tuning: HOPPER,
        priced_by: ROOFLINE,
        matrix_unit: CUDA,
    },
    GpuPreset {
        name: "h100-nvl",
        peaks: Peaks { bf16_tflops: 835.5, fp8_tflops: 1670.5, hbm_gib: 94.0, hbm_tbps: 3.9, sms: 132, sm_clock_mhz: 1785.0 },
        links: Links { nvlink_gbps: 600.0, nvlink_gpus: 2, pcie_gbps: 128.0 },
        tuning: HOPPER,
        priced_by: ROOFLINE,
        matrix_unit: CUDA,
    },
    GpuPreset {
        // NVIDIA H800 datasheet (H100 SXM5 compute and memory, NVLink 400 GB/s).
        name: "h800",
        peaks: Peaks { bf16_tflops: 989.4, fp8_tflops: 1978.9, hbm_gib: 80.0, hbm_tbps: 3.35, sms: 132, sm_clock_mhz: 1980.0 },
        links: Links { nvlink_gbps: 400.0, nvlink_gpus: 8, pcie_gbps: 128.0 },
        tuning: HOPPER,
        priced_by: ROOFLINE,
        matrix_unit: CUDA,
    },
    GpuPreset {
        name: "h200",
        peaks: Peaks { bf16_tflops: 989.4, fp8_tflops: 1978.9, hbm_gib: 139.8, hbm_tbps: 4.8, sms: 132, sm_clock_mhz: 1980.0 },
        links: Links { nvlink_gbps: 900.0, nvlink_gpus: 8, pcie_gbps: 128.0 },
        tuning: HOPPER,
        priced_by: "h200",
        matrix_unit: CUDA,
    },
    GpuPreset {
        name: "l40s",
        peaks: Peaks { bf16_tflops: 362.05, fp8_tflops: 733.0, hbm_gib: L40S_GIB, hbm_tbps: 0.864, sms: 142, sm_clock_mhz: 2520.0 },
        links: Links { nvlink_gbps: 64.0, nvlink_gpus: 1, pcie_gbps: 64.0 },
        tuning: OTHER,
        priced_by: ROOFLINE,
        matrix_unit: CUDA,
    },
    GpuPreset {
        // NVIDIA HGX/DGX B200 datasheets and the DGX B200 user guide (sources above).
        name: "b200",
        peaks: Peaks { bf16_tflops: 2250.0, fp8_tflops: 4500.0, hbm_gib: 180.0, hbm_tbps: 8.0, sms: 148, sm_clock_mhz: 1965.0 },
        links: Links { nvlink_gbps: 1800.0, nvlink_gpus: 8, pcie_gbps: 128.0 },
        tuning: OTHER,
        priced_by: ROOFLINE,
        matrix_unit: CUDA,
    },
    GpuPreset {
        // NVIDIA GB200 NVL72 datasheet, per GPU: rack figures / 72 (sources above).
        name: "gb200",
        peaks: Peaks { bf16_tflops: 2500.0, fp8_tflops: 5000.0, hbm_gib: 186.0, hbm_tbps: 8.0, sms: 148, sm_clock_mhz: 1965.0 },
        links: Links { nvlink_gbps: 1800.0, nvlink_gpus: 72, pcie_gbps: 128.0 },
        tuning: OTHER,
        priced_by: ROOFLINE,
        matrix_unit: CUDA,
    },
    GpuPreset {
        name: "mi300x",
        peaks: Peaks { bf16_tflops: 1307.4, fp8_tflops: 2614.9, hbm_gib: 192.0, hbm_tbps: 5.3, sms: 304, sm_clock_mhz: 2100.0 },
        links: Links { nvlink_gbps: 896.0, nvlink_gpus: 8, pcie_gbps: 128.0 },
        tuning: OTHER,
        priced_by: ROOFLINE,
        matrix_unit: CUDA,
    },
    GpuPreset {
        name: "tpu-v5e",
        peaks: Peaks { bf16_tflops: 197.0, fp8_tflops: 0.0, hbm_gib: 16.0, hbm_tbps: 0.819, sms: 4, sm_clock_mhz: 1500.0 },
        links: Links { nvlink_gbps: 400.0, nvlink_gpus: 256, pcie_gbps: 3.125 },
        tuning: TPU,
        priced_by: ROOFLINE,
        matrix_unit: MatrixUnit::Mxu,
    },
];

/// Names of the GPU presets, in catalog order.
pub fn gpu_preset_names() -> Vec<&'static str> {
    GPU_PRESETS.iter().map(|g| g.name).collect()
}

pub(super) fn gpu_preset(name: &str) -> Option<Gpu> {
    gpu_presets().into_iter().find(|g| g.name == name)
}

/// Table form of a `gpu` entry. Every field is optional; without `preset`, all datasheet
/// fields are required. Fields with defaults when no preset is given: `name` ("custom"),
/// `fp8_tflops` (0 = none), `nvlink_gpus` (8), `pcie_gbps` (64, PCIe Gen4 x16),
/// `sm_clock_mhz` (1,980), `descriptor_cache_entries` (256), `descriptor_miss_cycles` (2)
/// — the last three Hopper's —, `compute_efficiency` (0.70), `memory_efficiency` (0.80),
/// `priced_by` ("roofline"). Over a preset, `priced_by` stays the preset's unless the table
/// changes `bf16_tflops`, `fp8_tflops`, `hbm_tbps`, `sms` or `sm_clock_mhz` (another part
/// than the one the profile timed: the roofline prices it). Units as in [`Gpu`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuFields {
    /// Preset to start from; the other fields override it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Overrides [`Gpu::name`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Overrides [`Gpu::bf16_tflops`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16_tflops: Option<f64>,
    /// Overrides [`Gpu::fp8_tflops`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_tflops: Option<f64>,
    /// Overrides [`Gpu::hbm_gib`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hbm_gib: Option<f64>,
    /// Overrides [`Gpu::hbm_tbps`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hbm_tbps: Option<f64>,
    /// Overrides [`Gpu::sms`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sms: Option<u32>,
    /// Overrides [`Gpu::nvlink_gbps`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_gbps: Option<f64>,
    /// Overrides [`Gpu::nvlink_gpus`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_gpus: Option<u32>,
    /// Overrides [`Gpu::pcie_gbps`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gbps: Option<f64>,
    /// Overrides [`Gpu::sm_clock_mhz`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    /// Overrides [`Gpu::descriptor_cache_entries`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor_cache_entries: Option<u32>,
    /// Overrides [`Gpu::descriptor_miss_cycles`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor_miss_cycles: Option<f64>,
    /// Overrides [`Gpu::compute_efficiency`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_efficiency: Option<f64>,
    /// Overrides [`Gpu::memory_efficiency`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_efficiency: Option<f64>,
    /// Overrides [`Gpu::priced_by`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priced_by: Option<String>,
    /// Overrides [`Gpu::matrix_unit`] (`tensor_core` or `mxu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix_unit: Option<MatrixUnit>,
    /// A TPU's bidirectional ICI bandwidth per chip, GB/s (sets `nvlink_gbps`; TPUs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ici_gbps: Option<f64>,
}

/// The fields of a `gpu` table that describe a GPU's NVLink or block-table hardware, which a
/// TPU does not have: set on a TPU, they are errors naming the field.
pub const GPU_ONLY_FIELDS: [&str; 4] = ["nvlink_gbps", "nvlink_gpus", "descriptor_cache_entries", "descriptor_miss_cycles"];

impl GpuFields {
    /// The GPU-only fields this table sets ([`GPU_ONLY_FIELDS`]).
    pub fn gpu_only_set(&self) -> Vec<&'static str> {
        let set = [self.nvlink_gbps.is_some(), self.nvlink_gpus.is_some(), self.descriptor_cache_entries.is_some(),
                   self.descriptor_miss_cycles.is_some()];
        GPU_ONLY_FIELDS.iter().zip(set).filter(|(_, s)| *s).map(|(n, _)| *n).collect()
    }
}

/// Default compute efficiency of a custom GPU given without a preset.
pub const CUSTOM_GPU_COMPUTE_EFFICIENCY: f64 = 0.70;
/// Default memory efficiency of a custom GPU given without a preset.
pub const CUSTOM_GPU_MEMORY_EFFICIENCY: f64 = 0.80;

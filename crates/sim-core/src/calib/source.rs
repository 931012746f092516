//! Where a time came from ([`Source`]): every number the lookups and the step model give
//! carries one, best first.

use serde::Serialize;

/// Where a time came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A measured point of a calibration table.
    Table,
    /// Between measured points (log–log), or a table reused for a nearby shape.
    Interpolated,
    /// Datasheet or table-fitted peak rates (no measurement at this size).
    Roofline,
    /// A documented analytical sub-model (launch overhead, fusion, communication, …).
    Model,
}

impl Source {
    /// The lowercase name used in breakdowns.
    pub fn name(self) -> &'static str {
        match self {
            Source::Table => "table",
            Source::Interpolated => "interpolated",
            Source::Roofline => "roofline",
            Source::Model => "model",
        }
    }
}

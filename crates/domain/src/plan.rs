//! Account plans and what each one unlocks (spec §5.7 and the plan list of the accounts CLI).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Plan {
    /// Only clients marked `free`; every test runs as a free test.
    Free,
    Standard,
    /// Adds the enterprise-only features: `reference_id`, `customer_id`, `headers`, X-headers and
    /// the matching search parameters.
    Enterprise,
    /// Enterprise, and every test must carry a `customer_id` (user-priced reseller packages).
    Reseller,
}

impl Plan {
    pub fn is_enterprise(self) -> bool {
        matches!(self, Plan::Enterprise | Plan::Reseller)
    }

    pub fn requires_customer_id(self) -> bool {
        matches!(self, Plan::Reseller)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Standard => "standard",
            Plan::Enterprise => "enterprise",
            Plan::Reseller => "reseller",
        }
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown plan {0:?}: expected one of free, standard, enterprise, reseller")]
pub struct UnknownPlan(String);

impl FromStr for Plan {
    type Err = UnknownPlan;

    fn from_str(s: &str) -> Result<Plan, UnknownPlan> {
        match s.to_ascii_lowercase().as_str() {
            "free" => Ok(Plan::Free),
            "standard" => Ok(Plan::Standard),
            "enterprise" => Ok(Plan::Enterprise),
            "reseller" => Ok(Plan::Reseller),
            _ => Err(UnknownPlan(s.to_string())),
        }
    }
}

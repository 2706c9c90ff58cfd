//! [`Cost`]: an amount of US dollars, exact in sums.

use std::{fmt, iter::Sum, ops::Add};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An amount of US dollars, counted in billionths so that a run's steps add up exactly (a
/// token of a cheap model costs a tenth of a millionth of a dollar). Serialized as ACP's and
/// AG-UI's `{"amount": 0.0123, "currency": "USD"}`.
///
/// ```
/// use agent_tower::model::Cost;
///
/// let step = Cost::from_usd(0.0015);
/// assert_eq!((step + step).usd(), 0.003);
/// assert_eq!(step.to_string(), "$0.001500");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost {
    nano_usd: u64,
}

impl Cost {
    /// Nothing.
    pub const ZERO: Self = Self { nano_usd: 0 };

    /// `usd` dollars, to the nearest billionth; negative or not a number is zero.
    #[must_use]
    pub fn from_usd(usd: f64) -> Self {
        let nanos = (usd * 1e9).round();
        Self {
            // A float-to-int cast saturates: huge amounts are u64::MAX, NaN is 0.
            nano_usd: if nanos > 0.0 { nanos as u64 } else { 0 },
        }
    }

    /// The amount in billionths of a dollar.
    #[must_use]
    pub fn from_nano_usd(nano_usd: u64) -> Self {
        Self { nano_usd }
    }

    /// The amount in dollars.
    #[must_use]
    pub fn usd(self) -> f64 {
        self.nano_usd as f64 / 1e9
    }

    /// The amount in billionths of a dollar.
    #[must_use]
    pub fn nano_usd(self) -> u64 {
        self.nano_usd
    }
}

impl Add for Cost {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            nano_usd: self.nano_usd.saturating_add(other.nano_usd),
        }
    }
}

impl Sum for Cost {
    fn sum<I: Iterator<Item = Self>>(costs: I) -> Self {
        costs.fold(Self::ZERO, Add::add)
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${:.6}", self.usd())
    }
}

#[derive(Serialize, Deserialize)]
struct Wire<'a> {
    amount: f64,
    #[serde(borrow)]
    currency: std::borrow::Cow<'a, str>,
}

impl Serialize for Cost {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Wire {
            amount: self.usd(),
            currency: "USD".into(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        if wire.currency != "USD" {
            return Err(serde::de::Error::custom(format!(
                "a cost in {}: only USD is counted",
                wire.currency
            )));
        }
        Ok(Self::from_usd(wire.amount))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_add_exactly_and_read_back() {
        let token = Cost::from_usd(0.1 / 1e6);
        let million: Cost = std::iter::repeat_n(token, 1_000_000).sum();
        assert_eq!(million, Cost::from_usd(0.1));
        assert_eq!(Cost::from_usd(-1.0), Cost::ZERO);
        assert_eq!(Cost::from_usd(f64::NAN), Cost::ZERO);
        let json = serde_json::to_value(Cost::from_usd(1.25)).unwrap();
        assert_eq!(json, serde_json::json!({"amount": 1.25, "currency": "USD"}));
        assert_eq!(
            serde_json::from_value::<Cost>(json).unwrap(),
            Cost::from_usd(1.25)
        );
        let euros = serde_json::json!({"amount": 1, "currency": "EUR"});
        assert!(serde_json::from_value::<Cost>(euros).is_err());
    }
}

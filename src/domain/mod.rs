//! Pure types and rules. Nothing here performs I/O, so every rule can be tested
//! without a database, and every layer above can rely on values that already
//! passed validation.

pub mod audit;
pub mod catalog;
pub mod engine;
pub mod event;
pub mod flink;
pub mod job;
pub mod job_record;
pub mod ledger;
pub mod name;
pub mod options;
pub mod staging;

pub use catalog::{CatalogAlteration, CatalogDescriptor, CatalogRecord};
pub use name::{CatalogName, EngineName, NameError, ObjectName, SubscriptionName};
pub use options::{CatalogOptions, MASK, OptionsError};
pub use staging::{Staging, StagingKey, WriteLocation, WriteLocationKind};

/// The string forms of the domain's enums, derived once (strum's
/// `IntoStaticStr` and `EnumString`, spelled as their serde names):
/// `as_str` writes one, as stored and logged, and `parse` reads one back.
macro_rules! string_forms {
    ($($kind:ty),* $(,)?) => {$(
        impl $kind {
            pub fn as_str(self) -> &'static str {
                self.into()
            }

            pub fn parse(s: &str) -> Option<Self> {
                s.parse().ok()
            }
        }
    )*};
}

string_forms!(
    engine::EngineKind,
    engine::Reachability,
    job::JobMode,
    job_record::HookKind,
    ledger::HookAction,
    ledger::ActionState,
    ledger::ActionOutcome,
    ledger::Decision,
    audit::OnAuditFailure,
    event::EventFormat,
    event::EventType,
    event::DeliveryState,
);

/// For optional request fields that have no `null`:
/// `#[serde(default, deserialize_with = "non_null")]` reads an absent field
/// as `None` and refuses `null` (422 naming the field), as the document says.
pub fn non_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

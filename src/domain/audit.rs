//! Audits: checks on a batch hook's staging that decide, at `FINISHED` and
//! before the commit, whether it is published (write–audit–publish). They
//! are declared per hook at submission in dbt's words where dbt has them
//! (`row_count`, `not_null`, `unique`, `accepted_values`), plus
//! `row_count_change` for a replace and `sql`, a named read-only query.
//!
//! Here are what a user declares, the checks made at submission against
//! the table's definition, and what a result says. Each catalog type runs
//! them its own way ([`crate::catalog::Catalog::audit`]); a failed one
//! vetoes the publication of the commits it goes with, and the job's
//! [`AuditPolicy`] says what becomes of their stagings.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::flink::table::TableDefinition;

/// Where a `sql` audit's query names the staging.
pub const STAGING_PLACEHOLDER: &str = "{{ staging }}";

/// Most audits one hook may declare.
pub const MOST_AUDITS: usize = 64;

/// Longest `sql` audit query, in bytes.
pub const MOST_QUERY_BYTES: usize = 16 * 1024;

/// How long one audit's query may run before the audit fails.
pub const AUDIT_TIMEOUT: Duration = Duration::from_secs(10);

/// One check on a staging.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Audit {
    /// The staging holds at least `min` and at most `max` rows.
    RowCount {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u64>,
    },
    /// No row has a null in any of these columns.
    NotNull { columns: Vec<String> },
    /// No two rows share these columns' values.
    Unique { columns: Vec<String> },
    /// Every non-null value of `column`, as text, is one of `values`.
    AcceptedValues { column: String, values: Vec<String> },
    /// For a replace: the staging's row count over the replaced table's
    /// lies between `min_ratio` and `max_ratio` (a table that is not there
    /// yet, for `create_or_replace_table_as`, passes).
    RowCountChange {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_ratio: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_ratio: Option<f64>,
    },
    /// A named `SELECT` over the staging (`{{ staging }}` stands for its
    /// qualified name) whose one row's first column is true. It runs in a
    /// read-only transaction with a time limit; `jdbc` catalogs only.
    Sql { name: String, query: String },
}

// Ratios are checked finite at submission, so equality is an equivalence.
impl Eq for Audit {}

impl Audit {
    /// How the audit is named in results: its kind and what it checks.
    pub fn name(&self) -> String {
        match self {
            Audit::RowCount { .. } => "row_count".into(),
            Audit::NotNull { columns } => format!("not_null({})", columns.join(", ")),
            Audit::Unique { columns } => format!("unique({})", columns.join(", ")),
            Audit::AcceptedValues { column, .. } => format!("accepted_values({column})"),
            Audit::RowCountChange { .. } => "row_count_change".into(),
            Audit::Sql { name, .. } => format!("sql({name})"),
        }
    }

    /// What passing means, in words, for the result.
    pub fn expected(&self) -> String {
        let bound = |min: Option<String>, max: Option<String>| match (min, max) {
            (Some(min), Some(max)) => format!("between {min} and {max}"),
            (Some(min), None) => format!("at least {min}"),
            (None, Some(max)) => format!("at most {max}"),
            (None, None) => "any".into(),
        };
        match self {
            Audit::RowCount { min, max } => format!(
                "{} rows",
                bound(min.map(|n| n.to_string()), max.map(|n| n.to_string()))
            ),
            Audit::NotNull { .. } => "0 rows with a null".into(),
            Audit::Unique { .. } => "0 duplicated values".into(),
            Audit::AcceptedValues { values, .. } => {
                format!("0 values outside [{}]", values.join(", "))
            }
            Audit::RowCountChange {
                min_ratio,
                max_ratio,
            } => format!(
                "a ratio {}",
                bound(
                    min_ratio.map(|r| r.to_string()),
                    max_ratio.map(|r| r.to_string())
                )
            ),
            Audit::Sql { .. } => "true".into(),
        }
    }

    /// Whether a count observed by a counting audit passes.
    pub fn passes_count(&self, observed: u64) -> bool {
        match self {
            Audit::RowCount { min, max } => {
                min.is_none_or(|min| observed >= min) && max.is_none_or(|max| observed <= max)
            }
            _ => observed == 0,
        }
    }

    /// Whether a row-count ratio passes a `row_count_change` audit.
    pub fn passes_ratio(&self, ratio: f64) -> bool {
        match self {
            Audit::RowCountChange {
                min_ratio,
                max_ratio,
            } => {
                min_ratio.is_none_or(|min| ratio >= min) && max_ratio.is_none_or(|max| ratio <= max)
            }
            _ => false,
        }
    }

    /// Checks what can be checked without the catalog: columns the table
    /// declares, bounds that make sense, a placeholder in a query.
    /// `replaces` says whether the hook may replace a table.
    pub fn check(&self, table: &TableDefinition, replaces: bool) -> Result<(), String> {
        let declared = |column: &String| -> Result<(), String> {
            if table
                .columns
                .iter()
                .any(|c| c.is_physical() && c.name == *column)
            {
                Ok(())
            } else {
                Err(format!(
                    "audit {} names column '{column}', which the table does not have",
                    self.name()
                ))
            }
        };
        match self {
            Audit::RowCount { min, max } => {
                if let (Some(min), Some(max)) = (min, max)
                    && min > max
                {
                    return Err(format!("audit row_count: min {min} is above max {max}"));
                }
            }
            Audit::NotNull { columns } | Audit::Unique { columns } => {
                if columns.is_empty() {
                    return Err(format!("audit {} names no column", self.name()));
                }
                columns.iter().try_for_each(declared)?;
            }
            Audit::AcceptedValues { column, values } => {
                declared(column)?;
                if values.is_empty() {
                    return Err(format!("audit {} accepts no value", self.name()));
                }
            }
            Audit::RowCountChange {
                min_ratio,
                max_ratio,
            } => {
                if !replaces {
                    return Err("audit row_count_change compares with the table a hook \
                                replaces: give it to a replace_table_as or \
                                create_or_replace_table_as hook"
                        .into());
                }
                for ratio in [min_ratio, max_ratio].into_iter().flatten() {
                    if !ratio.is_finite() || *ratio < 0.0 {
                        return Err(format!(
                            "audit row_count_change: {ratio} is not a ratio (a finite number, 0 or more)"
                        ));
                    }
                }
                if let (Some(min), Some(max)) = (min_ratio, max_ratio)
                    && min > max
                {
                    return Err(format!(
                        "audit row_count_change: min_ratio {min} is above max_ratio {max}"
                    ));
                }
            }
            Audit::Sql { name, query } => {
                if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
                    return Err("audit sql: name must be 1 to 128 characters, no control \
                                characters"
                        .into());
                }
                if query.len() > MOST_QUERY_BYTES {
                    return Err(format!(
                        "audit sql({name}): the query is longer than {MOST_QUERY_BYTES} bytes"
                    ));
                }
                if !query.contains(STAGING_PLACEHOLDER) {
                    return Err(format!(
                        "audit sql({name}): the query must read the staging, named \
                         {STAGING_PLACEHOLDER}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The columns an audit reads, for the ones that name some.
    pub fn columns(&self) -> Vec<&str> {
        match self {
            Audit::NotNull { columns } | Audit::Unique { columns } => {
                columns.iter().map(String::as_str).collect()
            }
            Audit::AcceptedValues { column, .. } => vec![column.as_str()],
            _ => Vec::new(),
        }
    }
}

/// Checks a hook's audits as a whole.
pub fn check_audits(
    audits: &[Audit],
    table: &TableDefinition,
    replaces: bool,
) -> Result<(), String> {
    if audits.len() > MOST_AUDITS {
        return Err(format!(
            "a hook declares at most {MOST_AUDITS} audits, not {}",
            audits.len()
        ));
    }
    audits.iter().try_for_each(|a| a.check(table, replaces))
}

/// Where audits start in their property-map form.
pub const AUDIT_PROPERTY_PREFIX: &str = "audit.";

/// Audits from their property-map form, the flat, indexed shape of Flink's
/// `CatalogPropertiesUtil` (table options in a `WITH` clause have no other):
/// `audit.0.kind = not_null`, `audit.0.columns.0 = id`, `audit.1.kind =
/// row_count`, `audit.1.min = 2`. Numbers are written as text; lists are
/// indexed from 0. The same words as the JSON form, so the same checks
/// follow; an unknown or malformed key is refused by name.
pub fn audits_from_properties(
    properties: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<Audit>, String> {
    use serde_json::{Map, Value};
    use std::collections::BTreeMap;
    /// One audit's fields, and its lists by field and item index.
    type Declared = (Map<String, Value>, BTreeMap<String, BTreeMap<usize, Value>>);
    let mut audits: BTreeMap<usize, Declared> = BTreeMap::new();
    for (key, value) in properties {
        let malformed = || format!("'{key}' is not audit.<n>.<field> or audit.<n>.<list>.<m>");
        let rest = key
            .strip_prefix(AUDIT_PROPERTY_PREFIX)
            .ok_or_else(malformed)?;
        let mut parts = rest.split('.');
        let (Some(index), Some(field)) = (parts.next(), parts.next()) else {
            return Err(malformed());
        };
        let index = plain_index(index).ok_or_else(malformed)?;
        if index >= MOST_AUDITS {
            return Err(format!(
                "'{key}': a hook declares at most {MOST_AUDITS} audits"
            ));
        }
        let (fields, lists) = audits.entry(index).or_default();
        match (field, parts.next(), parts.next()) {
            ("columns" | "values", Some(item), None) => {
                let item = plain_index(item).ok_or_else(malformed)?;
                lists
                    .entry(field.to_owned())
                    .or_default()
                    .insert(item, Value::String(value.clone()));
            }
            (field, None, None) => {
                let value = match field {
                    "min" | "max" => Value::from(value.parse::<u64>().map_err(|_| {
                        format!("'{key}' must be a whole number of rows, not '{value}'")
                    })?),
                    "min_ratio" | "max_ratio" => Value::from(
                        value
                            .parse::<f64>()
                            .map_err(|_| format!("'{key}' must be a number, not '{value}'"))?,
                    ),
                    _ => Value::String(value.clone()),
                };
                fields.insert(field.to_owned(), value);
            }
            _ => return Err(malformed()),
        }
    }
    audits
        .into_iter()
        .enumerate()
        .map(|(expected, (index, (mut fields, lists)))| {
            if index != expected {
                return Err(format!(
                    "audit.{expected} is missing: audits are numbered from 0 without gaps"
                ));
            }
            for (list, items) in lists {
                if let Some((gap, _)) = items.keys().enumerate().find(|(at, item)| at != *item) {
                    return Err(format!(
                        "audit.{index}.{list}.{gap} is missing: list items are numbered from 0 \
                         without gaps"
                    ));
                }
                fields.insert(list, Value::Array(items.into_values().collect()));
            }
            serde_json::from_value(Value::Object(fields)).map_err(|e| format!("audit.{index}: {e}"))
        })
        .collect()
}

/// A list index as written in a property key: digits, no sign, no padding.
fn plain_index(text: &str) -> Option<usize> {
    let plain = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    plain.then(|| text.parse().ok()).flatten()
}

/// What becomes of the stagings whose publication an audit vetoed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum OnAuditFailure {
    /// Keep the staging for inspection until the quarantine ends (then it
    /// is discarded), or an operator publishes it anyway or discards it.
    #[default]
    Quarantine,
    /// Discard the staging at once.
    Abort,
}

/// A job's policy for failed audits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditPolicy {
    pub on_failure: OnAuditFailure,
    /// How long a quarantined staging is kept.
    pub quarantine: Duration,
}

/// Default length of a quarantine: a day.
pub const DEFAULT_QUARANTINE: Duration = Duration::from_secs(24 * 60 * 60);

/// Longest quarantine: thirty days.
pub const MOST_QUARANTINE: Duration = Duration::from_secs(30 * 24 * 60 * 60);

impl Default for AuditPolicy {
    fn default() -> Self {
        Self {
            on_failure: OnAuditFailure::Quarantine,
            quarantine: DEFAULT_QUARANTINE,
        }
    }
}

/// What one audit found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditResult {
    pub hook_index: u32,
    /// Its place among the hook's audits.
    pub audit_index: u32,
    pub name: String,
    pub passed: bool,
    /// What was observed, in words: a count, a ratio, the query's answer,
    /// or why the audit could not run (which fails it).
    pub observed: String,
    pub expected: String,
    pub duration_ms: u64,
    pub at: DateTime<Utc>,
}

/// What one audit observed, before it is judged.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// A count of rows (`row_count`) or of offending rows or values.
    Count(u64),
    /// The staging's rows over the replaced table's, or none when there is
    /// no table to compare with.
    Ratio(Option<f64>),
    /// A `sql` audit's answer: whether its first column was true, and how
    /// it read.
    Answer(bool, String),
    /// The audit could not be made (a query refused, a time-out, a write
    /// attempted): it fails, with the reason.
    Refused(String),
}

impl Observed {
    /// The audit's verdict on what it observed, and how it reads.
    pub fn judge(&self, audit: &Audit) -> (bool, String) {
        match self {
            Observed::Count(n) => (audit.passes_count(*n), n.to_string()),
            Observed::Ratio(None) => (true, "no table to compare with".into()),
            Observed::Ratio(Some(ratio)) => (audit.passes_ratio(*ratio), format!("{ratio:.4}")),
            Observed::Answer(passed, text) => (*passed, text.clone()),
            Observed::Refused(reason) => (false, reason.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TableDefinition {
        serde_json::from_value(serde_json::json!({"columns": [
            {"name": "id", "type": "BIGINT NOT NULL"}, {"name": "state", "type": "STRING"}
        ]}))
        .unwrap()
    }

    #[test]
    fn audits_read_as_dbt_words_and_name_what_they_check() {
        let audits: Vec<Audit> = serde_json::from_value(serde_json::json!([
            {"kind": "row_count", "min": 1},
            {"kind": "not_null", "columns": ["id"]},
            {"kind": "unique", "columns": ["id", "state"]},
            {"kind": "accepted_values", "column": "state", "values": ["open", "closed"]},
            {"kind": "sql", "name": "ids positive", "query": "SELECT MIN(id) > 0 FROM {{ staging }}"}
        ]))
        .unwrap();
        let names: Vec<String> = audits.iter().map(Audit::name).collect();
        assert_eq!(
            names,
            [
                "row_count",
                "not_null(id)",
                "unique(id, state)",
                "accepted_values(state)",
                "sql(ids positive)"
            ]
        );
        assert!(check_audits(&audits, &table(), false).is_ok());
        let unknown =
            serde_json::from_value::<Audit>(serde_json::json!({"kind": "row_count", "mni": 1}));
        assert!(unknown.is_err());
    }

    #[test]
    fn audits_that_cannot_hold_are_refused_at_submission() {
        let refused = |audit: serde_json::Value, replaces: bool| {
            let audit: Audit = serde_json::from_value(audit).unwrap();
            check_audits(&[audit], &table(), replaces).unwrap_err()
        };
        assert!(
            refused(
                serde_json::json!({"kind": "not_null", "columns": ["nope"]}),
                false
            )
            .contains("'nope'")
        );
        assert!(
            refused(
                serde_json::json!({"kind": "row_count", "min": 5, "max": 1}),
                false
            )
            .contains("above")
        );
        assert!(
            refused(
                serde_json::json!({"kind": "row_count_change", "min_ratio": 0.5}),
                false
            )
            .contains("replace")
        );
        assert!(
            refused(
                serde_json::json!({"kind": "row_count_change", "min_ratio": -1.0}),
                true
            )
            .contains("not a ratio")
        );
        assert!(
            refused(
                serde_json::json!({"kind": "sql", "name": "x", "query": "SELECT true"}),
                false
            )
            .contains("{{ staging }}")
        );
        assert!(
            refused(serde_json::json!({"kind": "unique", "columns": []}), false)
                .contains("no column")
        );
    }

    #[test]
    fn counts_and_ratios_are_judged_against_their_bounds() {
        let rows = Audit::RowCount {
            min: Some(2),
            max: Some(3),
        };
        assert_eq!(Observed::Count(1).judge(&rows), (false, "1".into()));
        assert!(Observed::Count(3).judge(&rows).0);
        let nulls = Audit::NotNull {
            columns: vec!["id".into()],
        };
        assert!(Observed::Count(0).judge(&nulls).0);
        assert!(!Observed::Count(2).judge(&nulls).0);
        let change = Audit::RowCountChange {
            min_ratio: Some(0.9),
            max_ratio: Some(1.5),
        };
        assert!(Observed::Ratio(Some(1.0)).judge(&change).0);
        assert!(!Observed::Ratio(Some(0.5)).judge(&change).0);
        assert!(Observed::Ratio(None).judge(&change).0);
        assert!(!Observed::Refused("timed out".into()).judge(&nulls).0);
    }

    #[test]
    fn the_property_map_form_reads_as_the_json_form() {
        let properties: std::collections::BTreeMap<String, String> = [
            ("audit.0.kind", "not_null"),
            ("audit.0.columns.0", "id"),
            ("audit.0.columns.1", "state"),
            ("audit.1.kind", "row_count"),
            ("audit.1.min", "2"),
            ("audit.2.kind", "accepted_values"),
            ("audit.2.column", "state"),
            ("audit.2.values.0", "open"),
            ("audit.2.values.1", "closed, for good"),
            ("audit.2.values.10", "last"),
            ("audit.2.values.2", "x"),
            ("audit.2.values.3", "x"),
            ("audit.2.values.4", "x"),
            ("audit.2.values.5", "x"),
            ("audit.2.values.6", "x"),
            ("audit.2.values.7", "x"),
            ("audit.2.values.8", "x"),
            ("audit.2.values.9", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let audits = audits_from_properties(&properties).unwrap();
        assert_eq!(
            audits[0],
            Audit::NotNull {
                columns: vec!["id".into(), "state".into()]
            }
        );
        assert_eq!(
            audits[1],
            Audit::RowCount {
                min: Some(2),
                max: None
            }
        );
        let Audit::AcceptedValues { values, .. } = &audits[2] else {
            panic!("{audits:?}")
        };
        assert_eq!(values[1], "closed, for good");
        assert_eq!(
            values.last().unwrap(),
            "last",
            "list items keep their numeric order"
        );
    }

    #[test]
    fn a_malformed_property_map_is_refused_naming_the_key() {
        let refused = |pairs: &[(&str, &str)]| {
            let map = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            audits_from_properties(&map).unwrap_err()
        };
        assert!(refused(&[("audit.1.kind", "row_count")]).contains("audit.0 is missing"));
        assert!(
            refused(&[("audit.0.kind", "row_count"), ("audit.0.min", "two")])
                .contains("'audit.0.min'")
        );
        assert!(refused(&[("audits.0.kind", "row_count")]).contains("'audits.0.kind'"));
        assert!(refused(&[("audit.01.kind", "row_count")]).contains("'audit.01.kind'"));
        assert!(refused(&[("audit.0.kind", "row_count"), ("audit.0.mni", "1")]).contains("mni"));
        assert!(refused(&[("audit.0.kind", "nope")]).contains("audit.0"));
    }
}

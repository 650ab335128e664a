//! Table definitions, as JSON and as the flat property map of Flink's
//! `CatalogPropertiesUtil` (`schema.N.name`, `schema.N.data-type`, ...,
//! `partition.keys.N.name`, `comment`, and the table options at top level).
//!
//! Both forms carry the same information, so each converts to the other and
//! back without loss; the store keeps the property map. Column types are kept
//! as written (after checking they parse), so a map written by Flink comes
//! back byte for byte.
//!
//! Its tests, at the end, are a third of the file: both forms round-trip
//! for every part of a table.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::types::DataType;

/// A table: columns, watermarks, constraints, partitioning, comment, options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "columns": [{"name": "day", "type": "DATE NOT NULL"}, {"name": "total", "type": "DECIMAL(12, 2)"}],
    "primary_key": {"name": "pk_day", "columns": ["day"]},
    "comment": "totals by day",
    "options": {"format": "csv"}
}))]
pub struct TableDefinition {
    pub columns: Vec<ColumnDefinition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watermarks: Vec<Watermark>,
    #[serde(
        default,
        deserialize_with = "crate::domain::non_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(nullable = false)]
    pub primary_key: Option<PrimaryKey>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_keys: Vec<String>,
    #[serde(
        default,
        deserialize_with = "crate::domain::non_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(nullable = false)]
    pub comment: Option<String>,
    /// The table's options, e.g. `format` for a `filesystem` table.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = crate::domain::options::StringMap)]
    pub options: BTreeMap<String, String>,
}

/// A column. Physical unless it has `expr` (computed) or `metadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ColumnDefinition {
    pub name: String,
    /// A Flink SQL type, e.g. `DECIMAL(10, 2) NOT NULL`.
    #[serde(rename = "type")]
    pub data_type: String,
    #[serde(
        default,
        deserialize_with = "crate::domain::non_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(nullable = false)]
    pub comment: Option<String>,
    /// A computed column's SQL expression.
    #[serde(
        default,
        deserialize_with = "crate::domain::non_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(nullable = false)]
    pub expr: Option<String>,
    /// A metadata column's metadata key.
    #[serde(
        default,
        deserialize_with = "crate::domain::non_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(nullable = false)]
    pub metadata: Option<String>,
    /// Whether a metadata column is read-only (not written by sinks).
    #[serde(
        default,
        rename = "virtual",
        deserialize_with = "crate::domain::non_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(nullable = false)]
    pub is_virtual: Option<bool>,
}

impl ColumnDefinition {
    /// Whether the created table holds this column (computed and virtual
    /// metadata columns exist only in the engine).
    pub fn is_physical(&self) -> bool {
        self.expr.is_none() && !(self.metadata.is_some() && self.is_virtual == Some(true))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Watermark {
    pub rowtime: String,
    pub expr: String,
    /// The type of the watermark expression.
    #[serde(rename = "type")]
    pub data_type: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrimaryKey {
    pub name: String,
    pub columns: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("property '{key}': {reason}")]
    Property { key: String, reason: String },
    #[error("{0}")]
    Invalid(String),
}

fn invalid(reason: impl Into<String>) -> TableError {
    TableError::Invalid(reason.into())
}

/// Most columns a definition may have (the most any supported system holds
/// is below this; each dialect checks its own limit).
pub const MAX_COLUMNS: usize = 4096;
/// Most entries a property map may have.
pub const MAX_PROPERTIES: usize = 32 * 1024;
/// Longest property key, column name or other name in a definition, in characters.
pub const MAX_NAME_LEN: usize = 1024;
/// Longest property value, comment or expression, in characters.
pub const MAX_TEXT_LEN: usize = 64 * 1024;

const SCHEMA: &str = "schema.";
const PARTITION_KEYS: &str = "partition.keys.";
const COMMENT: &str = "comment";

/// Keys that belong to the definition itself, not to the table options.
fn is_reserved(key: &str) -> bool {
    key.starts_with(SCHEMA) || key.starts_with(PARTITION_KEYS) || key == COMMENT
}

impl TableDefinition {
    /// Checks what both forms must satisfy: types parse, names are unique and
    /// referenced columns exist.
    pub fn validate(&self) -> Result<(), TableError> {
        if self.columns.is_empty() {
            return Err(invalid("a table needs at least one column"));
        }
        if self.columns.len() > MAX_COLUMNS {
            return Err(invalid(format!(
                "a table has at most {MAX_COLUMNS} columns, not {}",
                self.columns.len()
            )));
        }
        self.check_sizes()?;
        let mut seen = std::collections::BTreeSet::new();
        for column in &self.columns {
            if column.name.is_empty() {
                return Err(invalid("a column name is empty"));
            }
            if !seen.insert(column.name.as_str()) {
                return Err(invalid(format!("column '{}' appears twice", column.name)));
            }
            DataType::parse(&column.data_type)
                .map_err(|e| invalid(format!("column '{}': {e}", column.name)))?;
            if column.expr.is_some() && column.metadata.is_some() {
                return Err(invalid(format!(
                    "column '{}' cannot be both computed and metadata",
                    column.name
                )));
            }
            if column.is_virtual.is_some() && column.metadata.is_none() {
                return Err(invalid(format!(
                    "column '{}': only metadata columns can be virtual",
                    column.name
                )));
            }
        }
        let physical = |name: &str| {
            self.columns
                .iter()
                .any(|c| c.name == name && c.is_physical())
        };
        let exists = |name: &str| seen.contains(name);
        if self.columns.iter().all(|c| !c.is_physical()) {
            return Err(invalid("a table needs at least one physical column"));
        }
        for watermark in &self.watermarks {
            if !exists(&watermark.rowtime) {
                return Err(invalid(format!(
                    "watermark column '{}' does not exist",
                    watermark.rowtime
                )));
            }
            DataType::parse(&watermark.data_type)
                .map_err(|e| invalid(format!("watermark on '{}': {e}", watermark.rowtime)))?;
        }
        if let Some(pk) = &self.primary_key {
            if pk.columns.is_empty() {
                return Err(invalid("the primary key names no column"));
            }
            let mut in_key = std::collections::BTreeSet::new();
            for column in &pk.columns {
                if !in_key.insert(column.as_str()) {
                    return Err(invalid(format!(
                        "primary key '{}' names column '{column}' twice",
                        pk.name
                    )));
                }
                if column.contains(',') || !physical(column) {
                    return Err(invalid(format!(
                        "primary key column '{column}' is not a physical column"
                    )));
                }
            }
        }
        for key in &self.partition_keys {
            if !exists(key) {
                return Err(invalid(format!("partition key '{key}' is not a column")));
            }
        }
        if let Some(key) = self.options.keys().find(|k| is_reserved(k)) {
            return Err(invalid(format!(
                "option '{key}' is reserved for the table definition"
            )));
        }
        Ok(())
    }

    /// Every name and text within its bound, so no later step (DDL, paths,
    /// messages) is handed something huge.
    fn check_sizes(&self) -> Result<(), TableError> {
        fn within(
            what: impl FnOnce() -> String,
            value: &str,
            max: usize,
        ) -> Result<(), TableError> {
            if value.chars().count() > max {
                return Err(invalid(format!(
                    "{} is longer than {max} characters",
                    what()
                )));
            }
            Ok(())
        }
        for column in &self.columns {
            within(|| "a column name".into(), &column.name, MAX_NAME_LEN)?;
            for text in [&column.comment, &column.expr, &column.metadata]
                .into_iter()
                .flatten()
            {
                within(
                    || format!("a text of column '{}'", column.name),
                    text,
                    MAX_TEXT_LEN,
                )?;
            }
        }
        for watermark in &self.watermarks {
            within(
                || "a watermark expression".into(),
                &watermark.expr,
                MAX_TEXT_LEN,
            )?;
        }
        if let Some(pk) = &self.primary_key {
            within(|| "the primary key's name".into(), &pk.name, MAX_NAME_LEN)?;
        }
        if let Some(comment) = &self.comment {
            within(|| "the table comment".into(), comment, MAX_TEXT_LEN)?;
        }
        for (key, value) in &self.options {
            within(|| "an option key".into(), key, MAX_NAME_LEN)?;
            within(|| format!("option '{key}'"), value, MAX_TEXT_LEN)?;
        }
        Ok(())
    }

    /// The property map Flink's `CatalogPropertiesUtil` writes.
    pub fn to_properties(&self) -> BTreeMap<String, String> {
        let mut properties = self.options.clone();
        let mut put = |key: String, value: &str| {
            properties.insert(key, value.to_owned());
        };
        for (i, column) in self.columns.iter().enumerate() {
            put(format!("schema.{i}.name"), &column.name);
            put(format!("schema.{i}.data-type"), &column.data_type);
            if let Some(comment) = &column.comment {
                put(format!("schema.{i}.comment"), comment);
            }
            if let Some(expr) = &column.expr {
                put(format!("schema.{i}.expr"), expr);
            }
            if let Some(metadata) = &column.metadata {
                put(format!("schema.{i}.metadata"), metadata);
            }
            if let Some(is_virtual) = column.is_virtual {
                put(
                    format!("schema.{i}.virtual"),
                    if is_virtual { "true" } else { "false" },
                );
            }
        }
        for (i, watermark) in self.watermarks.iter().enumerate() {
            put(format!("schema.watermark.{i}.rowtime"), &watermark.rowtime);
            put(
                format!("schema.watermark.{i}.strategy.expr"),
                &watermark.expr,
            );
            put(
                format!("schema.watermark.{i}.strategy.data-type"),
                &watermark.data_type,
            );
        }
        if let Some(pk) = &self.primary_key {
            put("schema.primary-key.name".into(), &pk.name);
            put("schema.primary-key.columns".into(), &pk.columns.join(","));
        }
        for (i, key) in self.partition_keys.iter().enumerate() {
            put(format!("partition.keys.{i}.name"), key);
        }
        if let Some(comment) = &self.comment {
            put(COMMENT.into(), comment);
        }
        properties
    }

    /// Reads a property map; every reserved key must be understood.
    pub fn from_properties(properties: &BTreeMap<String, String>) -> Result<Self, TableError> {
        if properties.len() > MAX_PROPERTIES {
            return Err(invalid(format!(
                "a property map has at most {MAX_PROPERTIES} entries, not {}",
                properties.len()
            )));
        }
        if let Some(key) = properties.keys().find(|k| k.chars().count() > MAX_NAME_LEN) {
            return Err(TableError::Property {
                key: key.chars().take(64).collect::<String>() + "...",
                reason: format!("keys are at most {MAX_NAME_LEN} characters"),
            });
        }
        let mut reader = PropertyReader {
            properties,
            used: Default::default(),
        };
        let mut columns = Vec::new();
        while let Some(name) = reader.take(&format!("schema.{}.name", columns.len())) {
            if columns.len() == MAX_COLUMNS {
                return Err(invalid(format!(
                    "a table has at most {MAX_COLUMNS} columns"
                )));
            }
            let i = columns.len();
            let data_type = reader.require(&format!("schema.{i}.data-type"))?;
            let is_virtual = match reader.take(&format!("schema.{i}.virtual")) {
                None => None,
                Some(v) if v == "true" => Some(true),
                Some(v) if v == "false" => Some(false),
                Some(v) => {
                    return Err(TableError::Property {
                        key: format!("schema.{i}.virtual"),
                        reason: format!("expected true or false, not '{v}'"),
                    });
                }
            };
            columns.push(ColumnDefinition {
                name,
                data_type,
                comment: reader.take(&format!("schema.{i}.comment")),
                expr: reader.take(&format!("schema.{i}.expr")),
                metadata: reader.take(&format!("schema.{i}.metadata")),
                is_virtual,
            });
        }
        let mut watermarks = Vec::new();
        while let Some(rowtime) =
            reader.take(&format!("schema.watermark.{}.rowtime", watermarks.len()))
        {
            let i = watermarks.len();
            watermarks.push(Watermark {
                rowtime,
                expr: reader.require(&format!("schema.watermark.{i}.strategy.expr"))?,
                data_type: reader.require(&format!("schema.watermark.{i}.strategy.data-type"))?,
            });
        }
        let primary_key = match reader.take("schema.primary-key.columns") {
            Some(list) => Some(PrimaryKey {
                name: reader.require("schema.primary-key.name")?,
                columns: list.split(',').map(str::to_owned).collect(),
            }),
            None => None,
        };
        let mut partition_keys = Vec::new();
        while let Some(key) = reader.take(&format!("partition.keys.{}.name", partition_keys.len()))
        {
            partition_keys.push(key);
        }
        let comment = reader.take(COMMENT);
        if let Some(key) = properties
            .keys()
            .find(|k| is_reserved(k) && !reader.used.contains(k.as_str()))
        {
            return Err(TableError::Property {
                key: key.clone(),
                reason: "not a property of a table definition (or its index is out of sequence)"
                    .into(),
            });
        }
        let options = properties
            .iter()
            .filter(|(k, _)| !is_reserved(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let table = Self {
            columns,
            watermarks,
            primary_key,
            partition_keys,
            comment,
            options,
        };
        table.validate()?;
        Ok(table)
    }
}

struct PropertyReader<'a> {
    properties: &'a BTreeMap<String, String>,
    used: std::collections::BTreeSet<String>,
}

impl PropertyReader<'_> {
    fn take(&mut self, key: &str) -> Option<String> {
        let value = self.properties.get(key)?.clone();
        self.used.insert(key.to_owned());
        Some(value)
    }

    fn require(&mut self, key: &str) -> Result<String, TableError> {
        self.take(key).ok_or_else(|| TableError::Property {
            key: key.to_owned(),
            reason: "missing".into(),
        })
    }
}

/// One column of a live table, as the external system reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnInfo {
    pub name: String,
    /// The system's own type name, e.g. `character varying(20)`.
    pub data_type: String,
    pub nullable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    pub database: String,
    pub name: String,
    pub columns: Vec<ColumnInfo>,
    /// Flink connector options that read the table (no secrets), so a
    /// reader job can be declared from them.
    pub options: std::collections::BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// A table with a primary key, column comments, a partition key, a
    /// computed column, a metadata column and a watermark, as Flink writes it.
    fn flink_written() -> BTreeMap<String, String> {
        map(&[
            ("schema.0.name", "id"),
            ("schema.0.data-type", "BIGINT NOT NULL"),
            ("schema.0.comment", "order id"),
            ("schema.1.name", "amount"),
            ("schema.1.data-type", "DECIMAL(10, 2)"),
            ("schema.2.name", "ts"),
            ("schema.2.data-type", "TIMESTAMP(3)"),
            ("schema.3.name", "day"),
            ("schema.3.data-type", "VARCHAR(2147483647)"),
            ("schema.3.expr", "DATE_FORMAT(`ts`, 'yyyy-MM-dd')"),
            ("schema.4.name", "offset"),
            ("schema.4.data-type", "BIGINT"),
            ("schema.4.metadata", "offset"),
            ("schema.4.virtual", "true"),
            ("schema.watermark.0.rowtime", "ts"),
            (
                "schema.watermark.0.strategy.expr",
                "`ts` - INTERVAL '5' SECOND",
            ),
            ("schema.watermark.0.strategy.data-type", "TIMESTAMP(3)"),
            ("schema.primary-key.name", "PK_id"),
            ("schema.primary-key.columns", "id"),
            ("partition.keys.0.name", "day"),
            ("comment", "orders by day"),
            ("connector", "jdbc"),
            ("sink.buffer-flush.max-rows", "100"),
        ])
    }

    #[test]
    fn a_map_written_by_flink_reads_and_writes_back_identically() {
        let table = TableDefinition::from_properties(&flink_written()).unwrap();

        assert_eq!(table.to_properties(), flink_written());
        assert_eq!(table.columns.len(), 5);
        assert_eq!(table.primary_key.as_ref().unwrap().columns, ["id"]);
        assert_eq!(table.options.len(), 2);
        let physical: Vec<&str> = table
            .columns
            .iter()
            .filter(|c| c.is_physical())
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            physical,
            ["id", "amount", "ts"],
            "computed and virtual metadata columns are not stored"
        );
    }

    #[test]
    fn json_and_properties_carry_the_same_table() {
        let table = TableDefinition::from_properties(&flink_written()).unwrap();
        let json = serde_json::to_value(&table).unwrap();
        let from_json: TableDefinition = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(from_json, table);
        assert_eq!(
            json["columns"][3]["expr"],
            "DATE_FORMAT(`ts`, 'yyyy-MM-dd')"
        );
        assert_eq!(
            json["primary_key"],
            serde_json::json!({"name": "PK_id", "columns": ["id"]})
        );
    }

    #[test]
    fn bad_maps_are_refused_naming_the_key_or_column() {
        let with = |changes: &[(&str, Option<&str>)]| {
            let mut properties = flink_written();
            for (key, value) in changes {
                match value {
                    Some(v) => properties.insert(key.to_string(), v.to_string()),
                    None => properties.remove(*key),
                };
            }
            TableDefinition::from_properties(&properties)
                .unwrap_err()
                .to_string()
        };
        type Change<'a> = (&'a str, Option<&'a str>);
        let cases: &[(&[Change], &str)] = &[
            (
                &[("schema.1.data-type", None)],
                "property 'schema.1.data-type': missing",
            ),
            (
                &[("schema.1.data-type", Some("MONEY"))],
                "column 'amount': invalid data type 'MONEY'",
            ),
            (
                &[("schema.7.name", Some("gap"))],
                "property 'schema.7.name'",
            ),
            (
                &[("schema.0.colour", Some("red"))],
                "property 'schema.0.colour'",
            ),
            (
                &[("schema.4.virtual", Some("yes"))],
                "expected true or false",
            ),
            (
                &[("schema.primary-key.columns", Some("day"))],
                "primary key column 'day' is not a physical column",
            ),
            (
                &[("partition.keys.0.name", Some("nope"))],
                "partition key 'nope' is not a column",
            ),
            (
                &[("schema.watermark.0.rowtime", Some("nope"))],
                "watermark column 'nope' does not exist",
            ),
            (
                &[("schema.1.name", Some("id"))],
                "column 'id' appears twice",
            ),
            (
                &[("schema.primary-key.columns", Some("id,id"))],
                "primary key 'PK_id' names column 'id' twice",
            ),
        ];
        for (changes, expected) in cases {
            let message = with(changes);
            assert!(
                message.contains(expected),
                "{message} should contain {expected}"
            );
        }
    }

    #[test]
    fn options_cannot_use_the_definitions_keys() {
        let mut table = TableDefinition::from_properties(&flink_written()).unwrap();
        table.options.insert("schema.9.name".into(), "x".into());
        assert!(
            table
                .validate()
                .unwrap_err()
                .to_string()
                .contains("reserved")
        );
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    const TYPES: &[&str] = &[
        "BIGINT NOT NULL",
        "INT",
        "STRING",
        "DECIMAL(10, 2)",
        "TIMESTAMP(3)",
        "ARRAY<INT>",
    ];

    fn text() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9_ ,.'`-]{1,12}"
    }

    fn table() -> impl Strategy<Value = TableDefinition> {
        let column = (
            prop::sample::select(TYPES),
            proptest::option::of(text()),
            prop_oneof![
                Just((None, None, None)),
                text().prop_map(|e| (Some(e), None, None)),
                (text(), proptest::option::of(any::<bool>())).prop_map(|(m, v)| (None, Some(m), v)),
            ],
        );
        (
            prop::collection::vec(column, 1..6),
            proptest::option::of(text()),
            prop::collection::btree_map("[a-z][a-z.-]{0,10}", text(), 0..4),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(columns, comment, options, with_key, with_partition)| {
                let mut columns: Vec<ColumnDefinition> = columns
                    .into_iter()
                    .enumerate()
                    .map(|(i, (data_type, comment, (expr, metadata, is_virtual)))| {
                        ColumnDefinition {
                            name: format!("c{i}"),
                            data_type: data_type.to_owned(),
                            comment,
                            expr,
                            metadata,
                            is_virtual,
                        }
                    })
                    .collect();
                // At least one physical column, first, so keys can name it.
                columns[0].expr = None;
                columns[0].metadata = None;
                columns[0].is_virtual = None;
                let options = options
                    .into_iter()
                    .filter(|(k, _)| !is_reserved(k))
                    .collect();
                TableDefinition {
                    watermarks: Vec::new(),
                    primary_key: with_key.then(|| PrimaryKey {
                        name: "pk".into(),
                        columns: vec!["c0".into()],
                    }),
                    partition_keys: if with_partition {
                        vec![columns[columns.len() - 1].name.clone()]
                    } else {
                        vec![]
                    },
                    columns,
                    comment,
                    options,
                }
            })
    }

    proptest! {
        #[test]
        fn every_table_survives_both_round_trips(table in table()) {
            prop_assert!(table.validate().is_ok(), "{:?}", table.validate());
            let properties = table.to_properties();
            let back = TableDefinition::from_properties(&properties).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&back, &table);
            prop_assert_eq!(back.to_properties(), properties);
            let json = serde_json::to_string(&table).unwrap();
            let from_json: TableDefinition = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(from_json, table);
        }
    }
}

#[cfg(test)]
mod hostile_input {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any string map, shaped like Flink's keys or not, is read or refused, never a panic.
        #[test]
        fn any_property_map_is_read_or_refused(
            entries in prop::collection::btree_map(
                prop_oneof![
                    "schema\\.[0-9]{1,2}\\.(name|data-type|expr|metadata|virtual|comment)",
                    "schema\\.watermark\\.[0-9]\\.(rowtime|strategy\\.expr|strategy\\.data-type)",
                    "schema\\.primary-key\\.(name|columns)",
                    "partition\\.keys\\.[0-9]\\.name",
                    ".{0,12}",
                ],
                ".{0,24}",
                0..12,
            )
        ) {
            if let Ok(table) = TableDefinition::from_properties(&entries) {
                let again = TableDefinition::from_properties(&table.to_properties());
                prop_assert_eq!(again, Ok(table));
            }
        }

        /// Any string is parsed as a type or refused with a reason, never a panic.
        #[test]
        fn any_type_string_is_parsed_or_refused(input in ".{0,40}|[A-Z<>(), `'0-9]{0,40}") {
            match crate::domain::flink::types::DataType::parse(&input) {
                Ok(parsed) => prop_assert_eq!(crate::domain::flink::types::DataType::parse(&parsed.to_string()), Ok(parsed)),
                Err(error) => prop_assert!(!error.reason.is_empty()),
            }
        }
    }
}

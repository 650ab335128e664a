//! Where an engine writes a hook's rows, said so that it can use it as it
//! is: Flink connector options (the table's own options merged in, secrets
//! left out: the engine has its own) and a ready `CREATE TEMPORARY TABLE`
//! statement for the sink, quoted as Flink SQL quotes. What is left out
//! as a secret is named, so the engine knows to add it.

use std::collections::BTreeMap;

use super::{Staging, WriteLocation};
use crate::domain::WriteLocationKind;
use crate::domain::flink::table::TableDefinition;
use crate::domain::flink::types::DataType;
use crate::domain::options::is_sensitive;

/// A location whose sink options are the table's own connector options
/// overlaid with `connector_options` (which say where), and whose
/// statement declares them. Sensitive options are left out.
pub fn write_location(
    kind: WriteLocationKind,
    name: String,
    staging: &Staging,
    connector_options: BTreeMap<String, String>,
) -> WriteLocation {
    let definition = &staging.definition;
    let (withheld, mut sink_options): (BTreeMap<_, _>, BTreeMap<_, _>) = definition
        .options
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .partition(|(key, _)| is_sensitive(key));
    sink_options.extend(connector_options);
    let sink_statement = Some(sink_statement(
        &format!("{}_sink", staging.table),
        definition,
        &sink_options,
    ));
    WriteLocation {
        kind,
        name,
        url: None,
        path: None,
        sink_options,
        sink_statement,
        withheld_options: withheld.into_keys().collect(),
    }
}

/// `CREATE TEMPORARY TABLE <name> (<physical columns>, PRIMARY KEY (...)
/// NOT ENFORCED) [PARTITIONED BY (...)] WITH (...)`.
pub fn sink_statement(
    name: &str,
    definition: &TableDefinition,
    options: &BTreeMap<String, String>,
) -> String {
    let mut parts: Vec<String> = definition
        .columns
        .iter()
        .filter(|c| c.is_physical())
        .map(|c| {
            let data_type = DataType::parse(&c.data_type)
                .map(|t| t.to_string())
                .unwrap_or_else(|_| c.data_type.clone());
            format!("{} {data_type}", identifier(&c.name))
        })
        .collect();
    if let Some(pk) = &definition.primary_key {
        let columns: Vec<String> = pk.columns.iter().map(|c| identifier(c)).collect();
        parts.push(format!("PRIMARY KEY ({}) NOT ENFORCED", columns.join(", ")));
    }
    let mut statement = format!(
        "CREATE TEMPORARY TABLE {} ({})",
        identifier(name),
        parts.join(", ")
    );
    if !definition.partition_keys.is_empty() {
        let keys: Vec<String> = definition
            .partition_keys
            .iter()
            .map(|k| identifier(k))
            .collect();
        statement.push_str(&format!(" PARTITIONED BY ({})", keys.join(", ")));
    }
    let with: Vec<String> = options
        .iter()
        .map(|(k, v)| format!("{} = {}", literal(k), literal(v)))
        .collect();
    statement.push_str(&format!(" WITH ({})", with.join(", ")));
    statement
}

/// A Flink SQL identifier: backquoted, backquotes doubled.
fn identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A Flink SQL string literal: single quotes doubled.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `path` as a `file://` URI, each segment percent-encoded where a URI
/// needs it (Flink's `Path` parses what it is given as a URI).
pub fn file_uri(path: &std::path::Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(byte as char)
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_statement_quotes_names_and_values_as_flink_sql_does() {
        let definition: TableDefinition = serde_json::from_value(serde_json::json!({
            "columns": [{"name": "i`d", "type": "bigint not null"}, {"name": "day", "type": "STRING"},
                        {"name": "c", "type": "INT", "expr": "1"}],
            "primary_key": {"name": "pk", "columns": ["i`d"]},
            "partition_keys": ["day"]
        }))
        .unwrap();
        let options = BTreeMap::from([("path".to_owned(), "file:///w/it's".to_owned())]);

        let statement = sink_statement("t", &definition, &options);

        assert_eq!(
            statement,
            "CREATE TEMPORARY TABLE `t` (`i``d` BIGINT NOT NULL, `day` VARCHAR(2147483647), \
             PRIMARY KEY (`i``d`) NOT ENFORCED) PARTITIONED BY (`day`) WITH ('path' = 'file:///w/it''s')"
        );
    }

    #[test]
    fn file_uris_escape_what_a_uri_would_misread() {
        assert_eq!(
            file_uri(std::path::Path::new("/w h/a#b/c")),
            "file:///w%20h/a%23b/c"
        );
    }
}

//! Audits on a staging directory: the engine's data files read in the
//! format the table names (`csv` as Flink writes it, no header, an empty
//! field for null; `json`, one object a line), files whose names start
//! with `_` or `.` skipped as engines skip them. Each audit is one pass
//! over the rows; a format ctasd does not read fails the audit, naming it.

use std::collections::HashMap;

use super::Failure;
use super::beneath::{Dir, Kind};
use super::table::Table;
use super::table_format;
use crate::catalog::{Staging, staging_missing};
use crate::domain::audit::{Audit, Observed};

/// A row: each physical column's value as text, `None` for null.
type Row = Vec<Option<String>>;

impl Table {
    /// What each audit observes on the staging directory.
    pub(super) fn audit(
        &self,
        staging: &Staging,
        audits: &[Audit],
    ) -> Result<Vec<Observed>, Failure> {
        if self.db.kind(&self.staging)? != Kind::Directory {
            return Err(staging_missing(staging).into());
        }
        let columns: Vec<String> = staging
            .definition
            .columns
            .iter()
            .filter(|c| c.is_physical())
            .map(|c| c.name.clone())
            .collect();
        let format = table_format(&staging.definition);
        let rows = match read_rows(&self.db.open_dir(&self.staging)?, &columns, format)? {
            Ok(rows) => rows,
            Err(refusal) => {
                return Ok(audits
                    .iter()
                    .map(|_| Observed::Refused(refusal.clone()))
                    .collect());
            }
        };
        let mut observed = Vec::with_capacity(audits.len());
        for audit in audits {
            observed.push(match audit {
                Audit::RowCountChange { .. } => {
                    self.row_count_change(rows.len(), &columns, format)?
                }
                audit => observe(audit, &columns, &rows),
            });
        }
        Ok(observed)
    }

    fn row_count_change(
        &self,
        staged: usize,
        columns: &[String],
        format: &str,
    ) -> Result<Observed, Failure> {
        if self.db.kind(&self.target)? != Kind::Directory {
            return Ok(Observed::Ratio(None));
        }
        let replaced = match read_rows(&self.db.open_dir(&self.target)?, columns, format)? {
            Ok(rows) => rows.len(),
            Err(refusal) => return Ok(Observed::Refused(refusal)),
        };
        Ok(Observed::Ratio(Some(match (staged, replaced) {
            (0, 0) => 1.0,
            (_, 0) => f64::INFINITY,
            (staged, replaced) => staged as f64 / replaced as f64,
        })))
    }
}

/// A counting audit over rows already read.
fn observe(audit: &Audit, columns: &[String], rows: &[Row]) -> Observed {
    let position = |name: &str| columns.iter().position(|c| c == name);
    let positions =
        |names: &[String]| -> Vec<usize> { names.iter().filter_map(|n| position(n)).collect() };
    let count = |n: usize| Observed::Count(n as u64);
    match audit {
        Audit::RowCount { .. } => count(rows.len()),
        Audit::NotNull { columns } => {
            let at = positions(columns);
            count(
                rows.iter()
                    .filter(|row| at.iter().any(|&i| row[i].is_none()))
                    .count(),
            )
        }
        Audit::Unique { columns } => {
            let at = positions(columns);
            let mut seen: HashMap<Vec<Option<&str>>, usize> = HashMap::new();
            for row in rows {
                let key: Vec<Option<&str>> = at.iter().map(|&i| row[i].as_deref()).collect();
                if key.iter().all(Option::is_none) {
                    continue;
                }
                *seen.entry(key).or_default() += 1;
            }
            count(seen.values().filter(|&&n| n > 1).count())
        }
        Audit::AcceptedValues { column, values } => {
            let Some(i) = position(column) else {
                return Observed::Refused(format!("the table has no column '{column}'"));
            };
            count(
                rows.iter()
                    .filter(|row| row[i].as_ref().is_some_and(|v| !values.contains(v)))
                    .count(),
            )
        }
        Audit::RowCountChange { .. } => unreachable!("compared with the replaced table above"),
        Audit::Sql { .. } => Observed::Refused("a filesystem catalog runs no SQL".into()),
    }
}

/// Every row of the data files in `dir`, or why they cannot be read as
/// `format` (which fails the audits, the staging kept as it is).
fn read_rows(
    dir: &Dir,
    columns: &[String],
    format: &str,
) -> Result<Result<Vec<Row>, String>, Failure> {
    let mut rows = Vec::new();
    let mut names: Vec<String> = dir
        .entries()?
        .into_iter()
        .filter(|(_, kind)| *kind == Kind::File)
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('_') && !name.starts_with('.'))
        .collect();
    names.sort();
    for name in names {
        let bytes = dir.read(&name)?;
        let read = match format {
            "csv" => csv_rows(&bytes, columns.len()),
            "json" => json_rows(&bytes, columns),
            other => Err(format!(
                "ctasd reads csv and json data files, not '{other}'"
            )),
        };
        match read {
            Ok(mut read) => rows.append(&mut read),
            Err(refusal) => return Ok(Err(format!("data file '{name}': {refusal}"))),
        }
    }
    Ok(Ok(rows))
}

fn csv_rows(bytes: &[u8], width: usize) -> Result<Vec<Row>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(false)
        .from_reader(bytes);
    let mut rows = Vec::new();
    for (line, record) in reader.records().enumerate() {
        let record = record.map_err(|e| format!("line {}: {e}", line + 1))?;
        if record.len() != width {
            return Err(format!(
                "line {}: {} fields, the table has {width} columns",
                line + 1,
                record.len()
            ));
        }
        rows.push(
            record
                .iter()
                .map(|f| (!f.is_empty()).then(|| f.to_owned()))
                .collect(),
        );
    }
    Ok(rows)
}

fn json_rows(bytes: &[u8], columns: &[String]) -> Result<Vec<Row>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let mut rows = Vec::new();
    for (line, text) in text
        .lines()
        .enumerate()
        .filter(|(_, t)| !t.trim().is_empty())
    {
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|e| format!("line {}: {e}", line + 1))?;
        rows.push(
            columns
                .iter()
                .map(|c| match object.get(c) {
                    None | Some(serde_json::Value::Null) => None,
                    Some(serde_json::Value::String(s)) => Some(s.clone()),
                    Some(other) => Some(other.to_string()),
                })
                .collect(),
        );
    }
    Ok(rows)
}

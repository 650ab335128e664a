//! Aligned text tables, as `kubectl get` prints them: a header in capitals,
//! columns padded to their widest cell, two spaces apart.

use serde_json::Value;

pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<const N: usize>(header: [&str; N]) -> Self {
        Self {
            rows: vec![header.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    pub fn row<const N: usize>(&mut self, cells: [String; N]) {
        // One line per row: a cell's line breaks would break the columns.
        self.rows.push(
            cells
                .into_iter()
                .map(|c| c.replace(['\n', '\r'], " "))
                .collect(),
        );
    }

    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r.get(c).map_or(0, |cell| cell.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                let last = c + 1 == row.len();
                match last {
                    true => line.push_str(cell),
                    false => line.push_str(&format!("{cell:<width$}  ", width = widths[c])),
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Labelled values, one a line, the values aligned: a single item's fields.
pub fn facts(pairs: &[(&str, String)]) -> String {
    let width = pairs
        .iter()
        .map(|(label, _)| label.len())
        .max()
        .unwrap_or(0);
    pairs
        .iter()
        .map(|(label, value)| format!("{label:<width$}  {}\n", value.replace(['\n', '\r'], " ")))
        .collect()
}

/// A JSON value as a cell: text as it is, `-` for null or absent.
pub fn field(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// An RFC 3339 time as `2026-12-07 11:40:38`, UTC.
pub fn short_time(value: &Value) -> String {
    value
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| {
            t.with_timezone(&chrono::Utc)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|| field(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_their_widest_cell() {
        let mut table = Table::new(["ID", "NAME"]);
        table.row(["1".into(), "short".into()]);
        table.row(["12345".into(), "a\nname".into()]);
        assert_eq!(table.render(), "ID     NAME\n1      short\n12345  a name\n");
    }
}

//! Flink's job listing, read as it arrives. `/jobs/overview` lists every
//! job the cluster knows, ended ones included (an hour by default), so a
//! busy cluster's answer runs to tens of megabytes though ctasd watches a
//! few of its jobs. The answer is cut into its job entries while it
//! streams in, and only the entries of watched jobs are decoded and kept:
//! memory is bounded by one entry, not by the answer.
//!
//! The cut follows JSON's structure (strings and their escapes included,
//! so a brace in a job's name is only text): the entries are the objects
//! of the array under the top-level key `jobs`. What the cut passes over
//! is checked for shape only; each kept entry is decoded by serde.

/// The largest job entry read: Flink's are a few hundred bytes.
pub const MAX_ENTRY_BYTES: usize = 64 << 10;

/// Why a listing could not be cut into entries: not JSON, JSON of another
/// shape than `{"jobs": [...]}`, or an entry over [`MAX_ENTRY_BYTES`];
/// where, never what (an answer is not quoted back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutError {
    pub what: &'static str,
    pub line: usize,
    pub column: usize,
}

const NOT_JSON: &str = "text that is not JSON";
const OTHER_SHAPE: &str = "a value of another type or shape";
const CUT_SHORT: &str = "JSON cut short";
const ENTRY_TOO_LONG: &str = "a job entry over 64 KiB";

/// Cuts a listing fed in chunks into the entries of its `jobs` array.
pub struct ListingCutter {
    /// The open containers, outermost first: `{` or `[`.
    open: Vec<u8>,
    in_string: bool,
    escaped: bool,
    /// The last string closed at the top level, up to a few bytes: a key.
    key: Vec<u8>,
    /// Whether the array open at depth 2 is the one under `jobs`.
    in_jobs: bool,
    seen_jobs: bool,
    /// The entry being read, while one is.
    entry: Option<Vec<u8>>,
    /// Whether the top-level value has ended.
    closed: bool,
    /// Where the cut is, for an error: 1-based line, column within it.
    line: usize,
    column: usize,
}

impl Default for ListingCutter {
    fn default() -> Self {
        Self {
            open: Vec::new(),
            in_string: false,
            escaped: false,
            key: Vec::new(),
            in_jobs: false,
            seen_jobs: false,
            entry: None,
            closed: false,
            line: 1,
            column: 0,
        }
    }
}

impl ListingCutter {
    /// Reads `chunk`, handing each complete entry to `found`.
    pub fn feed(&mut self, chunk: &[u8], found: &mut impl FnMut(&[u8])) -> Result<(), CutError> {
        for &byte in chunk {
            if byte == b'\n' {
                self.line += 1;
                self.column = 0;
            } else {
                self.column += 1;
            }
            if let Some(entry) = &mut self.entry {
                if entry.len() == MAX_ENTRY_BYTES {
                    return Err(self.error(ENTRY_TOO_LONG));
                }
                entry.push(byte);
            }
            if self.in_string {
                match (self.escaped, byte) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    (false, _) if self.open.len() == 1 && self.key.len() < 8 => {
                        self.key.push(byte);
                    }
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' if self.open.is_empty() => return Err(self.error(OTHER_SHAPE)),
                b'"' => {
                    self.in_string = true;
                    if self.open.len() == 1 {
                        self.key.clear();
                    }
                }
                b'{' | b'[' => self.open_container(byte)?,
                b'}' | b']' => self.close_container(byte, found)?,
                b' ' | b'\t' | b'\n' | b'\r' => {}
                _ if self.open.is_empty() => return Err(self.error(NOT_JSON)),
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether the listing ended whole, with its `jobs` array.
    pub fn finish(&self) -> Result<(), CutError> {
        match (self.closed, self.seen_jobs) {
            (false, _) => Err(self.error(CUT_SHORT)),
            (true, false) => Err(self.error(OTHER_SHAPE)),
            (true, true) => Ok(()),
        }
    }

    fn error(&self, what: &'static str) -> CutError {
        CutError {
            what,
            line: self.line,
            column: self.column,
        }
    }

    fn open_container(&mut self, byte: u8) -> Result<(), CutError> {
        if self.closed || (self.open.is_empty() && byte != b'{') {
            return Err(self.error(OTHER_SHAPE));
        }
        if self.open.len() == 1 && byte == b'[' {
            self.in_jobs = self.key == b"jobs";
            self.seen_jobs |= self.in_jobs;
        }
        if self.in_jobs && self.open.len() == 2 && byte == b'{' {
            self.entry = Some(vec![b'{']);
        }
        self.open.push(byte);
        Ok(())
    }

    fn close_container(&mut self, byte: u8, found: &mut impl FnMut(&[u8])) -> Result<(), CutError> {
        let opened = if byte == b'}' { b'{' } else { b'[' };
        if self.open.pop() != Some(opened) {
            return Err(self.error(NOT_JSON));
        }
        match self.open.len() {
            2 => {
                if let Some(entry) = self.entry.take() {
                    found(&entry);
                }
            }
            1 => self.in_jobs = false,
            0 => self.closed = true,
            _ => {}
        }
        Ok(())
    }
}

/// The job id an entry names, found without decoding the entry: Flink
/// writes `"jid":"<32 hex digits>"` first. `None` when it is not there so.
pub fn entry_job_id(entry: &[u8]) -> Option<&str> {
    const KEY: &[u8] = b"\"jid\":\"";
    let at = entry.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let id = entry.get(at..at + 32)?;
    (entry.get(at + 32) == Some(&b'"'))
        .then(|| std::str::from_utf8(id).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(answer: &[u8], chunk: usize) -> Result<Vec<String>, CutError> {
        let mut cutter = ListingCutter::default();
        let mut entries = Vec::new();
        for piece in answer.chunks(chunk) {
            cutter.feed(piece, &mut |e| {
                entries.push(String::from_utf8(e.to_vec()).unwrap())
            })?;
        }
        cutter.finish()?;
        Ok(entries)
    }

    #[test]
    fn entries_are_cut_whole_however_the_answer_is_split() {
        let answer = br#" {"jobs": [{"jid":"a","name":"x}{\"]","tasks":{"total":1}},
            {"jid":"b","name":"[\\"}] , "other": [{"jid":"c"}]}"#;
        for chunk in [1, 2, 3, 7, 1000] {
            let entries = cut(answer, chunk).unwrap();
            assert_eq!(
                entries,
                vec![
                    r#"{"jid":"a","name":"x}{\"]","tasks":{"total":1}}"#.to_owned(),
                    r#"{"jid":"b","name":"[\\"}"#.to_owned(),
                ],
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn what_is_not_a_listing_is_named_with_where_it_went_wrong() {
        let what = |answer: &[u8]| cut(answer, 4).map_err(|e| (e.what, e.line, e.column));
        assert_eq!(what(b"<html>"), Err((NOT_JSON, 1, 1)));
        assert_eq!(
            what(b"{\n\"jobs\":[{\"jid\":\"a\"}"),
            Err((CUT_SHORT, 2, 19))
        );
        assert_eq!(what(br#"{"jobs":"secret"}"#), Err((OTHER_SHAPE, 1, 17)));
        assert_eq!(what(br#"[{"jobs":[]}]"#), Err((OTHER_SHAPE, 1, 1)));
        assert_eq!(what(br#"{"jobs":[}]}"#), Err((NOT_JSON, 1, 10)));
        let long = format!(
            r#"{{"jobs":[{{"name":"{}"}}]}}"#,
            "n".repeat(MAX_ENTRY_BYTES)
        );
        assert_eq!(what(long.as_bytes()).unwrap_err().0, ENTRY_TOO_LONG);
    }

    #[test]
    fn an_entrys_job_id_is_found_where_flink_writes_it() {
        let id = "0123456789abcdef0123456789abcdef";
        let entry = format!(r#"{{"jid":"{id}","name":"n","state":"RUNNING"}}"#);
        assert_eq!(entry_job_id(entry.as_bytes()), Some(id));
        assert_eq!(entry_job_id(br#"{"jid":"short","name":"n"}"#), None);
        assert_eq!(entry_job_id(br#"{"name":"n"}"#), None);
    }
}

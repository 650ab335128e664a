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

use std::borrow::Cow;

use serde::Deserialize;

use crate::domain::job::JobStatus;

/// A job as `/jobs/overview` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlinkJob {
    pub id: String,
    pub state: JobStatus,
    /// When the job last changed (unix ms).
    pub last_modification: i64,
}

impl FlinkJob {
    /// The job as a listing shows it, borrowed.
    pub fn listed(&self) -> ListedJob<'_> {
        ListedJob {
            id: &self.id,
            state: self.state,
            last_modification: self.last_modification,
        }
    }
}

/// A job as `/jobs/overview` lists it, read from the listing in place:
/// most listed jobs are just as they were, and nothing of them is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedJob<'a> {
    pub id: &'a str,
    pub state: JobStatus,
    /// When the job last changed (unix ms).
    pub last_modification: i64,
}

impl From<ListedJob<'_>> for FlinkJob {
    fn from(job: ListedJob<'_>) -> Self {
        Self {
            id: job.id.to_owned(),
            state: job.state,
            last_modification: job.last_modification,
        }
    }
}

/// What reads a listing: the jobs it watches, as they are listed.
pub trait ListingReader {
    /// Whether the job Flink lists as `id` is watched: only a watched job's
    /// entry is decoded.
    fn watches(&self, id: &str) -> bool;

    /// A watched job, as listed. A listing that turns out unreadable after
    /// some of its jobs were read fails as a whole.
    fn read(&mut self, job: ListedJob<'_>);
}

/// Why a listing could not be read: it could not be cut into entries, or
/// a watched job's entry is not one of Flink's.
#[derive(Debug)]
pub enum UnreadableListing {
    Cut(CutError),
    Entry(serde_json::Error),
}

/// A listing read chunk by chunk into a [`ListingReader`]: cut into
/// entries, and only the entries of watched jobs decoded.
#[derive(Default)]
pub struct ListingDecoder {
    cutter: ListingCutter,
    /// The first watched entry that was not Flink's: the listing fails
    /// once read, and no later entry is decoded.
    unreadable: Option<serde_json::Error>,
}

#[derive(Deserialize)]
struct OverviewJob<'a> {
    #[serde(borrow)]
    jid: Cow<'a, str>,
    #[serde(borrow)]
    state: Cow<'a, str>,
    #[serde(rename = "last-modification", default)]
    last_modification: i64,
}

impl ListingDecoder {
    /// Reads `chunk`, handing `reader` each watched job whose entry it
    /// completes.
    pub fn feed(
        &mut self,
        chunk: &[u8],
        reader: &mut impl ListingReader,
    ) -> Result<(), UnreadableListing> {
        let unreadable = &mut self.unreadable;
        let found = &mut |entry: &[u8]| {
            let listed_id = entry_job_id(entry);
            if unreadable.is_some() || listed_id.is_some_and(|id| !reader.watches(id)) {
                return;
            }
            match serde_json::from_slice::<OverviewJob>(entry) {
                // A state this build does not know is left for a later one.
                Ok(job) if listed_id == Some(&*job.jid) || reader.watches(&job.jid) => {
                    if let Ok(state) = job.state.parse() {
                        reader.read(ListedJob {
                            id: &job.jid,
                            state,
                            last_modification: job.last_modification,
                        });
                    }
                }
                Ok(_) => {}
                Err(error) => *unreadable = Some(error),
            }
        };
        self.cutter
            .feed(chunk, found)
            .map_err(UnreadableListing::Cut)
    }

    /// Whether the listing was read whole, and every watched entry in it.
    pub fn finish(self) -> Result<(), UnreadableListing> {
        self.cutter.finish().map_err(UnreadableListing::Cut)?;
        match self.unreadable {
            Some(error) => Err(UnreadableListing::Entry(error)),
            None => Ok(()),
        }
    }
}

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
    /// Whether an entry is being read.
    in_entry: bool,
    /// What arrived of the entry being read in the chunks before this
    /// one: an entry that lies within one chunk is handed on as it lies.
    carried: Vec<u8>,
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
            in_entry: false,
            carried: Vec::new(),
            closed: false,
            line: 1,
            column: 0,
        }
    }
}

impl ListingCutter {
    /// Reads `chunk`, handing each complete entry to `found`.
    pub fn feed(&mut self, chunk: &[u8], found: &mut impl FnMut(&[u8])) -> Result<(), CutError> {
        match self.cut(chunk, found) {
            Ok(()) => {
                self.advance(chunk);
                Ok(())
            }
            Err((what, at)) => {
                self.advance(&chunk[..=at]);
                Err(self.error(what))
            }
        }
    }

    /// Whether the listing ended whole, with its `jobs` array.
    pub fn finish(&self) -> Result<(), CutError> {
        match (self.closed, self.seen_jobs) {
            (false, _) => Err(self.error(CUT_SHORT)),
            (true, false) => Err(self.error(OTHER_SHAPE)),
            (true, true) => Ok(()),
        }
    }

    /// The cut of one chunk: strings are skipped to their next quote or
    /// backslash, the bytes between structural ones in a container are
    /// passed over, and an entry is handed on as it lies in the chunk, or
    /// copied in whole slices when it spans chunks. An error names
    /// what went wrong and the index of the byte where.
    fn cut(
        &mut self,
        chunk: &[u8],
        found: &mut impl FnMut(&[u8]),
    ) -> Result<(), (&'static str, usize)> {
        // Where the part of the entry being read that lies in this chunk begins.
        let mut entry_from = 0;
        let mut at = 0;
        while at < chunk.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    at += 1;
                    continue;
                }
                let rest = &chunk[at..];
                let text = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
                self.keep_key(&rest[..text]);
                match rest.get(text) {
                    Some(b'\\') => self.escaped = true,
                    Some(_) => self.in_string = false,
                    None => {}
                }
                at += text + 1;
                continue;
            }
            let byte = chunk[at];
            match byte {
                b'"' if self.open.is_empty() => return Err((OTHER_SHAPE, at)),
                b'"' => {
                    self.in_string = true;
                    if self.open.len() == 1 {
                        self.key.clear();
                    }
                }
                b'{' | b'[' => {
                    self.open_container(byte).map_err(|what| (what, at))?;
                    if byte == b'{' && self.in_jobs && self.open.len() == 3 {
                        self.in_entry = true;
                        entry_from = at;
                    }
                }
                b'}' | b']' => {
                    let closes_entry = self.open.len() == 3 && self.in_entry;
                    self.close_container(byte).map_err(|what| (what, at))?;
                    if closes_entry {
                        self.in_entry = false;
                        let part = &chunk[entry_from..=at];
                        if self.carried.is_empty() {
                            check_entry_len(part.len()).map_err(|w| (w, at))?;
                            found(part);
                        } else {
                            extend_entry(&mut self.carried, part).map_err(|w| (w, at))?;
                            found(&self.carried);
                            self.carried.clear();
                        }
                    }
                }
                b' ' | b'\t' | b'\n' | b'\r' => {}
                _ if self.open.is_empty() => return Err((NOT_JSON, at)),
                _ => {}
            }
            at += 1;
            if !self.in_string && !self.open.is_empty() {
                // Between strings in a container only quotes and brackets matter.
                at += chunk[at..]
                    .iter()
                    .position(|b| STRUCTURAL[usize::from(*b)])
                    .unwrap_or(chunk.len() - at);
            }
        }
        if self.in_entry {
            extend_entry(&mut self.carried, &chunk[entry_from..])
                .map_err(|w| (w, chunk.len() - 1))?;
        }
        Ok(())
    }

    /// Keeps the start of a top-level string: a key.
    fn keep_key(&mut self, text: &[u8]) {
        if self.open.len() == 1 && self.key.len() < 8 {
            let room = 8 - self.key.len();
            self.key.extend_from_slice(&text[..text.len().min(room)]);
        }
    }

    /// Moves the error position past `read`.
    fn advance(&mut self, read: &[u8]) {
        match memchr::memrchr(b'\n', read) {
            Some(last) => {
                self.line += memchr::memchr_iter(b'\n', read).count();
                self.column = read.len() - last - 1;
            }
            None => self.column += read.len(),
        }
    }

    fn error(&self, what: &'static str) -> CutError {
        CutError {
            what,
            line: self.line,
            column: self.column,
        }
    }

    fn open_container(&mut self, byte: u8) -> Result<(), &'static str> {
        if self.closed || (self.open.is_empty() && byte != b'{') {
            return Err(OTHER_SHAPE);
        }
        if self.open.len() == 1 && byte == b'[' {
            self.in_jobs = self.key == b"jobs";
            self.seen_jobs |= self.in_jobs;
        }
        self.open.push(byte);
        Ok(())
    }

    fn close_container(&mut self, byte: u8) -> Result<(), &'static str> {
        let opened = if byte == b'}' { b'{' } else { b'[' };
        if self.open.pop() != Some(opened) {
            return Err(NOT_JSON);
        }
        match self.open.len() {
            1 => self.in_jobs = false,
            0 => self.closed = true,
            _ => {}
        }
        Ok(())
    }
}

/// The bytes that open or close a string or a container.
const STRUCTURAL: [bool; 256] = {
    let mut table = [false; 256];
    table[b'"' as usize] = true;
    table[b'{' as usize] = true;
    table[b'}' as usize] = true;
    table[b'[' as usize] = true;
    table[b']' as usize] = true;
    table
};

/// Adds `part` to an entry, within [`MAX_ENTRY_BYTES`].
fn extend_entry(entry: &mut Vec<u8>, part: &[u8]) -> Result<(), &'static str> {
    check_entry_len(entry.len() + part.len())?;
    entry.extend_from_slice(part);
    Ok(())
}

fn check_entry_len(len: usize) -> Result<(), &'static str> {
    match len > MAX_ENTRY_BYTES {
        true => Err(ENTRY_TOO_LONG),
        false => Ok(()),
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
    fn every_entry_is_cut_as_serde_reads_it_whatever_its_strings_hold() {
        let names = [
            "plain",
            r#"quote " brace { bracket ] backslash \ end"#,
            "\\",
            "\\\"",
            "ends in backslash \\",
            "tab\t newline\n é ✓ 𝄞",
            "}]}]",
        ];
        let jobs: Vec<serde_json::Value> = names
            .iter()
            .enumerate()
            .map(|(n, name)| {
                serde_json::json!({"jid": format!("{n:032x}"), "name": name,
                    "tasks": {"total": n, "running": [n, {"deep": "}"}]}})
            })
            .collect();
        let answer = serde_json::json!({"other": {"jobs": "not these"}, "jobs": jobs});
        for pretty in [false, true] {
            let text = match pretty {
                true => serde_json::to_vec_pretty(&answer).unwrap(),
                false => serde_json::to_vec(&answer).unwrap(),
            };
            for chunk in (1..=17).chain([text.len()]) {
                let entries: Vec<serde_json::Value> = cut(&text, chunk)
                    .unwrap()
                    .iter()
                    .map(|e| serde_json::from_str(e).unwrap())
                    .collect();
                assert_eq!(entries, jobs, "chunks of {chunk}, pretty {pretty}");
            }
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
        let whole = cut(long.as_bytes(), long.len()).unwrap_err();
        assert_eq!(whole.what, ENTRY_TOO_LONG);
    }

    /// Watches the jobs it is given, and keeps what it read of them.
    struct Keeping {
        watched: Vec<String>,
        read: Vec<FlinkJob>,
    }

    impl ListingReader for Keeping {
        fn watches(&self, id: &str) -> bool {
            self.watched.iter().any(|w| w == id)
        }

        fn read(&mut self, job: ListedJob<'_>) {
            self.read.push(job.into());
        }
    }

    /// `answer` decoded in chunks of `chunk` bytes: entries spanning
    /// chunks (copied) or lying within one (read in place).
    fn decode(
        answer: &str,
        chunk: usize,
        watched: &[String],
    ) -> (Result<(), UnreadableListing>, Vec<FlinkJob>) {
        let mut reader = Keeping {
            watched: watched.to_vec(),
            read: Vec::new(),
        };
        let mut decoder = ListingDecoder::default();
        for piece in answer.as_bytes().chunks(chunk) {
            if let Err(error) = decoder.feed(piece, &mut reader) {
                return (Err(error), reader.read);
            }
        }
        (decoder.finish(), reader.read)
    }

    #[test]
    fn only_watched_entries_are_decoded_however_flink_writes_their_id() {
        let [a, b, c] = [1, 2, 3].map(|n| format!("{n:032x}"));
        // `c`'s id is written with an escape, and not first: decoded to find it.
        let c_escaped = format!("\\u0030{}", &c[1..]);
        let answer = format!(
            r#"{{"jobs":[{{"jid":"{a}","state":"RUNNING","last-modification":5}},
            {{"jid":"{b}","state":42}},
            {{"name":"n","state":"FINISHED","jid":"{c_escaped}","last-modification":7}},
            {{"jid":"{a}","state":"SOMETHING_NEW"}}]}}"#
        );
        for chunk in [5, answer.len()] {
            let (read, jobs) = decode(&answer, chunk, &[a.clone(), c.clone()]);
            read.unwrap();
            assert_eq!(
                jobs,
                vec![
                    FlinkJob {
                        id: a.clone(),
                        state: JobStatus::Running,
                        last_modification: 5
                    },
                    FlinkJob {
                        id: c.clone(),
                        state: JobStatus::Finished,
                        last_modification: 7
                    },
                ],
                "chunks of {chunk}: b is not watched, so its odd state is not read; \
                 a state unknown is left"
            );

            let (read, jobs) = decode(&answer, chunk, std::slice::from_ref(&b));
            assert!(matches!(read, Err(UnreadableListing::Entry(_))), "{read:?}");
            assert!(jobs.is_empty());
        }
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

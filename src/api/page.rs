//! Keyset pagination shared by the list endpoints: a page size within
//! bounds, opaque page tokens that carry the last key seen (so pages stay
//! stable while rows are inserted), and pages bounded by bytes as well as by
//! count: rows are fetched a few at a time and the page ends early once its
//! JSON reaches [`MAX_PAGE_BYTES`], so one list of large jobs can exhaust
//! neither the server's memory nor the client's.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use axum::response::IntoResponse;

use super::error::{ApiError, ProblemCode};

pub const DEFAULT_PAGE_SIZE: u32 = 100;
pub const MAX_PAGE_SIZE: u32 = 1000;
/// A page stops growing once its items take this many bytes of JSON; its
/// token continues after the last item it holds.
pub const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;
/// Most rows fetched from the store at once while a page is built.
const MAX_CHUNK: u32 = 128;

/// The requested page size, or the default; 400 outside 1 to 1000.
pub fn page_size(requested: Option<u32>) -> Result<u32, ApiError> {
    let size = requested.unwrap_or(DEFAULT_PAGE_SIZE);
    if (1..=MAX_PAGE_SIZE).contains(&size) {
        return Ok(size);
    }
    let message = format!("must be between 1 and {MAX_PAGE_SIZE}");
    Err(
        ApiError::new(ProblemCode::QueryInvalid, format!("page_size {message}"))
            .with_field("page_size", message),
    )
}

/// A token for the page after `last`; `kind` keeps one list's tokens out of another.
pub fn encode_token(kind: &str, last: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{kind}1:{last}"))
}

/// The last key of the previous page, checked by `parse`.
pub fn decode_token<T>(
    kind: &str,
    token: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<T, ApiError> {
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| text.strip_prefix(&format!("{kind}1:")).and_then(parse))
        .ok_or_else(|| {
            ApiError::new(
                ProblemCode::PageTokenInvalid,
                "page_token is not a token this server issued for this list; start again without it",
            )
            .with_field("page_token", "not a token this server issued")
        })
}

/// A page as JSON, `{"<items>": [...], "next_page_token": ...}`, holding
/// at most `size` rows and about [`MAX_PAGE_BYTES`], each row serialized
/// once. The handler fetches what [`Self::wants`] asks for until it asks
/// for nothing more:
///
/// ```text
/// while let Some((after, limit)) = page.wants() { page.take(fetch(after, limit), ...) }
/// ```
pub struct BoundedPage<K> {
    kind: &'static str,
    size: u32,
    items: Vec<u8>,
    count: u32,
    /// The key of the last row taken (or of the page before).
    after: Option<K>,
    /// How many rows to fetch next.
    chunk: u32,
    /// Set once the page is complete: where the next page starts, if anywhere.
    next: Option<Option<K>>,
}

impl<K: Clone + std::fmt::Display> BoundedPage<K> {
    /// A page of up to `size` rows after `after`; `kind` tags its tokens.
    pub fn new(kind: &'static str, size: u32, after: Option<K>) -> Self {
        Self {
            kind,
            size,
            items: Vec::new(),
            count: 0,
            after,
            chunk: size.min(16),
            next: None,
        }
    }

    /// The rows to fetch next, in key order: strictly after the key, at
    /// most this many; `None` once the page is complete.
    pub fn wants(&self) -> Option<(Option<K>, u32)> {
        if self.next.is_some() {
            return None;
        }
        // One more than needed, to learn whether a next page exists.
        Some((
            self.after.clone(),
            self.chunk.min(self.size - self.count) + 1,
        ))
    }

    /// Adds the rows fetched for [`Self::wants`].
    pub fn take<T, V: serde::Serialize>(
        &mut self,
        rows: Vec<T>,
        key: impl Fn(&T) -> K,
        view: impl Fn(&T) -> V,
    ) -> Result<(), ApiError> {
        let want = self.chunk.min(self.size - self.count) as usize;
        let mut taken = 0;
        for row in rows.iter().take(want) {
            if self.is_full() {
                break;
            }
            if self.count > 0 {
                self.items.push(b',');
            }
            serde_json::to_writer(&mut self.items, &view(row)).map_err(unserializable)?;
            self.count += 1;
            taken += 1;
            self.after = Some(key(row));
        }
        // Rows beyond this chunk, or rows of it left out of a full page.
        let more = rows.len() > taken;
        if !more {
            self.next = Some(None);
        } else if self.is_full() {
            self.next = Some(self.after.clone());
        } else {
            // Rows as large as the ones so far fill the rest of the budget.
            let average = (self.items.len() / self.count.max(1) as usize).max(1);
            let room = MAX_PAGE_BYTES.saturating_sub(self.items.len()) / average;
            self.chunk = u32::try_from(room).unwrap_or(MAX_CHUNK).clamp(1, MAX_CHUNK);
        }
        Ok(())
    }

    /// Holds its rows, or as many bytes as a page may (and one row at least).
    fn is_full(&self) -> bool {
        self.count == self.size || (self.count > 0 && self.items.len() >= MAX_PAGE_BYTES)
    }

    /// The page as the answer, its items under `field`.
    pub fn into_response(self, field: &str) -> Result<axum::response::Response, ApiError> {
        let token = self
            .next
            .flatten()
            .map(|last| encode_token(self.kind, &last.to_string()));
        let mut body = Vec::with_capacity(self.items.len() + field.len() + 64);
        body.extend_from_slice(b"{\"");
        body.extend_from_slice(field.as_bytes());
        body.extend_from_slice(b"\":[");
        body.extend_from_slice(&self.items);
        body.extend_from_slice(b"],\"next_page_token\":");
        serde_json::to_writer(&mut body, &token).map_err(unserializable)?;
        body.push(b'}');
        Ok((
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response())
    }
}

fn unserializable(error: serde_json::Error) -> ApiError {
    ApiError::internal(ProblemCode::Internal, error, "the server failed")
}

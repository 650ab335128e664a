//! Keyset pagination shared by the list endpoints: a page size within
//! bounds, and opaque page tokens that carry the last key seen (so pages stay
//! stable while rows are inserted).

use axum::http::StatusCode;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::error::ApiError;

pub const DEFAULT_PAGE_SIZE: u32 = 100;
pub const MAX_PAGE_SIZE: u32 = 1000;

/// The requested page size, or the default; 400 outside 1 to 1000.
pub fn page_size(requested: Option<u32>) -> Result<u32, ApiError> {
    let size = requested.unwrap_or(DEFAULT_PAGE_SIZE);
    if (1..=MAX_PAGE_SIZE).contains(&size) {
        return Ok(size);
    }
    let message = format!("must be between 1 and {MAX_PAGE_SIZE}");
    Err(ApiError::new(
        StatusCode::BAD_REQUEST,
        "QUERY_INVALID",
        "Invalid query string",
        format!("page_size {message}"),
    )
    .with_field("page_size", message))
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
                StatusCode::BAD_REQUEST,
                "PAGE_TOKEN_INVALID",
                "Invalid page token",
                "page_token is not a token this server issued for this list; start again without it",
            )
            .with_field("page_token", "not a token this server issued")
        })
}

/// Trims a page fetched with one extra row and says where the next one starts.
pub fn split_page<T>(
    mut rows: Vec<T>,
    size: u32,
    key: impl Fn(&T) -> String,
    kind: &str,
) -> (Vec<T>, Option<String>) {
    if rows.len() <= size as usize {
        return (rows, None);
    }
    rows.truncate(size as usize);
    let next = rows.last().map(|last| encode_token(kind, &key(last)));
    (rows, next)
}

//! The web dashboard at `/ui`: a single-page app built by Vite from `ui/`
//! into `ui/dist`, which is committed and compiled into the binary, so the
//! server needs neither Node.js nor the network to serve it. Every path
//! under `/ui/` that is not an asset answers the app's page, which routes
//! in the browser; the app talks to the same `/v1` API as any client.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::error::{ApiError, ProblemCode};
use super::etag::tag_of;

/// One file of `ui/dist`.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! assets {
    ($(($path:literal, $content_type:literal)),* $(,)?) => {
        &[$(Asset {
            path: $path,
            content_type: $content_type,
            body: include_bytes!(concat!("../../ui/dist/", $path)),
        }),*]
    };
}

/// Everything Vite builds (`ui/vite.config.ts` names the files without
/// hashes; a test checks this list against `ui/dist`).
static ASSETS: &[Asset] = assets![
    ("index.html", "text/html; charset=utf-8"),
    ("assets/app.js", "text/javascript; charset=utf-8"),
    ("assets/app.css", "text/css; charset=utf-8"),
    ("favicon.svg", "image/svg+xml"),
];

/// The paths of the embedded assets, for the test that compares them with
/// `ui/dist`.
pub fn asset_paths() -> Vec<&'static str> {
    ASSETS.iter().map(|a| a.path).collect()
}

static TAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| HeaderValue::from_str(&tag_of(a.body)).expect("hex is a header value"))
        .collect()
});

/// Scripts, styles and API calls from ctasd itself only; never framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; \
     base-uri 'none'";

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|headers: HeaderMap| async move { serve("index.html", &headers) }))
        .route(
            "/ui/{*path}",
            get(|Path(path): Path<String>, headers: HeaderMap| async move { serve(&path, &headers) }),
        )
}

/// The asset at `path`, or the app's page for a route of the app; a
/// missing asset is a 404.
fn serve(path: &str, headers: &HeaderMap) -> Response {
    let index = ASSETS.iter().position(|a| a.path == path).or_else(|| {
        let is_asset = path.starts_with("assets/") || path.contains('.');
        (!is_asset).then(|| ASSETS.iter().position(|a| a.path == "index.html"))?
    });
    let Some(index) = index else {
        return ApiError::new(
            ProblemCode::RouteNotFound,
            format!("no dashboard asset '/ui/{path}'"),
        )
        .into_response();
    };
    let (asset, tag) = (&ASSETS[index], &TAGS[index]);
    let mut answer = if headers.get(header::IF_NONE_MATCH) == Some(tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.body.into_response()
    };
    let set = answer.headers_mut();
    set.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    set.insert(header::ETAG, tag.clone());
    // Names carry no hash, so the browser asks again each time (a 304).
    set.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    protect_page(set, CONTENT_SECURITY_POLICY);
    answer
}

/// The headers every page ctasd serves carries: its Content-Security-Policy
/// (`policy`, which forbids framing), no framing for browsers that read
/// only `X-Frame-Options`, no type sniffing, no referrer.
pub fn protect_page(set: &mut HeaderMap, policy: &'static str) {
    set.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(policy),
    );
    set.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    set.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    set.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

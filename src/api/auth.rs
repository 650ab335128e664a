//! Bearer-token authentication and roles.
//!
//! The server keeps only SHA-256 digests of tokens; a presented token is
//! hashed and compared with every digest in constant time. Each route needs a
//! permission, each role grants some: `reader` reads, `engine` reports job
//! statuses, attaches its job ids and reads jobs, `operator` manages
//! catalogs and jobs (and settles their stuck actions), `admin` does
//! everything. `/healthz` and `/readyz` need nothing. A refused attempt
//! is logged with the token's name when it is known, never with the token.

use std::fmt;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    Reader,
    Engine,
    Operator,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Engine => "engine",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [Role::Reader, Role::Engine, Role::Operator, Role::Admin]
            .into_iter()
            .find(|r| r.as_str() == s)
    }

    fn grants(self, permission: Permission) -> bool {
        use Permission::*;
        match self {
            Role::Admin => true,
            Role::Reader => matches!(permission, Authenticated | ReadCatalogs | ReadJobs),
            Role::Engine => matches!(
                permission,
                Authenticated | ReadJobs | ReportStatus | UpdateJobs
            ),
            Role::Operator => matches!(
                permission,
                Authenticated
                    | ReadCatalogs
                    | ReadJobs
                    | ManageCatalogs
                    | SubmitJobs
                    | UpdateJobs
                    | OperateJobs
            ),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Open,
    /// Any valid token (routes that do not exist, so 404s reveal nothing).
    Authenticated,
    ReadCatalogs,
    ReadJobs,
    ManageCatalogs,
    SubmitJobs,
    ReportStatus,
    /// Attach an engine's id to a job.
    UpdateJobs,
    /// Retry or give up a job's action.
    OperateJobs,
}

/// The permission a request needs, from its method and path.
pub fn required(method: &Method, path: &str) -> Permission {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let read = *method == Method::GET || *method == Method::HEAD;
    match segments.as_slice() {
        ["healthz"] | ["readyz"] => Permission::Open,
        ["v1", "jobs", _, "status"] if *method == Method::PUT => Permission::ReportStatus,
        ["v1", "jobs", _] if *method == Method::PATCH => Permission::UpdateJobs,
        ["v1", "jobs", _, "actions", _, _] if *method == Method::POST => Permission::OperateJobs,
        ["v1", "jobs", ..] if read => Permission::ReadJobs,
        ["v1", "jobs"] => Permission::SubmitJobs,
        ["v1", "catalogs", ..] | ["v1", "catalog-types"] if read => Permission::ReadCatalogs,
        ["v1", "catalogs", ..] => Permission::ManageCatalogs,
        _ => Permission::Authenticated,
    }
}

struct TokenEntry {
    name: String,
    role: Role,
    digest: [u8; 32],
}

/// Configured tokens, as digests.
#[derive(Default)]
pub struct Tokens {
    entries: Vec<TokenEntry>,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "token entry {line}: expected <name>:<role>:<sha256 hex>, with role reader, engine, operator or admin"
)]
pub struct TokenConfigError {
    pub line: usize,
}

impl Tokens {
    /// Entries `<name>:<role>:<sha256 hex of the token>`, separated by commas
    /// or new lines; `#` starts a comment line.
    pub fn parse(spec: &SecretString) -> Result<Self, TokenConfigError> {
        let mut entries = Vec::new();
        let lines = spec.expose_secret().split([',', '\n']).map(str::trim);
        for (index, entry) in lines
            .enumerate()
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        {
            let error = || TokenConfigError { line: index + 1 };
            let mut parts = entry.splitn(3, ':');
            let (Some(name), Some(role), Some(hex)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(error());
            };
            let role = Role::parse(role).ok_or_else(error)?;
            let digest = decode_hex(hex).ok_or_else(error)?;
            if name.is_empty() {
                return Err(error());
            }
            entries.push(TokenEntry {
                name: name.to_owned(),
                role,
                digest,
            });
        }
        Ok(Self { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry whose digest matches, comparing with every entry in constant time.
    fn find(&self, token: &str) -> Option<&TokenEntry> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for entry in &self.entries {
            if bool::from(entry.digest.ct_eq(&digest)) {
                found = Some(entry);
            }
        }
        found
    }
}

fn decode_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(digest)
}

/// A new random token, and the configuration entry that admits it.
pub fn generate(name: &str, role: Role) -> (SecretString, String) {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    let token = format!("ctasd_{}", URL_SAFE_NO_PAD.encode(bytes));
    let digest: String = Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    (SecretString::from(token), format!("{name}:{role}:{digest}"))
}

/// The middleware: 401 without a valid token, 403 without the permission.
pub async fn authorize(
    State(tokens): State<Arc<Tokens>>,
    request: Request,
    next: Next,
) -> Response {
    let permission = required(request.method(), request.uri().path());
    if tokens.is_empty() || permission == Permission::Open {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    let Some(entry) = presented.and_then(|token| tokens.find(token)) else {
        tracing::warn!(
            method = %request.method(),
            path = %request.uri().path(),
            token_sent = presented.is_some(),
            "request refused: no valid bearer token"
        );
        let mut response = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
            "Authentication required",
            "send a valid token as 'Authorization: Bearer <token>'",
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return response;
    };
    if !entry.role.grants(permission) {
        tracing::warn!(token = %entry.name, role = %entry.role, method = %request.method(), path = %request.uri().path(), "request refused: role lacks permission");
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            "Forbidden",
            format!(
                "role '{}' may not {} {}",
                entry.role,
                request.method(),
                request.uri().path()
            ),
        )
        .into_response();
    }
    next.run(request).await
}

/// Without tokens ctasd listens on loopback only; a web page the user
/// visits could still reach it through DNS rebinding (its own name resolved
/// to 127.0.0.1) or send it requests from its own origin. So in that mode a
/// request must name a loopback host, and come from a loopback page if it
/// comes from a page at all.
pub async fn loopback_hosts_only(request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok());
    let foreign_host = host.filter(|h| !is_loopback_authority(h));
    let foreign_origin = origin.filter(|o| *o != "null").filter(|o| {
        !o.split_once("://")
            .is_some_and(|(_, a)| is_loopback_authority(a))
    });
    if let Some(named) = foreign_host.or(foreign_origin) {
        tracing::warn!(named = %named.chars().take(100).collect::<String>(), "request refused: not addressed to loopback");
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "HOST_NOT_ALLOWED",
            "Host not allowed",
            "without tokens ctasd answers only requests addressed to localhost or a loopback \
             address, from no page or a loopback page; configure tokens to serve other names",
        )
        .into_response();
    }
    next.run(request).await
}

/// `localhost`, a name under `.localhost`, `127.x.y.z` or `[::1]`, with any port.
fn is_loopback_authority(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map(|(h, _)| h).unwrap_or(rest),
        None => authority
            .rsplit_once(':')
            .map(|(h, _)| h)
            .unwrap_or(authority),
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_authorities_are_told_from_foreign_ones() {
        for loopback in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:8080",
            "127.1.2.3",
            "[::1]:80",
            "api.localhost",
            "LOCALHOST.",
        ] {
            assert!(is_loopback_authority(loopback), "{loopback}");
        }
        for foreign in [
            "attacker.example.com",
            "attacker.example.com:8080",
            "10.0.0.1",
            "[::2]",
            "localhost.evil.com",
            "127.0.0.1.evil.com",
        ] {
            assert!(!is_loopback_authority(foreign), "{foreign}");
        }
    }

    #[test]
    fn each_route_needs_the_documented_permission() {
        use Permission::*;
        let cases = [
            (Method::GET, "/healthz", Open),
            (Method::GET, "/readyz", Open),
            (Method::GET, "/v1/catalog-types", ReadCatalogs),
            (Method::GET, "/v1/catalogs/pg/databases", ReadCatalogs),
            (Method::POST, "/v1/catalogs", ManageCatalogs),
            (Method::PATCH, "/v1/catalogs/pg", ManageCatalogs),
            (Method::DELETE, "/v1/catalogs/pg", ManageCatalogs),
            (Method::GET, "/v1/jobs/abc/events", ReadJobs),
            (Method::POST, "/v1/jobs", SubmitJobs),
            (Method::PUT, "/v1/jobs/abc/status", ReportStatus),
            (Method::PATCH, "/v1/jobs/abc", UpdateJobs),
            (Method::POST, "/v1/jobs/abc/actions/7/retry", OperateJobs),
            (Method::GET, "/v2/anything", Authenticated),
        ];
        for (method, path, permission) in cases {
            assert_eq!(required(&method, path), permission, "{method} {path}");
        }
    }

    #[test]
    fn generated_tokens_are_admitted_with_their_role_and_nothing_else_is() {
        let (token, line) = generate("flink", Role::Engine);
        let tokens = Tokens::parse(&SecretString::from(format!("# engines\n{line}\n"))).unwrap();
        let entry = tokens.find(token.expose_secret()).unwrap();
        assert_eq!((entry.name.as_str(), entry.role), ("flink", Role::Engine));
        assert!(tokens.find("ctasd_wrong").is_none());
        assert!(
            !line.contains(token.expose_secret()),
            "the configuration holds only the digest"
        );
    }

    #[test]
    fn malformed_entries_are_refused_by_line() {
        for bad in ["x:reader", "x:root:00", ":reader:", "x:reader:zz"] {
            assert!(
                Tokens::parse(&SecretString::from(bad.to_owned())).is_err(),
                "{bad}"
            );
        }
    }
}

//! The OpenAPI document as clients generate SDKs from it: written by the
//! handlers' annotations, then finished here for every operation at once
//! (bearer security with its 401 and 403, the 431 any request can get, a
//! `default` problem answer so a typed client keeps a 5xx's `error_id`,
//! and the answers every operation shares as `components/responses`).

use utoipa::openapi::Required;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, PathItem, Ref, RefOr, Response, ResponseBuilder};

use super::error::PROBLEM_JSON;
pub use crate::domain::options::StringMap;
use crate::service::catalog_type_names;

/// The values of option `type` this build accepts, as an enum.
pub struct CatalogTypeName;

impl utoipa::PartialSchema for CatalogTypeName {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "A catalog type: the value of option `type` that picks its factory.",
            ))
            .enum_values(Some(catalog_type_names()))
            .examples(["jdbc"])
            .into()
    }
}

impl utoipa::ToSchema for CatalogTypeName {}

/// A problem's `code`: one of [`ProblemCode`](super::error::ProblemCode)'s,
/// or a code this client does not know yet, since codes are added (never
/// changed or removed) between versions.
pub fn problem_code_or_newer() -> RefOr<Schema> {
    AnyOfBuilder::new()
        .item(Ref::from_schema_name("ProblemCode"))
        .item(ObjectBuilder::new().schema_type(Type::String))
        .description(Some(
            "A stable, machine-readable code. Published codes keep their meaning; new ones \
             may be added in any version, so a client treats a code it does not know by \
             the HTTP status.",
        ))
        .into()
}

/// Answers every operation can give, by status: kept once in
/// `components/responses` and referenced.
const SHARED: &[(&str, &str, &str)] = &[
    (
        "401",
        "Unauthenticated",
        "`UNAUTHENTICATED`: no valid bearer token",
    ),
    (
        "403",
        "Forbidden",
        "`FORBIDDEN`: the token's role may not do this; `HOST_NOT_ALLOWED`: without tokens, \
         the request was not addressed to loopback",
    ),
    ("408", "RequestTimeout", "`REQUEST_TIMEOUT`"),
    ("413", "BodyTooLarge", "`BODY_TOO_LARGE`"),
    (
        "415",
        "ContentTypeUnsupported",
        "`CONTENT_TYPE_UNSUPPORTED`",
    ),
    ("431", "HeadersTooLarge", "`HEADERS_TOO_LARGE`"),
    ("503", "StoreUnavailable", "`STORE_UNAVAILABLE`"),
    (
        "default",
        "Problem",
        "Any other problem, e.g. `INTERNAL` (500) with the `error_id` the log shows",
    ),
];

/// Finishes the document for every operation.
pub fn finish(api: &mut OpenApi) {
    let components = api.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
    );
    for (_, name, description) in SHARED {
        components
            .responses
            .insert((*name).to_owned(), RefOr::T(problem_answer(description)));
    }
    for (path, item) in api.paths.paths.iter_mut() {
        if let Some(post) = &mut item.post {
            accept_idempotency_key(post);
        }
        // Liveness answers before the store is reached, and always 200.
        let reaches_store = path != "/healthz";
        for operation in operations(item) {
            require_bearer(operation);
            share_responses(operation, reaches_store);
        }
    }
}

/// Every POST takes an `Idempotency-Key` (see [`super::idempotency`]).
fn accept_idempotency_key(operation: &mut Operation) {
    let key = ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "Makes a retry safe: the first final answer to this request (2xx, or a 4xx \
             other than 401, 403, 408 and 429) is kept for the key's lifetime (24 hours \
             unless configured otherwise) and replayed, with `Idempotent-Replayed: true`, \
             to a request with the same key; the key on a different request is 422 \
             `IDEMPOTENCY_KEY_REUSED`, and while the first runs, 409 \
             `IDEMPOTENCY_KEY_IN_USE`. 1 to 255 visible ASCII characters, e.g. a UUID.",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(255))
                .pattern(Some("^[!-~]+$")),
        ))
        .build();
    operation
        .parameters
        .get_or_insert_with(Vec::new)
        .push(RefOr::T(key));
}

/// Bearer security on every operation that declares none of its own;
/// `security(())` on a handler (the health checks) means open to anyone,
/// which OpenAPI spells as no requirement at all.
fn require_bearer(operation: &mut Operation) {
    if let Some(declared) = &mut operation.security {
        declared.retain(|requirement| *requirement != SecurityRequirement::default());
        return;
    }
    operation.security = Some(vec![SecurityRequirement::new(
        "bearer",
        Vec::<String>::new(),
    )]);
    for status in ["401", "403"] {
        operation
            .responses
            .responses
            .insert(status.into(), shared(status));
    }
}

/// The shared answers as references, so that no handler repeats them:
/// what any request can get (408, 431, default), what a request with a
/// body can get (413, 415), and 503 where the store is reached. An answer a
/// handler words its own way for the same status is kept.
fn share_responses(operation: &mut Operation, reaches_store: bool) {
    let has_body = operation.request_body.is_some();
    let responses = &mut operation.responses.responses;
    for (status, _, description) in SHARED {
        let applies = match *status {
            "408" | "431" | "default" => true,
            "413" | "415" => has_body,
            "503" => reaches_store,
            _ => false,
        };
        let inline_copy = matches!(
            responses.get(*status),
            Some(RefOr::T(answer)) if answer.description == *description
        );
        if inline_copy || (applies && !responses.contains_key(*status)) {
            responses.insert((*status).into(), shared(status));
        }
    }
}

fn shared(status: &str) -> RefOr<Response> {
    let (_, name, _) = SHARED
        .iter()
        .find(|(s, _, _)| *s == status)
        .expect("a shared status");
    RefOr::Ref(Ref::new(format!("#/components/responses/{name}")))
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
        &mut item.head,
        &mut item.options,
        &mut item.trace,
    ]
    .into_iter()
    .flatten()
}

fn problem_answer(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            PROBLEM_JSON,
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .build()
}

//! `GET /v1/catalog-types`: what each factory accepts, so clients can build
//! forms and validate before they register.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Authorized, need};
use crate::domain::options::OptionSpec;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_catalog_types))
}

/// One option of a catalog type.
#[derive(Debug, Serialize, ToSchema)]
pub struct CatalogTypeOption {
    #[schema(example = "base-url")]
    pub key: String,
    pub required: bool,
    /// Shown as `******` in every response and encrypted at rest.
    pub sensitive: bool,
    /// Used when the option is absent; `null` when there is none.
    #[schema(required = true)]
    pub default: Option<String>,
    pub description: String,
}

/// A catalog factory.
#[derive(Debug, Serialize, ToSchema)]
pub struct CatalogType {
    /// The value of option `type` that selects it.
    #[serde(rename = "type")]
    #[schema(value_type = super::openapi::CatalogTypeName)]
    pub catalog_type: String,
    pub description: String,
    pub options: Vec<CatalogTypeOption>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"catalog_types": [{
    "type": "filesystem",
    "description": "Tables as directories of data files under a warehouse directory.",
    "options": [
        {"key": "type", "required": true, "sensitive": false, "default": null, "description": "Selects the catalog type."},
        {"key": "path", "required": true, "sensitive": false, "default": null,
         "description": "Absolute path of the warehouse directory; it must exist and be writable."}
    ]
}]}))]
pub struct CatalogTypeList {
    pub catalog_types: Vec<CatalogType>,
}

/// The catalog types this server can open, with their options.
#[utoipa::path(
    get,
    path = "/v1/catalog-types",
    tag = "catalogs",
    responses((status = 200, description = "Every catalog type, by name", body = CatalogTypeList))
)]
async fn list_catalog_types(
    _: Authorized<need::ReadCatalogs>,
    State(state): State<AppState>,
) -> axum::Json<CatalogTypeList> {
    let catalog_types = state
        .services
        .catalog_types()
        .into_iter()
        .map(|t| CatalogType {
            catalog_type: t.identifier.into(),
            description: t.description.into(),
            options: t.options.iter().map(CatalogTypeOption::from).collect(),
        })
        .collect();
    axum::Json(CatalogTypeList { catalog_types })
}

impl From<&OptionSpec> for CatalogTypeOption {
    fn from(spec: &OptionSpec) -> Self {
        Self {
            key: spec.key.into(),
            required: spec.required,
            sensitive: spec.sensitive(),
            default: spec.default.map(Into::into),
            description: spec.description.into(),
        }
    }
}

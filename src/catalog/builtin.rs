//! The catalog types this build knows: the one list. A new type is a
//! module beside `memory`, `jdbc` and `filesystem`, and a line here.

use std::sync::Arc;

use super::installation::Installation;
use super::protected::ProtectedPaths;
use super::registry::FactoryRegistry;
use super::{filesystem, jdbc, memory};

/// The built-in types: `generic_in_memory`, `jdbc`, `filesystem`; none of
/// them may point at `protected`, and the markers they leave name
/// `installation`.
pub fn registry(protected: Arc<ProtectedPaths>, installation: Installation) -> FactoryRegistry {
    FactoryRegistry::new(vec![
        Box::new(memory::MemoryCatalogFactory),
        Box::new(jdbc::JdbcCatalogFactory::new(
            protected.clone(),
            installation.clone(),
        )),
        Box::new(filesystem::FilesystemCatalogFactory::new(
            protected,
            installation,
        )),
    ])
}

/// The values of option `type` this build accepts, for the OpenAPI
/// document (which is written before any data directory exists).
pub fn type_names() -> Vec<&'static str> {
    registry(Arc::default(), Installation::default())
        .factories()
        .map(|factory| factory.identifier())
        .collect()
}

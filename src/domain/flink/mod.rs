//! Flink's own words, read and written as Flink does: its SQL data types
//! (`types`), a table as its catalogs describe one (`table`, with the
//! `CatalogPropertiesUtil` map), and its catalog statements (`statement`).
//! They change when Flink does, and with nothing else.

pub mod statement;
pub mod table;
pub mod types;

-- Marks this database as a ctasd store. Catalogs refuse any database that
-- holds this table, so no hook can create, replace or drop a table of a
-- store, whichever host name, port, socket or file path reaches it.
CREATE TABLE ctasd_store (
    note TEXT NOT NULL
);
INSERT INTO ctasd_store (note)
VALUES ('This database is a ctasd store. ctasd catalogs never point at it.');

-- Schema versions Datasette's _internal database last recorded, per attached database.
select database_name, schema_version from databases

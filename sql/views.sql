-- DuckDB views over the bridge_lake Parquet lake, one per table (Hive partition `drive`).
-- Set the lake root first (a local path or s3://bucket/prefix; for S3 load httpfs and a secret):
--   SET VARIABLE lake = '/path/to/lake';
--   .read sql/views.sql
-- Drive ids are text: hive_types keeps leading zeros ('0001' is not 1).

CREATE OR REPLACE VIEW raw_manifest AS
SELECT * FROM read_parquet(getvariable('lake') || '/raw/manifest/*/*.parquet',
                           hive_partitioning = true, hive_types = {'drive': VARCHAR});

CREATE OR REPLACE VIEW raw_drives AS
SELECT * FROM read_parquet(getvariable('lake') || '/raw/drives/*/*.parquet',
                           hive_partitioning = true, hive_types = {'drive': VARCHAR});

-- One row per drive: its metadata and what landed, by format.
CREATE OR REPLACE VIEW drive_summary AS
SELECT d.drive, d.vehicle, d.source, d.recorded_at, d.file_count, d.total_bytes,
       d.recording_count, d.metadata_problem,
       count(*) FILTER (WHERE m.format = 'adtf') AS adtf_files,
       count(*) FILTER (WHERE m.format = 'nclt') AS nclt_files,
       count(*) FILTER (WHERE NOT m.readable) AS unreadable_files
FROM raw_drives d LEFT JOIN raw_manifest m USING (drive)
GROUP BY ALL
ORDER BY d.drive;

-- lidar_dropout: scans missing, i.e. a step between consecutive scans of a lidar stream longer
-- than $gap_factor times the stream's median step (and at least $min_gap_s). Reads
-- normalized_lidar_scans (stream, time_ns, end_time_ns); the window runs from the end of the
-- last scan before the gap to the start of the first one after it.
-- score: the step over the stream's threshold.
WITH scans AS (
    SELECT stream, time_ns,
           lag(end_time_ns) OVER o AS prev_end,
           time_ns - lag(time_ns) OVER o AS step
    FROM normalized_lidar_scans
    WHERE drive = $drive
    WINDOW o AS (PARTITION BY stream ORDER BY time_ns)
),
limits AS (
    SELECT stream, greatest($gap_factor * median(step), $min_gap_s * 1e9) AS limit_ns
    FROM scans
    GROUP BY stream
)
SELECT $drive AS drive, least(prev_end, time_ns) AS t_start_ns, time_ns AS t_end_ns,
       'lidar_dropout' AS tag, step / limit_ns AS score
FROM scans JOIN limits USING (stream)
WHERE step > limit_ns
ORDER BY t_start_ns

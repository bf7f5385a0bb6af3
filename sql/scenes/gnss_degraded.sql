-- gnss_degraded: a GNSS stream without fixes for more than $max_gap_s (between two fixes, or
-- between the drive's start or end and the stream's first or last fix), or whose best fix
-- mode within +-$mode_window_s / 2 is below $min_fix_mode (NCLT writes a 2D and a 3D row per
-- fix, so single rows are not judged). Reads normalized_gnss (time_ns, stream, fix_mode) and
-- the drive's extent from normalized_streams.
-- score: gap over $max_gap_s, or $min_fix_mode over the best mode seen.
WITH fixes AS (
    SELECT stream, time_ns, fix_mode
    FROM normalized_gnss
    WHERE drive = $drive
),
extent AS (
    SELECT min(first_time_ns) AS first_ns, max(last_time_ns) AS last_ns
    FROM normalized_streams
    WHERE drive = $drive
),
steps AS (
    SELECT stream, time_ns AS t1,
           coalesce(lag(time_ns) OVER o, (SELECT first_ns FROM extent)) AS t0
    FROM fixes
    WINDOW o AS (PARTITION BY stream ORDER BY time_ns)
    UNION ALL
    SELECT stream, (SELECT last_ns FROM extent) AS t1, max(time_ns) AS t0
    FROM fixes
    GROUP BY stream
),
gaps AS (
    SELECT t0 AS t_start_ns, t1 AS t_end_ns, (t1 - t0) / ($max_gap_s * 1e9) AS score
    FROM steps
    WHERE t1 - t0 > $max_gap_s * 1e9
),
best AS (
    SELECT stream, time_ns,
           max(fix_mode) OVER (PARTITION BY stream ORDER BY time_ns
                               RANGE BETWEEN CAST($mode_window_s * 5e8 AS BIGINT) PRECEDING
                                         AND CAST($mode_window_s * 5e8 AS BIGINT) FOLLOWING)
               AS best
    FROM fixes
    WHERE fix_mode IS NOT NULL
),
runs AS (
    SELECT stream, time_ns, best, best < $min_fix_mode AS low,
           sum(CASE WHEN best >= $min_fix_mode THEN 1 ELSE 0 END)
               OVER (PARTITION BY stream ORDER BY time_ns ROWS UNBOUNDED PRECEDING) AS run
    FROM best
),
modes AS (
    SELECT min(time_ns) AS t_start_ns, max(time_ns) AS t_end_ns,
           $min_fix_mode / greatest(min(best), 1) AS score
    FROM runs
    WHERE low
    GROUP BY stream, run
)
SELECT $drive AS drive, t_start_ns, t_end_ns, 'gnss_degraded' AS tag, score
FROM (SELECT * FROM gaps UNION ALL SELECT * FROM modes)
ORDER BY t_start_ns
